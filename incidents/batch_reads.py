"""What the diagnoses of one batch share: the fleet's history and changes over the lookback, read once.

After a sweep every waiting job's incident of a cluster is diagnosed again as of the same moment
(``incidents.diagnosis_run.rediagnose_changed``). Each reads, beside its own objects, the history of every node
and policy object and the changes of every node, GPU and policy object over its lookback: the same rows for
every such incident of the cluster, and most of what its input costs the database. Inside
:func:`shared_reads` these fleet-wide rows are read once per (cluster, moment) from the earliest start asked
for, and each diagnosis keeps those of its own lookback and adds its own objects' rows (``inventory_input``);
the result is the same rows in the same order as its own read.

A batch reads the inventory as it stands: the rows are kept while the newest change id stays the same (every version a sweep opens or closes comes with a Change row, ``incidents.snapshot``), else read again.
Rows past ``SHARED_LIMIT`` are not kept: the diagnosis then reads its own, bounded as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from django.db.models import Max, Q, Subquery

from collectors.models import Change, Cluster, Entity, EntityVersion

SHARED_LIMIT = 100_000  # rows of one shared read; beyond, each diagnosis reads its own
HISTORY_KINDS = ("queue", "project", "node")  # a waiting job's incident reads every node's history
CHANGE_KINDS = ("queue", "project", "department", "node", "gpu")  # ... and every node's and GPU's changes
CHANGE_COLUMNS = (
    "pk",
    "entity_id",
    "entity__kind",
    "entity__name",
    "entity__namespace",
    "time",
    "field",
    "old",
    "new",
    "actor",
    "source",
    "summary",
    "link",
)
HISTORY_COLUMNS = (
    "pk",
    "entity__kind",
    "entity__name",
    "entity__namespace",
    "state",
    "valid_from",
    "valid_to",
)

Rows = list[tuple[Any, ...]]
# (what, cluster id, moment) -> (newest change id, start read from, rows or None when past SHARED_LIMIT)
_Memo = dict[tuple[str, int, datetime], tuple[int | None, datetime, Any]]
_batch: ContextVar[_Memo | None] = ContextVar("incidents_batch_reads", default=None)


@contextmanager
def shared_reads() -> Iterator[None]:
    """Share the fleet-wide reads among the diagnoses run inside (one batch; nested batches share the outer)."""
    if _batch.get() is not None:
        yield
        return
    token = _batch.set({})
    try:
        yield
    finally:
        _batch.reset(token)


def active() -> bool:
    return _batch.get() is not None


def fleet_history(cluster: Cluster, start: datetime, t: datetime) -> Rows | None:
    """Every node's, queue's and project's versions valid at some moment of (start, t], oldest first
    (``HISTORY_COLUMNS``); None outside a batch or past the limit."""

    def read(since: datetime) -> Rows:
        return list(
            EntityVersion.objects.filter(
                cluster=cluster, valid_from__lte=t, deleted=False, kind__in=HISTORY_KINDS
            )
            .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=since))
            .order_by("valid_from", "id")
            .values_list(*HISTORY_COLUMNS)[:SHARED_LIMIT]
        )

    rows = _shared("history", cluster, start, t, read)
    if rows is None:
        return None
    return [r for r in rows if r[6] is None or r[6] > start]


def fleet_changes(cluster: Cluster, start: datetime, t: datetime) -> Rows | None:
    """The changes of [start, t] that are no object's or of a node, GPU or policy object, oldest first
    (``CHANGE_COLUMNS``); None outside a batch or past the limit."""

    def read(since: datetime) -> Rows:
        entities = Entity.objects.filter(cluster=cluster, kind__in=CHANGE_KINDS).values("pk")
        return list(
            Change.objects.filter(cluster=cluster, time__gte=since, time__lte=t)
            .filter(Q(entity__isnull=True) | Q(entity_id__in=Subquery(entities)))
            .order_by("time", "id")
            .values_list(*CHANGE_COLUMNS)[:SHARED_LIMIT]
        )

    rows = _shared("changes", cluster, start, t, read)
    if rows is None:
        return None
    return [r for r in rows if r[5] >= start]


def _shared(
    what: str, cluster: Cluster, start: datetime, t: datetime, read: Callable[[datetime], Rows]
) -> Rows | None:
    memo = _batch.get()
    if memo is None:
        return None
    moved = Change.objects.aggregate(m=Max("id"))["m"]
    key = (what, cluster.pk, t)
    kept = memo.get(key)
    if kept is None or kept[0] != moved or kept[1] > start:
        rows: Rows | None = read(start)
        if rows is not None and len(rows) >= SHARED_LIMIT:
            rows = None
        kept = (moved, start, rows)
        memo[key] = kept
    return kept[2]


def shared_values(cluster: Cluster, t: datetime) -> dict[str, Any] | None:
    """A dict the diagnoses of this batch at (cluster, t) share while the inventory stands (the newest change id
    the fleet's history was read at, ``fleet_history``), for what they would each work out alike from it
    (``ahead.cluster_order``); None outside a batch or before the fleet's history is read (no query of its own)."""
    memo = _batch.get()
    read = memo.get(("history", cluster.pk, t)) if memo is not None else None
    if memo is None or read is None:
        return None
    key = ("values", cluster.pk, t)
    kept = memo.get(key)
    if kept is None or kept[0] != read[0]:
        kept = (read[0], t, {})
        memo[key] = kept
    values: dict[str, Any] = kept[2]
    return values


def merged(shared: list[tuple[Any, ...]], own: list[tuple[Any, ...]], at: int) -> list[tuple[Any, ...]]:
    """The shared rows and the incident's own, each in (moment, id) order (the moment at ``at``, the id
    first), as one read of both would return them: once each, in that order."""
    if not own:
        return shared
    seen = {row[0] for row in own}
    rows = [row for row in shared if row[0] not in seen] + own
    rows.sort(key=lambda row: (row[at], row[0]))
    return rows
