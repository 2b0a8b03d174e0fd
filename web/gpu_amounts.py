"""How the pages write an amount of GPU: whole GPUs, a KAI share (a fraction of a GPU or GPU memory) and MIG
instances by profile, and which pod is KAI's reservation pod rather than a user.

One place for these words, so that the job, pod, node, GPU, project, queue and fleet pages say the same
thing: "0.5 of an L40S, 22.5 GiB", "20 GiB of GPU memory (0.44 of an L40S)", "2 × 1g.10gb", "8 GPUs". The
inputs are the inventory's states as ``collectors.mapping`` writes them: a pod's or job's ``gpus`` (or
``gpus_per_pod``), ``gpu_share`` ({fraction, memory_mib}) and ``mig`` ({profile: count}); a GPU's ``model``,
``shares`` ([{pod, fraction, memory_mib}]), ``reservation`` and ``mig`` ([{gi_id, profile, pod, memory_mib}]).
Pure: no query, no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collectors.mapping.kai_sharing import RESERVATION_NAMESPACE

# KAI's reservation pods: in their own namespace, labelled so (KAI Scheduler's resource-reservation pods).
RESERVATION_LABELS = {"app": "runai-reservation", "app.kubernetes.io/name": "kai-resource-reservation"}
# Letters whose English name starts with a vowel sound: "an A100", "an H100", "an L40S", but "a T4", "a GPU".
_VOWEL_SOUND = frozenset("AEFHILMNORSX8")


def is_reservation(namespace: str, labels: Mapping[str, str] | None = None) -> bool:
    """Whether a pod is KAI's reservation pod (holding a shared GPU's device for its shares), not a user's."""
    if namespace == RESERVATION_NAMESPACE:
        return True
    return any((labels or {}).get(k) == v for k, v in RESERVATION_LABELS.items())


def is_reservation_key(pod: str) -> bool:
    """:func:`is_reservation` of a "namespace/name" pod key."""
    return is_reservation(pod.partition("/")[0])


def product_short(product: str | None) -> str:
    """Short product name: "NVIDIA-L40S" → "L40S", "NVIDIA A100 SXM4 80GB" → "A100"; "" when unknown."""
    words = (product or "").replace("-", " ").split()
    if words and words[0].upper() == "NVIDIA":
        words = words[1:]
    return words[0] if words else ""


def a_gpu(product: str | None) -> str:
    """The product with its article: "an L40S", "a T4", or "a GPU" when the product is unknown."""
    short = product_short(product)
    if not short:
        return "a GPU"
    return f"{'an' if short[0].upper() in _VOWEL_SOUND else 'a'} {short}"


def gib(mib: float | int | None) -> str:
    """GPU memory in GiB as people say it: 24576 → "24 GiB", 23034 → "22.5 GiB"; "" when unknown."""
    if mib is None:
        return ""
    value = round(float(mib) / 1024, 1)
    return f"{value:g} GiB"


def amount(x: float | int | None) -> str:
    """A GPU count that may be a fraction: 0.5 → "0.5", 3.0 → "3"; "" when unknown."""
    if x is None:
        return ""
    return f"{round(float(x), 3):g}"


def share_words(
    fraction: float | None,
    memory_mib: float | None,
    product: str | None = "",
    gpu_memory_mib: float | None = None,
) -> str:
    """One share: "0.5 of an L40S, 22.5 GiB" (gpu-fraction), "20 GiB of GPU memory (0.44 of an L40S)"
    (gpu-memory). The memory of a fraction is its part of the GPU's memory when the share does not say."""
    if fraction is not None:
        memory = memory_mib if memory_mib else (fraction * gpu_memory_mib if gpu_memory_mib else None)
        mem = gib(memory)
        return f"{amount(fraction)} of {a_gpu(product)}" + (f", {mem}" if mem else "")
    if memory_mib:
        part = f" ({amount(memory_mib / gpu_memory_mib)} of {a_gpu(product)})" if gpu_memory_mib else ""
        return f"{gib(memory_mib)} of GPU memory{part}"
    return "a GPU share of unknown size"


def mig_words(mig: Mapping[str, int] | None) -> str:
    """MIG instances by profile: {"1g.10gb": 2, "3g.40gb": 1} → "2 × 1g.10gb + 1 × 3g.40gb"; "" for none."""
    return " + ".join(f"{n} × {p}" for p, n in sorted((mig or {}).items()) if n)


def whole_words(n: int | float | None) -> str:
    return f"{amount(n or 0)} GPU{'' if n == 1 else 's'}"


def request_words(
    gpus: int | float | None,
    share: Mapping[str, Any] | None = None,
    mig: Mapping[str, int] | None = None,
    product: str | None = "",
    gpu_memory_mib: float | None = None,
) -> str:
    """What one pod asks: "8 GPUs", "0.5 of an L40S, 22.5 GiB", "1 × 3g.40gb", "no GPU"."""
    parts = []
    if gpus:
        parts.append(whole_words(gpus))
    if mig_words(mig):
        parts.append(mig_words(mig))
    if share:
        parts.append(share_words(share.get("fraction"), share.get("memory_mib"), product, gpu_memory_mib))
    return " + ".join(parts) or "no GPU"


def state_request_words(
    state: Mapping[str, Any] | None, product: str = "", gpu_memory_mib: float | None = None
) -> str:
    """:func:`request_words` of a pod's state (``gpus``) or a job's (``gpus_per_pod``, per pod)."""
    s = state or {}
    gpus = s.get("gpus_per_pod", s.get("gpus"))
    return request_words(gpus, s.get("gpu_share"), s.get("mig"), product, gpu_memory_mib)


def is_fractional(state: Mapping[str, Any] | None) -> bool:
    """Whether a pod or job asks a share or MIG instances (its whole-GPU count alone says too little)."""
    s = state or {}
    return bool(s.get("gpu_share") or mig_words(s.get("mig")))


def per_pod_words(state: Mapping[str, Any] | None) -> str:
    """What one pod of a job (or a pod) asks, shortest: a single MIG instance is its profile ("1g.10gb")."""
    s = state or {}
    mig = {p: n for p, n in (s.get("mig") or {}).items() if n}
    whole = s.get("gpus_per_pod", s.get("gpus"))
    if mig and not whole and not s.get("gpu_share") and sum(mig.values()) == 1:
        return next(iter(mig))
    return state_request_words(s)


def units_of(state: Mapping[str, Any] | None) -> float | None:
    """The GPUs a pod or job counts in its queue: its ``gpu_units`` (shares and MIG included), else its whole
    GPUs; None when unknown (a gpu-memory share before it lands on a GPU of known memory)."""
    s = state or {}
    if s.get("gpu_units") is not None:
        return float(s["gpu_units"])
    if s.get("gpu_share"):
        return None
    whole = s.get("gpus_total", s.get("gpus"))
    return None if whole is None else float(whole)


def job_words(state: Mapping[str, Any] | None) -> str:
    """A job's request in one cell: "4 × 0.5 of a GPU", "2 × 1g.10gb", "20 GiB of GPU memory", "16 GPUs"."""
    s = state or {}
    pods = s.get("pods") if isinstance(s.get("pods"), int) else 1
    per = per_pod_words(s)
    return per if pods == 1 else f"{pods} × {per}"


def job_note(state: Mapping[str, Any] | None) -> str:
    """What a list's GPU count (its units) leaves unsaid: "share", "2 × 20 GiB share", "2 × 1g.10gb"; ""
    for whole GPUs."""
    s = state or {}
    share = s.get("gpu_share") or {}
    pods = s.get("pods") if isinstance(s.get("pods"), int) else 1
    if share:
        size = "" if share.get("fraction") is not None else f"{gib(share.get('memory_mib'))} "
        return f"{pods} × {size}share" if pods != 1 else f"{size}share"
    return job_words(s) if is_fractional(s) else ""
