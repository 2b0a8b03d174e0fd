"""Durations as rcaweb writes and reads them: ``30s``, ``15m``, ``2h``, ``1h30m``, ``1d``.

One grammar for the cursor's ``w``, the settings' durations and every duration a page prints. Pure: no
Django, so the settings module reads its own durations with it. (The simulator, a package of its own, keeps
Prometheus' grammar for PromQL.)
"""

from __future__ import annotations

import re
from datetime import timedelta

# At most 6 digits per unit: bounded before any arithmetic (timedelta overflows past 999,999,999 days).
_DURATION_RE = re.compile(
    r"^(?:(?P<d>\d{1,6})d)?(?:(?P<h>\d{1,6})h)?(?:(?P<m>\d{1,6})m)?(?:(?P<s>\d{1,6})s)?$"
)


def parse_duration(text: str) -> timedelta:
    """Parse ``30s``, ``15m``, ``2h``, ``1h30m``, ``1d`` into a timedelta (raises ValueError)."""
    text = (text or "").strip()
    m = _DURATION_RE.match(text) if len(text) <= 40 else None
    if not text or not m or not any(m.groupdict().values()):
        raise ValueError(f"{text[:40]!r} is not a duration like 30s, 15m, 2h or 1h30m")
    parts = {k: int(v) for k, v in m.groupdict().items() if v}
    return timedelta(
        days=parts.get("d", 0), hours=parts.get("h", 0), minutes=parts.get("m", 0), seconds=parts.get("s", 0)
    )


def format_duration(delta: timedelta) -> str:
    """Shortest form that :func:`parse_duration` reads back: ``2h``, ``1h30m``, ``45s``."""
    total = int(delta.total_seconds())
    if total <= 0:
        return "0s"
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            out += f"{total // size}{unit}"
            total %= size
    return out


def format_age(seconds: float) -> str:
    """``42m`` / ``3h05m`` / ``2d04h``: minute precision, for ages and waits in tables."""
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m"
    if minutes < 48 * 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    return f"{minutes // 1440}d{(minutes % 1440) // 60:02d}h"


def format_minutes(seconds: float | None) -> str:
    """``42m`` / ``3h05m`` for queue times, rounded to the minute; ``—`` for None."""
    if seconds is None:
        return "—"
    minutes = int(round(seconds / 60))
    if minutes < 60:
        return f"{minutes}m"
    return f"{minutes // 60}h{minutes % 60:02d}m"
