"""The cycle collector's settings for rcaweb's processes, and for the simulator's process the driver starts
(``SimProcess(gc_thresholds=...)``: the simulator imports nothing of rcaweb, so it is handed the numbers).

Python's default (700, 10, 10) starts a young collection every 700 container allocations and lets a full one
walk the whole heap each time the survivors grew by a quarter. rcaweb's processes hold large, long-lived
heaps (Django's modules and models, the fleet rows a diagnosis shares, the simulator's world and rendered
objects) and churn short-lived rows over them: on ``bench/sim.py --pipeline`` the collector took about a fifth
of both processes' CPU (py-spy: ~44 s of the pipeline's ~230 s, ~40 s of the simulator's ~145 s), nearly
all of it walking objects that live for the whole run and hold no garbage.

:func:`tune` raises the thresholds (a young collection every 50,000 allocations, a full one after 100 of the
middle generation's instead of 10) and freezes what exists when it is called (the process' startup heap:
modules, settings, a built world) out of every later pass. Reference counting frees all that is not in a
cycle either way; only cyclic garbage waits longer, and the pipeline bench's peak memory did not move.
``RCAWEB_GC_THRESHOLDS`` (``"700,10,10"``: Python's own) overrides it; ``off`` leaves the collector as Python
set it.
"""

from __future__ import annotations

import gc
import os

THRESHOLDS = (50_000, 20, 100)
ENV = "RCAWEB_GC_THRESHOLDS"


def thresholds(raw: str | None = None) -> tuple[int, int, int] | None:
    """The thresholds to set: ``raw`` (default: the environment's), ``THRESHOLDS`` when unset, None for ``off``.

    Raises ValueError naming the variable for anything but three positive integers or ``off``."""
    raw = os.environ.get(ENV) if raw is None else raw
    if raw is None or not raw.strip():
        return THRESHOLDS
    if raw.strip().lower() == "off":
        return None
    parts = raw.split(",")
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or min(values) < 1:
        raise ValueError(f"{ENV}={raw!r}: expected three positive integers (e.g. 50000,20,100) or 'off'")
    return values


def tune(raw: str | None = None, *, freeze: bool = True) -> tuple[int, int, int] | None:
    """Set the thresholds (``raw`` as :func:`thresholds` reads it) and (``freeze``) move every object tracked now
    out of the collector's passes. Returns what was set (None: nothing, ``off``)."""
    chosen = thresholds(raw)
    if chosen is None:
        return None
    gc.set_threshold(*chosen)
    if freeze:
        gc.freeze()
    return chosen


__all__ = ["ENV", "THRESHOLDS", "thresholds", "tune"]
