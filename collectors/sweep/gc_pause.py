"""The cyclic garbage collector paused for the length of one sweep."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cyclic_gc(*, collect: bool = True) -> Iterator[None]:
    """Pause the cyclic garbage collector for one sweep.

    A sweep allocates millions of small dicts (decoded JSON, mapped states) and holds ~100,000 of them at
    once; each generation-2 pass walks them all to find no cycle (decoded JSON has none), a large part of a
    re-sweep's CPU. Reference counting still frees everything; one collection of the young generations runs
    at the end: everything the sweep allocated and kept is young (nothing was promoted while the collector
    was off), so that pass finds any cycle the sweep made, without walking the whole heap (a full pass costs
    as much as the rest of a re-sweep when the simulator shares the process: ``bench/sim.py --pipeline``).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        if collect:
            gc.collect(1)
