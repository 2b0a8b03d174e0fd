"""Page queries: what the entity pages ask the inventory, each a fixed number of SQL statements.

Every function here costs a constant number of queries whatever the history length (versions are
found through the (entity, valid_from) / (cluster, kind, <hot column>, valid_from) indexes) and
whatever the number of related rows (a node with 500 pods is still one query for its pods).
Pages name other objects through :class:`Ref`, built from hot columns without a query.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import (
    Case,
    Count,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.urls import reverse

from collectors.models import NAMESPACED_KINDS, Change, Cluster, Entity, EntityVersion, KubeEvent, SourceRun
from rcaweb.cursor import parse_t

logger = logging.getLogger(__name__)

MAX_RELATED_IDS = (
    900  # SQLite's default host-parameter limit is 999; beyond this, related changes narrow to the entity
)
CHANGES_LIMIT = 200
EVENT_KINDS = {"Pod": "pod", "Job": "job", "Node": "node"}  # involvedObject kinds that have a page
EVENTS_LIMIT = 100

# KAI Scheduler / Run:ai default PriorityClasses (value used when a job state carries no numeric priority).
PRIORITY_CLASS_VALUES = {"inference": 125, "build": 100, "interactive-preemptible": 75, "train": 50}


@dataclass(frozen=True)
class Ref:
    """An object named by another object's state (a pod's node, a GPU's pod): linkable without a query."""

    cluster: Cluster
    kind: str
    name: str
    namespace: str = ""

    def get_absolute_url(self) -> str:
        if self.kind in NAMESPACED_KINDS:
            return reverse(f"collectors:{self.kind}", args=[self.cluster.name, self.namespace, self.name])
        return reverse(f"collectors:{self.kind}", args=[self.cluster.name, self.name])

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def ref(cluster: Cluster, kind: str, name: str | None, namespace: str = "") -> Ref | None:
    """A Ref, or None when the state names nothing ("" / None): templates show a dash."""
    if not name:
        return None
    if kind in NAMESPACED_KINDS and not namespace and "/" in name:
        namespace, name = name.split("/", 1)
    return Ref(cluster=cluster, kind=kind, name=name, namespace=namespace)


#
# One entity
#


def get_entity(cluster: str, kind: str, name: str, namespace: str = "") -> Entity | None:
    """The entity with its cluster, in one query (None if never recorded)."""
    return (
        Entity.objects.select_related("cluster")
        .filter(cluster__name=cluster, kind=kind, namespace=namespace, name=name)
        .first()
    )


def entity_at(
    cluster: str, kind: str, name: str, namespace: str, t: datetime
) -> tuple[Entity | None, EntityVersion | None]:
    """The entity with its cluster and its version at t, as :func:`get_entity` and :func:`version_at`
    return them, in one query when the object existed at t (the entity page's usual case); when it
    did not, the entity is read on its own (None if never recorded)."""
    v = (
        EntityVersion.objects.as_of(t)
        .filter(
            entity__cluster__name=cluster, entity__kind=kind, entity__namespace=namespace, entity__name=name
        )
        .select_related("entity__cluster")
        .order_by("-valid_from")
        .first()
    )
    if v is None:
        return get_entity(cluster, kind, name, namespace), None
    return v.entity, None if v.deleted else v


def version_at(entity: Entity, t: datetime) -> EntityVersion | None:
    """The version valid at t (None when the object did not exist, including tombstones)."""
    v = EntityVersion.objects.as_of(t).filter(entity=entity).order_by("-valid_from").first()
    if v is None or v.deleted:
        return None
    v.entity = entity  # no lazy query when a page reads version.entity
    return v


def existence_around(entity: Entity, t: datetime) -> tuple[datetime | None, datetime | None]:
    """For an entity absent at t: when it last stopped existing before t, and first existed after t."""
    before = (
        entity.versions.filter(valid_to__lte=t, deleted=False)
        .order_by("-valid_to")
        .values_list("valid_to", flat=True)
        .first()
    )
    after = (
        entity.versions.filter(valid_from__gt=t, deleted=False)
        .order_by("valid_from")
        .values_list("valid_from", flat=True)
        .first()
    )
    return before, after


#
# Changes around t (the entity and its related entities)
#


def related_q(cluster: Cluster, entity_ids: Sequence[int], names: Iterable[tuple[str, str, str]] = ()) -> Q:
    """Changes of these entity ids and of the entities named (kind, namespace, name).

    Names are resolved to ids first (one query on the identity index) so the change queries run on
    (entity, time) alone: a join on the entity's name made SQLite scan every change of the cluster.
    """
    ids = list(entity_ids)
    named = Q()
    for kind, ns, name in names:
        if name:
            named |= Q(kind=kind, namespace=ns, name=name)
    if named:
        ids += Entity.objects.filter(cluster=cluster).filter(named).values_list("id", flat=True)
    return Q(entity_id__in=ids[:MAX_RELATED_IDS])


class ChangeLine(NamedTuple):
    """One row of "changes around t": a :class:`Change`'s fields, and the object it changed as a :class:`Ref`.

    Read with ``values_list`` (no model instances: a page reads up to 200 of them and shows 50).
    """

    id: int
    time: datetime
    entity_id: int | None
    entity: Ref | None
    field: str
    old: Any
    new: Any
    source: str
    actor: str
    summary: str
    link: str


def changes_around(
    cluster: Cluster, related: Q, t: datetime, window: timedelta, limit: int = CHANGES_LIMIT
) -> list[ChangeLine]:
    """Changes within [t - w, t + w] of the related entities, oldest first (one query, bounded)."""
    rows = (
        Change.objects.filter(cluster=cluster, time__gte=t - window, time__lte=t + window)
        .filter(related)
        .order_by("time", "id")
        .values_list(
            "id", "time", "entity_id", "entity__kind", "entity__namespace", "entity__name",
            "field", "old", "new", "source", "actor", "summary", "link",
        )[:limit]
    )  # fmt: skip
    return [
        ChangeLine(
            pk, time, entity_id, None if entity_id is None else Ref(cluster, kind, name, namespace), *rest
        )
        for pk, time, entity_id, kind, namespace, name, *rest in rows
    ]


def neighbour_changes(cluster: Cluster, related: Q, t: datetime) -> tuple[datetime | None, datetime | None]:
    """The related change times just before and just after t (cursor bar ⇤/⇥), in one aggregate query.

    ``related`` names entities of this cluster, so the query filters on them alone: both backends then
    read the (entity, time) index (with a cluster condition an un-ANALYZEd SQLite database picks the
    (cluster, time) index and reads every change of the cluster). MAX/MIN read the same index rows as
    ``ORDER BY time LIMIT 1`` per side did: an IN list cannot walk that index in time order either.
    """
    agg = Change.objects.filter(related).aggregate(
        prev=Max("time", filter=Q(time__lt=t)), next=Min("time", filter=Q(time__gt=t))
    )
    return agg["prev"], agg["next"]


def field_history(entity: Entity, fields: Sequence[str], limit: int = 50) -> list[Change]:
    """Changes of some fields of one entity over its whole life, newest first (request-size history)."""
    return list(Change.objects.filter(entity=entity, field__in=fields).order_by("-time", "-id")[:limit])


#
# Collection errors
#

SOURCE_LABELS = {
    "prometheus": ("Prometheus", "GPU telemetry missing for this window"),
    "k8s": ("The Kubernetes API", "objects and events may be stale for this window"),
    "kai": ("KAI Scheduler", "queue and quota state may be stale for this window"),
    "kueue": ("Kueue", "queue and quota state may be stale for this window"),
    "runai": ("The Run:ai API", "project policy may be stale for this window"),
}


@dataclass
class SourceTrouble:
    source: str
    label: str
    consequence: str
    first: datetime
    last: datetime
    count: int
    call: str
    error: str


def collection_errors(cluster: Cluster, start: datetime, end: datetime) -> list[SourceTrouble]:
    """Failed source calls of this cluster in the window, one line per source (one query)."""
    rows = SourceRun.objects.filter(cluster=cluster, ok=False, time__gte=start, time__lte=end).order_by(
        "time"
    )[:200]
    out: dict[str, SourceTrouble] = {}
    for r in rows:
        label, consequence = SOURCE_LABELS.get(
            r.source, (r.source, "its data may be missing for this window")
        )
        tr = out.get(r.source)
        if tr is None:
            out[r.source] = SourceTrouble(r.source, label, consequence, r.time, r.time, 1, r.call, r.error)
        else:
            tr.last, tr.count, tr.call, tr.error = r.time, tr.count + 1, r.call, r.error
    return list(out.values())


#
# Related objects as of t
#


# The entity's namespace and name come by correlated subquery (one primary-key probe per row), not by a
# join: PostgreSQL misestimates the as-of filter (valid_from <= t AND (valid_to IS NULL OR valid_to > t))
# by 10-20x and then hashes the whole entity table, which grows with history (22 ms instead of 0.3 ms for
# the pods on one node at 39,000 entities).
_ENTITY_COLUMNS = {
    f"_entity_{f}": Subquery(Entity.objects.filter(pk=OuterRef("entity_id")).values(f)[:1])
    for f in ("namespace", "name")
}
_ENTITY_LOADED = ["id", "cluster_id", "kind", "namespace", "name"]  # the rest is loaded on access


def _as_of(cluster: Cluster, kind: str | Sequence[str], t: datetime) -> QuerySet[EntityVersion]:
    kinds = {"kind": kind} if isinstance(kind, str) else {"kind__in": list(kind)}
    return (
        EntityVersion.objects.as_of(t)
        .filter(cluster=cluster, deleted=False, **kinds)
        .annotate(**_ENTITY_COLUMNS)
    )


def _with_cluster(versions: Iterable[EntityVersion], cluster: Cluster) -> list[EntityVersion]:
    """The versions of an :func:`_as_of` query, each with its entity (and the entity's cluster) attached."""
    out = list(versions)
    for v in out:
        entity = Entity.from_db(
            v._state.db, _ENTITY_LOADED, [v.entity_id, cluster.pk, v.kind, v._entity_namespace, v._entity_name]
        )
        entity.cluster = cluster
        v.entity = entity
    return out


def pods_on_node(cluster: Cluster, node: str, t: datetime) -> list[EntityVersion]:
    return _with_cluster(
        _as_of(cluster, "pod", t).filter(node=node).order_by("_entity_namespace", "_entity_name"), cluster
    )


def _gpu_order(v: EntityVersion) -> tuple[bool, Any, str]:
    return (v.state.get("index") is None, v.state.get("index", 0), v.entity.name)


def gpus_of_node(cluster: Cluster, node: str, t: datetime) -> list[EntityVersion]:
    rows = _with_cluster(_as_of(cluster, "gpu", t).filter(node=node), cluster)
    rows.sort(key=_gpu_order)
    return rows


def gpus_and_pods_on_node(
    cluster: Cluster, node: str, t: datetime
) -> tuple[list[EntityVersion], list[EntityVersion]]:
    """:func:`gpus_of_node` and :func:`pods_on_node` (same orders) in one query on the (node) index."""
    rows = _with_cluster(
        _as_of(cluster, ("gpu", "pod"), t).filter(node=node).order_by("_entity_namespace", "_entity_name"),
        cluster,
    )
    gpus = sorted((v for v in rows if v.kind == "gpu"), key=_gpu_order)
    return gpus, [v for v in rows if v.kind == "pod"]


def gpus_of_pod(cluster: Cluster, namespace: str, name: str, t: datetime) -> list[EntityVersion]:
    rows = _with_cluster(_as_of(cluster, "gpu", t).filter(pod=f"{namespace}/{name}"), cluster)
    rows.sort(key=lambda v: (v.node, v.state.get("index", 0)))
    return rows


def pods_of_job(cluster: Cluster, namespace: str, job: str, t: datetime) -> list[EntityVersion]:
    return _with_cluster(
        _as_of(cluster, "pod", t).filter(namespace=namespace, job=job).order_by("_entity_name"), cluster
    )


def jobs_where(cluster: Cluster, t: datetime, **hot: Any) -> list[EntityVersion]:
    return _with_cluster(_as_of(cluster, "job", t).filter(**hot), cluster)


def gpu_users_in_window(gpu: Entity, start: datetime, end: datetime, limit: int = 50) -> list[EntityVersion]:
    """The versions of one GPU overlapping the window that name a pod: who used it around t."""
    return list(
        EntityVersion.objects.overlapping(start, end)
        .filter(entity=gpu)
        .exclude(pod="")
        .order_by("valid_from")[:limit]
    )


def running_gpus(cluster: Cluster, t: datetime, **hot: Any) -> int:
    """GPUs held at t by running pods matching ``hot`` (project=…, queue=…): one aggregate query."""
    agg = _as_of(cluster, "pod", t).filter(phase="Running", **hot).exclude(node="").aggregate(n=Sum("gpus"))
    return int(agg["n"] or 0)


def phase_counts(cluster: Cluster, kind: str, t: datetime, **hot: Any) -> dict[str, dict[str, int]]:
    """{phase: {"count": n, "gpus": g}} of ``kind`` at t (one grouped query)."""
    rows = (
        EntityVersion.objects.as_of(t)
        .filter(cluster=cluster, kind=kind, deleted=False, **hot)
        .values("phase")
        .annotate(n=Count("id"), g=Sum("gpus"))
    )
    return {r["phase"]: {"count": r["n"], "gpus": int(r["g"] or 0)} for r in rows}


def events_near(
    cluster: Cluster,
    objects: Sequence[tuple[str, str, str]],
    t: datetime,
    window: timedelta,
    limit: int = EVENTS_LIMIT,
) -> list[KubeEvent]:
    """Kubernetes events of these (kind, namespace, name) objects seen within [t - w, t + w] (one query)."""
    if not objects:
        return []
    q = Q()
    for kind, ns, name in objects[:200]:
        q |= Q(involved_kind=kind, involved_namespace=ns, involved_name=name)
    rows = list(
        KubeEvent.objects.filter(cluster=cluster, last_time__gte=t - window, first_time__lte=t + window)
        .filter(q)
        .order_by("last_time", "id")[:limit]
    )
    for ev in rows:
        kind = EVENT_KINDS.get(ev.involved_kind)
        ev.ref = ref(cluster, kind, ev.involved_name, ev.involved_namespace) if kind else None
    return rows


#
# Queue order
#


def job_priority(state: dict[str, Any]) -> int:
    """Numeric priority of a job: ``state.priority`` when the collector has it, else its PriorityClass' default."""
    p = state.get("priority")
    if isinstance(p, int):
        return p
    return PRIORITY_CLASS_VALUES.get(str(state.get("priority_class") or ""), 0)


def _submitted(state: dict[str, Any]) -> str:
    s = state.get("submitted")
    if not s:
        return "9999"
    try:
        return parse_t(str(s)).isoformat()
    except ValueError:
        return str(s)


def _priority_expr() -> Coalesce:
    """SQL for :func:`job_priority`: state.priority, else the PriorityClass default, else 0."""
    by_class = Case(
        *[
            When(**{"state__priority_class": name}, then=Value(v))
            for name, v in PRIORITY_CLASS_VALUES.items()
        ],
        default=Value(0),
        output_field=IntegerField(),
    )
    return Coalesce(Cast(KT("state__priority"), IntegerField()), by_class)


def queue_position(cluster: Cluster, version: EntityVersion, t: datetime) -> tuple[int, int] | None:
    """(position, waiting) of a pending job in its queue at t, in :func:`queue_order` order.

    One aggregate query: the jobs ahead are counted in the database (priority, then submission
    time, then name), so a queue with thousands of waiting jobs costs no more than a short one.
    """
    state = version.state or {}
    mine_p, mine_sub = job_priority(state), str(state.get("submitted") or "")
    # ties go to the job recorded first (entity id): no join to the entity table
    ahead = (
        Q(p__gt=mine_p)
        | Q(p=mine_p, sub__lt=mine_sub)
        | Q(p=mine_p, sub=mine_sub, entity_id__lt=version.entity_id)
    )
    agg = (
        EntityVersion.objects.as_of(t)
        .filter(cluster=cluster, kind="job", queue=version.queue, phase="Pending", deleted=False)
        .annotate(p=_priority_expr(), sub=KT("state__submitted"))
        .aggregate(total=Count("id"), ahead=Count("id", filter=ahead))
    )
    if not agg["total"]:
        return None
    return (agg["ahead"] + 1, agg["total"])


def queue_order(jobs: Iterable[EntityVersion]) -> list[EntityVersion]:
    """Waiting jobs in the order the scheduler considers them: higher priority first, then earlier submission.

    Ties go to the job recorded first (entity id), the same rule :func:`queue_position` counts in SQL.
    """
    return sorted(jobs, key=lambda v: (-job_priority(v.state), _submitted(v.state), v.entity_id))
