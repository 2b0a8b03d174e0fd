"""Durations, parsed and written in one place for the whole simulator.

Parsing:

- ``prometheus_seconds``: Prometheus' duration syntax, exactly (its model.ParseDuration, as PromQL's range
  selectors, ``offset`` and the HTTP API's ``step`` read it): units ``y`` (365 days), ``w``, ``d``, ``h``,
  ``m``, ``s`` and ``ms``, each at most once and in that order, whole numbers only; ``0`` alone is zero.
- ``scenario_seconds``: a scenario file's durations (docs/scenarios.md): ``d``, ``h``, ``m``, ``s``, in that
  order, whole seconds.

Writing:

- ``human``: kubectl's AGE column (apimachinery's duration.HumanDuration);
- ``go``: Go's time.Duration text, as the kubelet prints a back-off (``10s``, ``2m40s``, ``1h0m0s``);
- ``compact``: a scenario file's own form (``1h30m``, ``0s``), for messages about the file.
"""

from __future__ import annotations

import re

_PROMETHEUS = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$")
_PROMETHEUS_UNITS_S = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)
_SCENARIO = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def prometheus_seconds(text: str) -> float | None:
    """Seconds of a Prometheus duration (``1h30m``, ``90s``, ``500ms``, ``1y2w``); None when it is not one."""
    if text == "0":
        return 0.0
    m = _PROMETHEUS.match(text)
    if not text or m is None or not any(m.groups()):
        return None
    ms = sum(int(v) * round(u * 1000) for v, u in zip(m.groups(), _PROMETHEUS_UNITS_S, strict=True) if v)
    return ms / 1000


def scenario_seconds(text: str) -> int | None:
    """``"1h30m"`` -> 5400; None when the text is not a scenario duration."""
    text = text.strip()
    m = _SCENARIO.match(text)
    if not text or m is None or not any(m.groups()):
        return None
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def human(seconds: float) -> str:
    """kubectl's AGE: apimachinery's duration.HumanDuration (two significant units below 8 h, one above)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def go(seconds: int) -> str:
    """Go's time.Duration text for whole seconds: ``10s``, ``2m40s``, ``5m0s``, ``1h0m0s``."""
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h}h{m}m{s}s"
    return f"{m}m{s}s" if m else f"{s}s"


def compact(seconds: int) -> str:
    """A scenario file's form of a duration: ``1h30m``, ``45s``, ``0s``."""
    h, rem = divmod(seconds, 3600)
    m, sec = divmod(rem, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (sec, "s")) if v) or "0s"
