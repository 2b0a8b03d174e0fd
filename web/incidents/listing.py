"""The incident list's rows, bounded by the page rather than by history.

The list shows the unresolved incidents first, in the order to work them in (incidents.ordering: severity,
production inference, GPUs lost or blocked, age), then the resolved ones, newest first. Ordering by impact
needs each incident's subjects' versions (correlated subqueries), so it is computed for the unresolved
incidents only, the ones being worked; the resolved history, which grows without bound, is read by the
``incident_status`` index (status, onset) a page at a time. Two queries, each bounded: the unresolved ones by
how many are open, the resolved ones by the page size. The count is bounded too: the resolved ones are counted
up to ``RESOLVED_COUNTED`` (the pages beyond are reached by narrowing the filters), so no query of the list
grows with history.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, overload

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from incidents.models import Alert, Incident
from incidents.ordering import URGENCY_ORDER, with_impact

RESOLVED_COUNTED = 10_000  # resolved incidents counted for the pager (200 pages of 50); more reads "10000+"


def alert_count() -> Coalesce:
    """Each incident's alerts, as a correlated subquery: evaluated for the rows of the page only (a
    ``Count("alerts")`` join would group every matching incident with all its alerts first)."""
    alerts = (
        Alert.objects.filter(incident=OuterRef("pk"))
        .order_by()
        .values("incident")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(alerts, output_field=IntegerField()), 0)


class UnresolvedThenResolved:
    """``qs`` as the list orders it, for a Paginator: ``count()`` (one query) and slices (a query for each
    part the slice reaches).

    Every row carries ``impact_gpus`` and ``inference`` (incidents.ordering). The resolved ones are ordered
    by onset alone, so their impact is read for the rows of the page only.
    """

    def __init__(self, qs: QuerySet[Incident], t: datetime) -> None:
        self.qs = qs
        self.unresolved = with_impact(qs.exclude(status="resolved"), t).order_by(*URGENCY_ORDER)
        self.resolved = with_impact(qs.filter(status="resolved"), t).order_by("-onset", "-id")
        self._counts: tuple[int, int] | None = None

    def counts(self) -> tuple[int, int]:
        """(unresolved, resolved up to RESOLVED_COUNTED) matching the filters: two counts, each bounded."""
        if self._counts is None:
            unresolved = self.qs.exclude(status="resolved").order_by().count()
            resolved = self.qs.filter(status="resolved").order_by().values("pk")[:RESOLVED_COUNTED].count()
            self._counts = (unresolved, resolved)
        return self._counts

    @property
    def resolved_capped(self) -> bool:
        """True when the resolved ones were counted up to the bound, not to their end."""
        return self.counts()[1] >= RESOLVED_COUNTED

    def count(self) -> int:
        return sum(self.counts())

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[Incident]:
        return iter(self[0:None])

    @overload
    def __getitem__(self, index: int, /) -> Incident: ...

    @overload
    def __getitem__(self, index: slice, /) -> list[Incident]: ...

    def __getitem__(self, index: int | slice, /) -> Any:
        if isinstance(index, int):
            return self[index : index + 1][0]
        start, stop = index.start or 0, index.stop
        open_n, resolved_n = self.counts()
        rows: list[Incident] = []
        if start < open_n:
            rows += list(self.unresolved[start : min(stop, open_n) if stop is not None else open_n])
        if resolved_n and (stop is None or stop > open_n):
            first = max(0, start - open_n)
            last = None if stop is None else stop - open_n
            rows += list(self.resolved[first:last])
        return rows
