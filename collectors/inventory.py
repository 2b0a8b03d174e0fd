"""Record observed states into the inventory history, and ask it what was true at t.

``record_states`` is the one write path: for each observed object it compares
the normalized state with the open version; no change writes nothing, a
change closes the open version at ``at``, opens a new one and records one
:class:`~collectors.models.Change` per changed field. ``record_absent`` closes
the versions of objects a full listing no longer returned (deletion).
Everything is batched per kind so a 20,000-pod sweep costs a few queries.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from collectors.models import Change, Cluster, Entity, EntityVersion

logger = logging.getLogger(__name__)

HOT_FIELDS = ("phase", "node", "namespace", "queue", "project", "job", "pod", "gpus", "gpus_allocatable", "ready")
MAX_CHANGES_PER_DIFF = 50  # a wholesale rewrite is summarized rather than exploded into thousands of rows


@dataclass
class Observed:
    """One object as a source saw it, already normalized (no resourceVersion, managedFields, timestamps that tick)."""

    kind: str
    name: str
    state: dict[str, Any]
    namespace: str = ""
    uid: str = ""
    hot: dict[str, Any] = field(default_factory=dict)
    actor: str = ""  # who made the change, where the source says (managedFields manager, audit user)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)


@dataclass
class RecordResult:
    seen: int = 0
    created: int = 0  # new entities
    opened: int = 0  # new versions
    closed: int = 0  # versions closed by deletion
    changes: int = 0

    def __iadd__(self, other: RecordResult) -> RecordResult:
        for f in ("seen", "created", "opened", "closed", "changes"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        return self


def diff_states(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Field-level differences as (dotted path, old, new); lists compare whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                out.append((path, None, new[key]))
            elif key not in new:
                out.append((path, old[key], None))
            elif old[key] != new[key]:
                out.extend(diff_states(old[key], new[key], path))
        return out
    if old != new:
        return [(prefix or "state", old, new)]
    return []


def _hot_values(obs: Observed) -> dict[str, Any]:
    hot = {k: obs.hot.get(k) for k in HOT_FIELDS if k in obs.hot}
    hot.setdefault("namespace", obs.namespace)
    for k in ("phase", "node", "namespace", "queue", "project", "job", "pod"):
        if hot.get(k) is None:
            hot[k] = ""
    return hot


def state_hash(state: dict[str, Any]) -> str:
    """A stable digest of a normalized state: unchanged objects are recognised without decoding stored JSON."""
    blob = json.dumps(state, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(blob.encode(), digest_size=16).hexdigest()


def record_states(
    cluster: Cluster, observed: Sequence[Observed], at: datetime, *, source: str = "k8s"
) -> RecordResult:
    """Record many observed objects of any kinds at ``at`` in one transaction.

    Idempotent: recording the same states again writes no rows. ``at`` earlier than an
    open version's ``valid_from`` is refused for that object (history is append-only).
    An unchanged object costs one digest comparison: open versions are read as
    (entity, pk, digest, valid_from) tuples, and only changed ones have their JSON read for the diff.
    """
    result = RecordResult(seen=len(observed))
    if not observed:
        return result
    by_kind: dict[str, list[Observed]] = {}
    for obs in observed:
        by_kind.setdefault(obs.kind, []).append(obs)

    with transaction.atomic():
        for kind, raw_items in by_kind.items():
            items = _unique(raw_items)
            names = {o.name for o in items}
            small = len(names) <= 500  # small batches look up by name; bigger ones read the whole kind once
            ids: dict[tuple[str, str], int] = {}
            ent_qs = Entity.objects.filter(cluster=cluster, kind=kind)
            if small:
                ent_qs = ent_qs.filter(name__in=names)
            for ns, name, pk in ent_qs.values_list("namespace", "name", "pk"):
                ids[(ns, name)] = pk
            new_entities = [
                Entity(cluster=cluster, kind=kind, namespace=o.namespace, name=o.name, uid=o.uid, first_seen=at, last_seen=at)
                for o in items
                if (o.namespace, o.name) not in ids
            ]
            if new_entities:
                Entity.objects.bulk_create(new_entities, batch_size=2000)
                result.created += len(new_entities)
                # Re-read: bulk_create does not return pks on every backend.
                new_qs = Entity.objects.filter(cluster=cluster, kind=kind)
                if len(new_entities) <= 500:
                    new_qs = new_qs.filter(name__in={e.name for e in new_entities})
                for ns, name, pk in new_qs.values_list("namespace", "name", "pk"):
                    ids[(ns, name)] = pk
            ov_qs = EntityVersion.objects.filter(cluster=cluster, kind=kind, valid_to__isnull=True)
            if small:
                ov_qs = ov_qs.filter(entity_id__in=[ids[(o.namespace, o.name)] for o in items])
            open_versions = {
                eid: (pk, digest, valid_from)
                for eid, pk, digest, valid_from in ov_qs.values_list("entity_id", "pk", "state_hash", "valid_from")
            }
            changed: list[tuple[Observed, int, str, tuple[int, str, datetime] | None]] = []
            for obs in items:
                eid = ids[(obs.namespace, obs.name)]
                digest = state_hash(obs.state)
                current = open_versions.get(eid)
                if current is not None and current[1] == digest:
                    continue
                if current is not None and at <= current[2]:
                    logger.warning("refusing out-of-order state for %s %s/%s at %s", kind, obs.namespace, obs.name, at)
                    continue
                changed.append((obs, eid, digest, current))
            if not changed:
                continue
            old_states = dict(
                EntityVersion.objects.filter(pk__in=[c[3][0] for c in changed if c[3] is not None]).values_list("pk", "state")
            )
            to_close: list[int] = []
            to_open: list[EntityVersion] = []
            changes: list[Change] = []
            touched: list[int] = []
            for obs, eid, digest, current in changed:
                if current is not None:
                    to_close.append(current[0])
                    diffs = diff_states(old_states.get(current[0]), obs.state)
                    if len(diffs) > MAX_CHANGES_PER_DIFF:
                        diffs = [("state", None, f"{len(diffs)} fields changed")]
                    for path, old, new in diffs:
                        changes.append(
                            Change(cluster=cluster, entity_id=eid, kind=kind, time=at, field=path, old=old, new=new,
                                   source=source, actor=obs.actor)
                        )
                else:
                    changes.append(
                        Change(cluster=cluster, entity_id=eid, kind=kind, time=at, field="created", old=None, new=None,
                               source=source, actor=obs.actor)
                    )
                to_open.append(
                    EntityVersion(entity_id=eid, cluster=cluster, kind=kind, valid_from=at, state=obs.state,
                                  state_hash=digest, **_hot_values(obs))
                )
                touched.append(eid)
            if to_close:
                for chunk in _chunks(to_close, 900):
                    EntityVersion.objects.filter(pk__in=chunk).update(valid_to=at)
            if to_open:
                EntityVersion.objects.bulk_create(to_open, batch_size=2000)
            if changes:
                Change.objects.bulk_create(changes, batch_size=2000)
            for chunk in _chunks(touched, 900):
                Entity.objects.filter(pk__in=chunk).update(last_seen=at)
            result.opened += len(to_open)
            result.changes += len(changes)
    return result


def record_absent(
    cluster: Cluster, kind: str, present: Iterable[tuple[str, str]], at: datetime, *, source: str = "k8s",
    namespace: str | None = None,
) -> RecordResult:
    """Close the open versions of ``kind`` objects not in ``present`` ((namespace, name) pairs): they were deleted.

    Only call this after a *complete* listing succeeded; a failed or partial listing must never delete.
    """
    keep = set(present)
    result = RecordResult()
    qs = EntityVersion.objects.filter(cluster=cluster, kind=kind, valid_to__isnull=True).select_related("entity")
    if namespace is not None:
        qs = qs.filter(entity__namespace=namespace)
    gone = [v for v in qs.only("pk", "valid_from", "entity__namespace", "entity__name", "entity__kind") if (v.entity.namespace, v.entity.name) not in keep and v.valid_from < at]
    if not gone:
        return result
    with transaction.atomic():
        for chunk in _chunks([v.pk for v in gone], 900):
            EntityVersion.objects.filter(pk__in=chunk).update(valid_to=at)
        Change.objects.bulk_create(
            [Change(cluster=cluster, entity_id=v.entity_id, kind=kind, time=at, field="deleted", source=source) for v in gone],
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


def lifespan(entity: Entity) -> tuple[datetime | None, datetime | None, bool]:
    """(first valid_from, last valid_to, still open) — for "did not exist at t" pages."""
    first = entity.versions.order_by("valid_from").values_list("valid_from", flat=True).first()
    last = entity.versions.order_by("-valid_from").values_list("valid_to", flat=True).first()
    return first, last, last is None and first is not None


def changes_in_window(
    entities: Iterable[Entity | int], start: datetime, end: datetime, *, limit: int = 200
) -> QuerySet[Change]:
    """Changes of these entities with start <= time <= end, oldest first (bounded)."""
    ids = [e if isinstance(e, int) else e.pk for e in entities]
    return (
        Change.objects.filter(entity_id__in=ids, time__gte=start, time__lte=end)
        .select_related("entity", "entity__cluster")
        .order_by("time", "id")[:limit]
    )


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
        seen[o.key] = o
    return list(seen.values())


def _chunks(seq: list[int], size: int) -> Iterable[list[int]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]
