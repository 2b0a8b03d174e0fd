"""Range queries shared between the collections of one problem: the same query on the same step grid, asked
within ``SHARE_S``, is asked once."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from rcaweb.ttlcache import TtlCache

# Incidents of one problem (the GPUs of one node, a job and its pods' GPUs) collected within a short time ask
# Prometheus the same queries: the answer is shared for SHARE_S. Queries run on the step grid (start rounded
# up, end down to a multiple of the step, as Prometheus evaluates a range query at start + k·step anyway), so
# two collections a few seconds apart ask the very same range. 0 turns it off (tests: every test its own).
SHARE_S = float(getattr(settings, "RCAWEB_EVIDENCE_SHARE_S", 60))
shared: TtlCache[list[Any]] = TtlCache(max_entries=512)


def step_grid(start: datetime, end: datetime, step: int) -> tuple[datetime, datetime]:
    lo, hi = start.timestamp(), end.timestamp()
    qs = math.ceil(lo / step) * step
    qe = max(math.floor(hi / step) * step, qs)
    if qs > hi:  # a window shorter than one step: ask it as it is
        return start, end
    return datetime.fromtimestamp(qs, tz=UTC), datetime.fromtimestamp(qe, tz=UTC)


def shared_range(source: Any, query: str, start: datetime, end: datetime, step: int) -> list[Any]:
    """``source.query_range`` on the step grid, answered from a recent identical query when there is one."""
    start, end = step_grid(start, end, step)
    ttl = float(getattr(settings, "RCAWEB_EVIDENCE_SHARE_S", SHARE_S))
    key = (getattr(source, "url", ""), query, start, end, step)
    hit = shared.get(key, ttl)
    if hit is not None:
        return hit
    series: list[Any] = source.query_range(query, start, end, step)  # a failure raises: nothing is shared
    shared.put(key, series, ttl)
    return series
