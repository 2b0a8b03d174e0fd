"""Kubernetes quantities as the mappers count them: GPUs (whole, fractions, MIG instances), CPU and memory."""

from __future__ import annotations

from typing import Any

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"


def int_quantity(value: Any) -> int | None:
    """A Kubernetes quantity for countable resources ("8", 8, "8.0", "1k", "1000m") as int, truncated
    (``kubernetes.utils.parse_quantity``); None when absent or unparseable."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():  # "8": nearly every GPU quantity, without a Decimal
        return int(text)
    from kubernetes.utils import parse_quantity  # here: the kubernetes package takes 1.5 s to import

    try:
        return int(parse_quantity(value if isinstance(value, float) else text))
    except (ValueError, ArithmeticError):  # not a quantity, NaN, infinity
        return None


def limit_or_none(value: Any) -> int | None:
    """KAI/Run:ai spell "no limit" as -1."""
    n = int_quantity(value)
    return None if n is None or n < 0 else n


def container_gpus(container: dict[str, Any]) -> int:
    res = container.get("resources") or {}
    value = (res.get("requests") or {}).get(GPU)
    if value is None:
        value = (res.get("limits") or {}).get(GPU)  # extended resources: limits alone imply requests
    return int_quantity(value) or 0


def container_mig(container: dict[str, Any]) -> dict[str, int]:
    """MIG instances a container asks for (mixed strategy): {"3g.40gb": 2}."""
    res = container.get("resources") or {}
    out: dict[str, int] = {}
    for source in (res.get("limits") or {}, res.get("requests") or {}):
        for name, value in source.items():
            if str(name).startswith(MIG_PREFIX):
                out[str(name)[len(MIG_PREFIX) :]] = int_quantity(value) or 0
    return out


def resource_requests(containers: list[dict[str, Any]]) -> dict[str, str]:
    """A pod's CPU and memory requests summed over its containers, as the scheduler fits them: a container
    with only a limit requests its limit (Kubernetes defaulting). CPU in cores ("16", "0.5"), memory in
    bytes; a resource no container asks for is absent, an unparseable one too (never a guess)."""
    from kubernetes.utils import parse_quantity

    out: dict[str, str] = {}
    for key in ("cpu", "memory"):
        total, seen = 0.0, False
        for c in containers or ():
            res = c.get("resources") or {}
            value = (res.get("requests") or {}).get(key)
            if value is None:
                value = (res.get("limits") or {}).get(key)
            if value is None:
                continue
            try:
                total += float(parse_quantity(value))
            except (ValueError, TypeError, ArithmeticError):
                continue
            seen = True
        if seen:
            out[key] = f"{total:g}" if key == "cpu" else str(int(total))
    return out


def float_quantity(value: Any) -> float | None:
    """A GPU amount that may be a fraction ("0.5", 0.25, "8"); None when absent or unparseable."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        n = int_quantity(value)
        return None if n is None else float(n)
