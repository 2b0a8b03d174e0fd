"""The what-if page's edits: read from the query string (``parse_edits``) and applied to a copy of the state at t
(``whatif_apply.apply_edits``); ``incidents.diagnosis.whatif`` lists their forms and compares the passes before and after.

Pure: no database, no simulator.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

KINDS = (
    "quota",
    "limit",
    "cpu_quota",
    "cpu_limit",
    "memory_quota",
    "memory_limit",
    "cordon",
    "uncordon",
    "repair",
    "add",
    "remove",
    "hold",
    "request",
    "onto",
)
# KAI's CPU and memory quota and limit of a queue, project or department, as the inventory's state carries them
# (``resources._KEYS``: cores and bytes)
RESOURCE_KEYS = {
    "cpu_quota": "quota_cpu_cores",
    "cpu_limit": "limit_cpu_cores",
    "memory_quota": "quota_memory_bytes",
    "memory_limit": "limit_memory_bytes",
}
MAX_EDITS = 20  # edits in one URL
MAX_ADD = 64  # nodes one ``add`` makes
MAX_ADDED = 256  # nodes all ``add`` edits make together
MAX_GPUS = 100_000  # a quota or limit
MAX_PODS = 1024
MAX_GPUS_PER_POD = 64
MAX_CPU_CORES = 1_000_000  # a CPU quota or limit
MAX_MEMORY_BYTES = 2**60  # a memory quota or limit: 1 EiB

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}"
_PATTERNS = {
    "quota": re.compile(rf"^(?P<name>{_NAME}):(?P<n>\d{{1,9}}(\.\d{{1,4}})?)$"),
    "limit": re.compile(rf"^(?P<name>{_NAME}):(?P<n>\d{{1,9}}(\.\d{{1,4}})?)$"),
    "cordon": re.compile(rf"^(?P<name>{_NAME})$"),
    "uncordon": re.compile(rf"^(?P<name>{_NAME})$"),
    "repair": re.compile(rf"^(?P<name>{_NAME})$"),
    "add": re.compile(rf"^(?P<name>{_NAME}):(?P<n>\d{{1,6}})$"),
    "remove": re.compile(rf"^(?P<ns>{_NAME})/(?P<name>{_NAME})$"),
    "hold": re.compile(rf"^(?P<ns>{_NAME})/(?P<name>{_NAME})$"),
    "request": re.compile(
        rf"^(?P<ns>{_NAME})/(?P<name>{_NAME}):(?P<pods>\d{{1,6}})x"
        r"(?:(?P<share>0\.\d{1,4})|(?P<profile>\d{1,2}g\.\d{1,4}gb)|(?P<gpus>\d{1,4}))$"
    ),
    "onto": re.compile(rf"^(?P<ns>{_NAME})/(?P<name>{_NAME}):(?P<node>{_NAME})$"),
    # cores ("96", "0.5") or millicores ("500m")
    "cpu_quota": re.compile(
        rf"^(?P<name>{_NAME}):(?:(?P<cores>\d{{1,9}}(\.\d{{1,3}})?)|(?P<milli>\d{{1,12}})m)$"
    ),
    # bytes, or a Kubernetes quantity ("256Gi", "1.5Ti", "500G")
    "memory_quota": re.compile(
        rf"^(?P<name>{_NAME}):(?P<n>\d{{1,19}}(\.\d{{1,6}})?)(?P<unit>Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
    ),
}
_PATTERNS["cpu_limit"] = _PATTERNS["cpu_quota"]
_PATTERNS["memory_limit"] = _PATTERNS["memory_quota"]
_MEMORY_UNITS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_FORMS = {
    "quota": "<name>:<gpus>",
    "limit": "<name>:<gpus>",
    "cordon": "<node>",
    "uncordon": "<node>",
    "repair": "<node>",
    "add": "<node>:<n>",
    "remove": "<namespace>/<job>",
    "hold": "<namespace>/<job>",
    "request": "<namespace>/<job>:<pods>x<gpus per pod | share 0.x | MIG profile 1g.10gb>",
    "onto": "<namespace>/<job>:<node>",
    "cpu_quota": "<name>:<cores> (96, 0.5 or 500m)",
    "cpu_limit": "<name>:<cores> (96, 0.5 or 500m)",
    "memory_quota": "<name>:<bytes> (274877906944 or 256Gi)",
    "memory_limit": "<name>:<bytes> (274877906944 or 256Gi)",
}


class EditError(ValueError):
    """An edit that cannot be read or applied; ``param`` names the query parameter and its value."""

    def __init__(self, kind: str, raw: str, message: str) -> None:
        super().__init__(f"{kind}={raw}: {message}")
        self.param = kind
        self.raw = raw


@dataclass(frozen=True)
class Edit:
    """One edit of the state at t, as the query string writes it."""

    kind: str
    name: str  # queue/project/department, node or job name
    namespace: str = ""  # a job's
    number: float = 0  # quota/limit GPUs (CPU: cores, memory: bytes), nodes to add, pods
    gpus: int = 0  # GPUs per pod (request)
    share: float = 0  # a share of one GPU per pod (request), instead of whole GPUs
    profile: str = ""  # a MIG profile per pod (request); the node whose place the job may take (onto)

    @property
    def value(self) -> str:
        """The query value that writes this edit back."""
        n = f"{self.number:g}"
        if self.kind in RESOURCE_KEYS:
            return f"{self.name}:{self.amount}"
        return {
            "quota": f"{self.name}:{n}",
            "limit": f"{self.name}:{n}",
            "add": f"{self.name}:{n}",
            "remove": f"{self.namespace}/{self.name}",
            "hold": f"{self.namespace}/{self.name}",
            "request": f"{self.namespace}/{self.name}:{n}x{self.per_pod}",
            "onto": f"{self.namespace}/{self.name}:{self.profile}",
        }.get(self.kind, self.name)

    @property
    def amount(self) -> str:
        """A CPU or memory edit's number as its query value writes it: cores ("96", "0.5"), or memory as the
        largest binary unit that divides it ("256Gi"), else bytes."""
        if self.kind.startswith("cpu_"):
            return cores_text(self.number)
        return memory_text(self.number)

    @property
    def per_pod(self) -> str:
        """What each pod of a request edit asks: "8", "0.5" (a share), "1g.10gb" (a MIG instance)."""
        return self.profile or (f"{self.share:g}" if self.share else str(self.gpus))

    @property
    def words(self) -> str:
        n = f"{self.number:g}"
        job = f"{self.namespace}/{self.name}"
        if self.kind in RESOURCE_KEYS:
            amount = cores_words(self.number) if self.kind.startswith("cpu_") else memory_words(self.number)
            return f"{bound_words(self.kind)} of {self.name} → {amount}"
        return {
            "quota": f"quota of {self.name} → {n} GPUs",
            "limit": f"limit of {self.name} → {n} GPUs",
            "cordon": f"cordon {self.name}",
            "uncordon": f"uncordon {self.name}",
            "repair": f"repair {self.name}",
            "add": f"add {n} node(s) like {self.name}",
            "remove": f"remove {job}",
            "hold": f"hold {job}",
            "request": f"{job} asks {n} pod(s) × {self._per_pod_words}",
            "onto": f"let {job} onto nodes like {self.profile}",
        }[self.kind]

    @property
    def _per_pod_words(self) -> str:
        if self.profile:
            return f"MIG {self.profile}"
        if self.share:
            return f"{self.share:g} of a GPU"
        return f"{self.gpus} GPUs"


def bound_words(kind: str) -> str:
    """ "CPU limit", "memory quota"."""
    what, bound = kind.split("_")
    return f"{'CPU' if what == 'cpu' else 'memory'} {bound}"


def cores_text(cores: float) -> str:
    """Cores as a query value writes them: "96", "0.5" (to the millicore)."""
    return f"{round(cores, 3):.3f}".rstrip("0").rstrip(".")


def memory_text(n: float) -> str:
    """Bytes as a Kubernetes quantity in the largest unit that divides them ("256Gi", "500G"), else the bytes."""
    b = int(n)
    for unit, size in sorted(_MEMORY_UNITS.items(), key=lambda u: -u[1]):
        if unit and b >= size and b % size == 0:
            return f"{b // size}{unit}"
    return str(b)


def cores_words(cores: float) -> str:
    return f"{cores_text(cores)} core{'' if cores == 1 else 's'}"


def memory_words(n: float) -> str:
    """ "256 GiB", "1.5 TiB", "512 MiB"; bytes below a KiB."""
    for unit in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        size = _MEMORY_UNITS[unit]
        if n >= size:
            return f"{round(n / size, 2):g} {unit}B"
    return f"{int(n)} bytes"


def _resource_amount(kind: str, raw: str, g: dict[str, Any]) -> float:
    """A CPU edit's cores or a memory edit's bytes (rounded up to a whole byte, as Kubernetes does), within
    ``MAX_CPU_CORES`` or ``MAX_MEMORY_BYTES``."""
    if kind.startswith("cpu_"):
        cores = int(g["milli"]) / 1000 if g.get("milli") is not None else float(g["cores"])
        if not math.isfinite(cores) or cores > MAX_CPU_CORES:
            raise EditError(kind, raw, f"cores must be between 0 and {MAX_CPU_CORES:,}")
        return round(cores, 3)
    exact = Decimal(g["n"]) * _MEMORY_UNITS[g.get("unit") or ""]  # the pattern admits digits only
    n = int(exact.to_integral_value(rounding=ROUND_CEILING))
    if n > MAX_MEMORY_BYTES:
        raise EditError(kind, raw, "memory must be between 0 and 1Ei")
    return n


def parse_edit(kind: str, raw: str) -> Edit:
    """One query value as an edit; ``EditError`` names the parameter and the form it expects."""
    pattern = _PATTERNS.get(kind)
    m = pattern.match(raw) if pattern is not None else None
    if m is None:
        if kind in RESOURCE_KEYS and re.search(r":\s*-", raw):
            raise EditError(kind, raw, f"a {bound_words(kind)} is 0 or more (expected {_FORMS[kind]})")
        raise EditError(kind, raw, f"expected {_FORMS.get(kind, 'a known edit')}")
    g = m.groupdict()
    if kind in RESOURCE_KEYS:
        return Edit(kind, g["name"], number=_resource_amount(kind, raw, g))
    if kind in ("quota", "limit"):
        n = float(g["n"])
        if not math.isfinite(n) or n > MAX_GPUS:
            raise EditError(kind, raw, f"GPUs must be between 0 and {MAX_GPUS}")
        return Edit(kind, g["name"], number=n)
    if kind == "add":
        n = int(g["n"])
        if not 1 <= n <= MAX_ADD:
            raise EditError(kind, raw, f"add between 1 and {MAX_ADD} nodes")
        return Edit(kind, g["name"], number=n)
    if kind == "request":
        pods, gpus = int(g["pods"]), int(g["gpus"] or 0)
        share = float(g["share"] or 0)
        if g["share"] is not None and not 0 < share < 1:
            raise EditError(kind, raw, "a share is between 0 and 1 of a GPU")
        if not 1 <= pods <= MAX_PODS or not (share or g["profile"] or 1 <= gpus <= MAX_GPUS_PER_POD):
            raise EditError(
                kind, raw, f"pods between 1 and {MAX_PODS}, GPUs per pod between 1 and {MAX_GPUS_PER_POD}"
            )
        return Edit(kind, g["name"], g["ns"], number=pods, gpus=gpus, share=share, profile=g["profile"] or "")
    if kind == "onto":
        return Edit(kind, g["name"], g["ns"], profile=g["node"])
    return Edit(kind, g["name"], g.get("ns") or "")


def parse_edits(params: dict[str, list[str]]) -> list[Edit]:
    """Every edit of a query string ({kind: [values]}), in the order of ``KINDS``; bounded in number."""
    edits = [parse_edit(kind, raw) for kind in KINDS for raw in params.get(kind, [])]
    if len(edits) > MAX_EDITS:
        raise EditError("edits", str(len(edits)), f"at most {MAX_EDITS} edits in one what-if")
    added = sum(int(e.number) for e in edits if e.kind == "add")
    if added > MAX_ADDED:
        raise EditError("add", str(added), f"at most {MAX_ADDED} nodes added in all")
    return edits


__all__ = [
    "KINDS",
    "MAX_ADD",
    "MAX_ADDED",
    "MAX_CPU_CORES",
    "MAX_EDITS",
    "MAX_GPUS",
    "MAX_GPUS_PER_POD",
    "MAX_MEMORY_BYTES",
    "MAX_PODS",
    "RESOURCE_KEYS",
    "Edit",
    "EditError",
    "bound_words",
    "cores_text",
    "cores_words",
    "memory_words",
    "memory_text",
    "parse_edit",
    "parse_edits",
]
