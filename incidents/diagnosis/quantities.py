"""Kubernetes resource quantities: read ("95", "500m", "1040Gi") and written as the pages write CPU and memory."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any


def quantity(value: Any) -> float | None:
    """A Kubernetes resource quantity ("95", "500m", "1040Gi", 8) as a number (``kubernetes.utils.parse_quantity``);
    None when absent or unreadable."""
    if value is None or isinstance(value, bool) or value == "":
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return _parse(str(value).strip())


@lru_cache(maxsize=4096)
def _parse(text: str) -> float | None:
    """One quantity's text as a number: a fleet's pods and nodes write a few distinct ones, read per fit row."""
    from kubernetes.utils import parse_quantity  # here: the kubernetes package takes 1.5 s to import

    try:
        number = float(parse_quantity(text))
    except (ValueError, ArithmeticError):
        return None
    return number if math.isfinite(number) else None


def format_cpu(cores: float) -> str:
    return f"{cores:g} cores" if cores >= 1 or cores == 0 else f"{round(cores * 1000)}m CPU"


def format_memory(n: float) -> str:
    gib = n / 1024**3
    return f"{gib:.0f} GiB" if gib >= 10 else f"{gib:.1f} GiB"
