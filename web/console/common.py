"""Small helpers the console computations share (pure, no views)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings

from rcaweb.cursor import parse_t

# SM activity (DCGM_FI_PROF_SM_ACTIVE, a 0..1 ratio) above which an allocated GPU counts as active,
# and above which it counts as "used well". The idle threshold matches the simulator's GPUIdleAllocated rule.
ACTIVE_SM = float(getattr(settings, "RCAWEB_ACTIVE_SM_THRESHOLD", 0.1))
WELL_USED_SM = float(getattr(settings, "RCAWEB_WELL_USED_SM_THRESHOLD", 0.5))
SM_METRIC = "DCGM_FI_PROF_SM_ACTIVE"
SAMPLE_STEP_MIN = 5  # TelemetrySample points are 5-minute averages (docs/inventory.md)


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 UTC string from a state JSON, or None when absent or unreadable (never raises)."""
    if not value or not isinstance(value, str):
        return None
    try:
        return parse_t(value)
    except ValueError:
        return None


def percentile(values: Sequence[float], p: float) -> float | None:
    """Linear-interpolation percentile (numpy's default, statistics.quantiles 'inclusive'); None when empty."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    rank = (len(xs) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (rank - lo))


_WS = re.compile(r"\s+")
# KAI's fit errors wrap the reason: "Resources were not found for pod ns/x due to: no nodes with enough resources".
_KAI_WRAPPER = re.compile(r"Resources were not found for pod(?: group)? \S+? due to: ", re.I)


def one_line(reason: str, message: str, limit: int = 140) -> str:
    """A scheduler condition as one readable line: the reason, then the message's first sentence.

    Scheduler messages run to several hundred characters ("0/60 nodes are available: 12 Insufficient
    nvidia.com/gpu, … preemption: …"); the console row needs the gist, the job page has the rest.
    """
    msg = _KAI_WRAPPER.sub("", _WS.sub(" ", message or "").strip())
    head = msg.split(". ", 1)[0] if msg else ""
    if "preemption:" in head:
        head = head.split("preemption:", 1)[0].rstrip(" .")
    if reason and head.lower().startswith(reason.lower()):
        head = head[len(reason) :].lstrip(" :")  # "OverLimit: OverLimit: …" -> "OverLimit: …"
    text = f"{reason}: {head}" if reason and head else (reason or head or "no reason reported")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def fmt_age(seconds: float) -> str:
    """``42m`` / ``3h05m`` / ``2d04h``: minute precision, for ages and waits in tables."""
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m"
    if minutes < 48 * 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    return f"{minutes // 1440}d{(minutes % 1440) // 60:02d}h"


def fmt_minutes(seconds: float | None) -> str:
    """``42m`` / ``3h05m`` for queue times; ``—`` for None."""
    if seconds is None:
        return "—"
    minutes = int(round(seconds / 60))
    if minutes < 60:
        return f"{minutes}m"
    return f"{minutes // 60}h{minutes % 60:02d}m"
