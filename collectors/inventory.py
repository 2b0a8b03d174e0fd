"""Record observed states into the inventory history, and ask it what was true at t.

``record_states`` is the one write path: for each observed object it compares
the normalized state with the open version; no change writes nothing, a
change closes the open version at ``at``, opens a new one and records one
:class:`~collectors.models.Change` per changed field. ``record_absent`` closes
the versions of objects a full listing no longer returned (deletion).
Everything is batched per kind so a 20,000-pod sweep costs a few queries.

What is recorded is :class:`~collectors.observed.Observed`; a GPU's shares and MIG instances are recorded
beside its state by :mod:`collectors.gpu_slices`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from collectors import storage
from collectors.models import Change, Cluster, Entity, EntityVersion
from collectors.observed import Observed, RecordResult, state_hash
from collectors.storage import InventoryStore
from collectors.version_rows import VersionRows, dated

logger = logging.getLogger(__name__)


def record_states(
    cluster: Cluster,
    observed: Sequence[Observed],
    at: datetime,
    *,
    source: str = "k8s",
    batch: int | None = None,
    listed_before: datetime | None = None,
    open_versions: OpenVersions | None = None,
    store: InventoryStore | None = None,
) -> RecordResult:
    """Record many observed objects of any kinds at ``at``.

    ``listed_before``: when these objects were last listed completely (the previous sweep). A state that
    differs from the open version changed after then: it is dated at the object's own ``since`` when that
    falls strictly between the two listings (a pod created, a condition that turned, a spec written: the
    Kubernetes object says when), else at ``at``. Without it every state is dated ``at``.

    Idempotent: recording the same states again writes no rows. ``at`` earlier than an
    open version's ``valid_from`` is refused for that object (history is append-only).
    An unchanged object costs one digest comparison: the open versions are read once per kind as
    (namespace, name, entity, pk, digest) tuples, and only changed ones have their JSON read.

    ``batch=None`` writes everything in one transaction. ``batch=n`` commits every n changed objects
    (a sweep of 20,000 pods): a failure then leaves whole objects recorded or not, never half of one.

    ``open_versions`` (one kind's, from :func:`open_versions`) spares the read of the open versions to a
    caller that records one listing in parts: it must have been read before any of these objects was
    recorded since, and name each object once over the parts.

    ``store`` writes the rows (default: :func:`collectors.storage.inventory_store`'s choice).
    """
    store = store or storage.inventory_store()
    result = RecordResult(seen=len(observed))
    if not observed:
        return result
    by_kind: dict[str, list[Observed]] = {}
    for obs in observed:
        by_kind.setdefault(obs.kind, []).append(obs)
    with transaction.atomic() if batch is None else nullcontext():
        for kind, raw_items in by_kind.items():
            pending = _pending(cluster, kind, _unique(raw_items), at, open_versions)
            step = batch or len(pending) or 1
            for i in range(0, len(pending), step):
                with transaction.atomic() if batch is not None else nullcontext():
                    result += _write(cluster, kind, pending[i : i + step], at, source, listed_before, store)
    return result


# (observed, entity id or None, new digest, open version pk or None)
_Pending = tuple[Observed, int | None, str, int | None]
# (namespace, name) -> (entity id, open version pk, its digest)
OpenVersions = dict[tuple[str, str], tuple[int, int, str]]


def open_versions(cluster: Cluster, kind: str, names: set[str] | None = None) -> OpenVersions:
    """The open versions of ``kind`` (of these ``names``, when at most 500 are asked: else all of them, in one
    read). Open versions are the live objects: their count does not grow with history (closed ones are never
    read)."""
    ov_qs = EntityVersion.objects.filter(cluster=cluster, kind=kind, valid_to__isnull=True)
    if names is not None and len(names) <= 500:
        ov_qs = ov_qs.filter(entity__name__in=names)
    return {
        (ns, name): (eid, pk, digest)
        for ns, name, eid, pk, digest in ov_qs.values_list(
            "entity__namespace", "entity__name", "entity_id", "pk", "state_hash"
        )
    }


def _pending(
    cluster: Cluster, kind: str, items: list[Observed], at: datetime, known: OpenVersions | None = None
) -> list[_Pending]:
    """The observed objects whose state differs from their open version (or that have none)."""
    opened = open_versions(cluster, kind, {o.name for o in items}) if known is None else known
    out: list[_Pending] = []
    for obs in items:
        digest = obs.digest or state_hash(obs.state)
        current = opened.get((obs.namespace, obs.name))
        if current is None:
            out.append((obs, None, digest, None))
            continue
        eid, pk, old_digest = current
        if old_digest != digest:
            out.append((obs, eid, digest, pk))
    partial = [o for o, *_ in out if o.partial]
    if partial:
        raise PartialState(kind, [f"{o.namespace}/{o.name}" if o.namespace else o.name for o in partial])
    return out


class PartialState(ValueError):
    """Objects with a partial state (``Observed.partial``) whose digest is not their open version's: what the
    caller took as recorded is not (another writer, or a database put back). Nothing was written."""

    def __init__(self, kind: str, names: list[str]) -> None:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        super().__init__(f"{len(names)} {kind}(s) with a partial state not recorded as such: {shown}")
        self.kind, self.names = kind, names


def _entity_ids(cluster: Cluster, kind: str, names: set[str]) -> dict[tuple[str, str], int]:
    """(namespace, name) → entity pk for these names (500 per query: SQLite's variable limit, short plans)."""
    ids: dict[tuple[str, str], int] = {}
    for chunk in _chunks(sorted(names), 500):
        qs = Entity.objects.filter(cluster=cluster, kind=kind, name__in=chunk)
        ids.update(((ns, name), pk) for ns, name, pk in qs.values_list("namespace", "name", "pk"))
    return ids


def _write(
    cluster: Cluster,
    kind: str,
    pending: list[_Pending],
    at: datetime,
    source: str,
    listed_before: datetime | None = None,
    store: InventoryStore | None = None,
) -> RecordResult:
    """Open new versions (and entities) for ``pending``, close the old ones, record one Change per field."""
    store = store or storage.inventory_store()
    ids, created = _entities_of(cluster, kind, pending, at, listed_before, store)
    rows = VersionRows(cluster, kind, at, source, listed_before)
    previous = _open_states([pk for _, _, _, pk in pending if pk is not None])
    for obs, eid, digest, current in pending:
        rows.add(obs, eid if eid is not None else ids[(obs.namespace, obs.name)], digest, current, previous)
    for when, closing in rows.to_close.items():
        for chunk in _chunks(closing, 900):
            EntityVersion.objects.filter(pk__in=chunk).update(valid_to=when)
    if rows.healed:
        EntityVersion.objects.bulk_update(rows.healed, ["state_hash"], batch_size=1000)
    store.insert_rows(EntityVersion, rows.versions)
    store.insert_rows(Change, rows.changes)
    for chunk in _chunks(rows.touched, 900):
        Entity.objects.filter(pk__in=chunk).update(last_seen=at)
    return RecordResult(created=created, opened=len(rows.versions), changes=len(rows.changes))


def _entities_of(
    cluster: Cluster,
    kind: str,
    pending: list[_Pending],
    at: datetime,
    listed_before: datetime | None,
    store: InventoryStore,
) -> tuple[dict[tuple[str, str], int], int]:
    """The entity ids of the pending objects without an open version, and how many were created: an entity
    that existed before (closed) is reused, others are created."""
    missing = [obs for obs, eid, _, _ in pending if eid is None]
    if not missing:
        return {}, 0
    ids = _entity_ids(cluster, kind, {o.name for o in missing})
    new = [o for o in missing if (o.namespace, o.name) not in ids]
    if new:
        store.insert_rows(
            Entity,
            [
                {
                    "cluster_id": cluster.pk,
                    "kind": kind,
                    "namespace": o.namespace,
                    "name": o.name,
                    "uid": o.uid,
                    "first_seen": dated(o, at, listed_before),
                    "last_seen": at,
                }
                for o in new
            ],
        )
        ids.update(_entity_ids(cluster, kind, {o.name for o in new}))
    return ids, len(new)


def _open_states(pks: list[int]) -> dict[int, tuple[Any, datetime]]:
    """The state and start of each of these open versions."""
    previous: dict[int, tuple[Any, datetime]] = {}
    for chunk in _chunks(pks, 500):
        qs = EntityVersion.objects.filter(pk__in=chunk).values_list("pk", "state", "valid_from")
        previous.update((pk, (state, valid_from)) for pk, state, valid_from in qs)
    return previous


def record_absent(
    cluster: Cluster,
    kind: str,
    present: Iterable[tuple[str, str]],
    at: datetime,
    *,
    source: str = "k8s",
    namespace: str | None = None,
) -> RecordResult:
    """Close the open versions of ``kind`` objects not in ``present`` ((namespace, name) pairs): they were deleted.

    Only call this after a *complete* listing succeeded; a failed or partial listing must never delete.
    """
    keep = set(present)
    result = RecordResult()
    qs = EntityVersion.objects.filter(cluster=cluster, kind=kind, valid_to__isnull=True).select_related(
        "entity"
    )
    if namespace is not None:
        qs = qs.filter(entity__namespace=namespace)
    gone = [
        v
        for v in qs.only("pk", "valid_from", "entity__namespace", "entity__name", "entity__kind")
        if (v.entity.namespace, v.entity.name) not in keep and v.valid_from < at
    ]
    if not gone:
        return result
    with transaction.atomic():
        for chunk in _chunks([v.pk for v in gone], 900):
            EntityVersion.objects.filter(pk__in=chunk).update(valid_to=at)
        Change.objects.bulk_create(
            [
                Change(
                    cluster=cluster, entity_id=v.entity_id, kind=kind, time=at, field="deleted", source=source
                )
                for v in gone
            ],
            batch_size=2000,
        )
    result.closed = len(gone)
    result.changes = len(gone)
    return result


#
# Queries
#


def as_of(cluster: Cluster | int, kind: str, t: datetime, **filters: Any) -> QuerySet[EntityVersion]:
    """Versions of ``kind`` valid at ``t`` (one query, whatever the history length); filters on hot columns."""
    return (
        EntityVersion.objects.as_of(t)
        .filter(cluster=cluster, kind=kind, **filters)
        .select_related("entity", "entity__cluster")
    )


def version_of(entity: Entity, t: datetime) -> EntityVersion | None:
    return EntityVersion.objects.as_of(t).filter(entity=entity).first()


def neighbour_change_times(entity_ids: Sequence[int], t: datetime) -> tuple[datetime | None, datetime | None]:
    """The change times just before and just after t, for the cursor bar's previous/next buttons."""
    qs = Change.objects.filter(entity_id__in=entity_ids)
    prev = qs.filter(time__lt=t).order_by("-time").values_list("time", flat=True).first()
    nxt = qs.filter(time__gt=t).order_by("time").values_list("time", flat=True).first()
    return prev, nxt


def open_at(t: datetime) -> Q:
    return Q(valid_from__lte=t) & (Q(valid_to__isnull=True) | Q(valid_to__gt=t))


def _unique(items: list[Observed]) -> list[Observed]:
    """Last one wins when a listing returned the same object twice (paginated lists can)."""
    seen: dict[tuple[str, str, str], Observed] = {}
    for o in items:
        seen[(o.kind, o.namespace, o.name)] = o
    return list(seen.values())


def _chunks(seq: list[Any], size: int) -> Iterable[list[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]
