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
from typing import Any

from django.db.models import FloatField, Sum
from django.db.models.functions import Cast, Coalesce

from collectors import storage
from collectors.collection_errors import SourceTrouble, troubles
from collectors.models import NAMESPACED_KINDS, Change, Cluster, Entity, EntityVersion, KubeEvent
from collectors.storage import raw_sql
from rcaweb import kinds

logger = logging.getLogger(__name__)

MAX_RELATED_IDS = (
    900  # SQLite's default host-parameter limit is 999; beyond this, related changes narrow to the entity
)
EVENT_KINDS = {k.event_kind: k.name for k in kinds.KINDS if k.event_kind}  # involvedObject kinds with a page
EVENTS_LIMIT = 100


@dataclass(frozen=True)
class Ref:
    """An object named by another object's state (a pod's node, a GPU's pod): linkable without a query."""

    cluster: Cluster
    kind: str
    name: str
    namespace: str = ""

    def get_absolute_url(self) -> str:
        return kinds.url_for(self.kind, self.cluster.name, self.namespace, self.name)

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


_ENTITY_AT_COLUMNS = f"{raw_sql.ENTITY_SELECT}, {raw_sql.CLUSTER_SELECT}, {raw_sql.EV_SELECT}"
_ENTITY_AT_FROM = f"""
FROM {raw_sql.ENTITY} e
JOIN {raw_sql.CLUSTER} c ON c.id = e.cluster_id
LEFT JOIN {raw_sql.EV} v ON v.id = (
    SELECT v1.id FROM {raw_sql.EV} v1 WHERE v1.entity_id = e.id AND v1.valid_from <= %s
    ORDER BY v1.valid_from DESC LIMIT 1
)
WHERE c.name = %s AND e.kind = %s AND e.namespace = %s AND e.name = %s"""
_ENTITY_AT = f"SELECT {_ENTITY_AT_COLUMNS}{_ENTITY_AT_FROM}"
_AT_CLUSTER = raw_sql.entity.width
_AT_VERSION = _AT_CLUSTER + raw_sql.cluster.width
_AT_WIDTH = _AT_VERSION + raw_sql.version.width


def entity_at(
    cluster: str, kind: str, name: str, namespace: str, t: datetime
) -> tuple[Entity | None, EntityVersion | None]:
    """The entity with its cluster, and its version at t (None when it did not exist then, tombstones
    included), as :func:`get_entity` and :func:`version_at` return them, in one query; (None, None)
    when the object was never recorded.

    The version is the last one started at or before t, one step back along the (entity, valid_from)
    index whatever the length of history; it is the version at t unless it ended by t.
    """
    found = raw_sql.fetch(_ENTITY_AT, [raw_sql.db_time(t), cluster, kind, namespace, name])
    return _entity_and_version(found[0], t) if found else (None, None)


def _entity_and_version(row: Sequence[Any], t: datetime) -> tuple[Entity, EntityVersion | None]:
    """An :data:`_ENTITY_AT_COLUMNS` row as :func:`entity_at` returns it."""
    entity = raw_sql.entity(row)
    entity.cluster = raw_sql.cluster(row, _AT_CLUSTER)
    if row[_AT_VERSION] is None:  # no version started by t (LEFT JOIN)
        return entity, None
    v = raw_sql.version(row, _AT_VERSION)
    if v.deleted or (v.valid_to is not None and v.valid_to <= t):
        return entity, None
    v.entity = entity
    return entity, v


_VERSION_AT = (
    f"SELECT {raw_sql.EV_SELECT} FROM {raw_sql.EV} v WHERE v.entity_id = %s AND v.valid_from <= %s "
    "ORDER BY v.valid_from DESC LIMIT 1"
)


def version_at(entity: Entity, t: datetime) -> EntityVersion | None:
    """The version valid at t (None when the object did not exist, including tombstones)."""
    found = raw_sql.fetch(_VERSION_AT, [entity.pk, raw_sql.db_time(t)])
    if not found:
        return None
    v = raw_sql.version(found[0])
    if v.deleted or (v.valid_to is not None and v.valid_to <= t):  # the last version started by t ended by t
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


Related = dict[int, Ref]  # the entities whose changes a page shows: id -> what to call it


def related_entities(
    cluster: Cluster, entities: Iterable[Entity], names: Iterable[tuple[str, str, str]] = ()
) -> Related:
    """The entities whose changes a page shows, by id: these entities, and the ones named (kind, namespace, name).

    Names are resolved first (one query on the identity index, only when a name is given) so the change
    queries run on (entity, time) alone (a join on the entity's name made SQLite scan every change of the
    cluster), and so they need not read each change's entity back: the page already knows them all.
    At most :data:`MAX_RELATED_IDS` (SQLite's host-parameter limit).
    """
    related: Related = {e.pk: Ref(cluster, e.kind, e.name, e.namespace) for e in entities}
    terms: list[str] = []
    params: list[object] = [cluster.pk]
    for kind, ns, name in names:
        if name:
            terms.append("(kind = %s AND namespace = %s AND name = %s)")
            params += [kind, ns, name]
    if terms:
        sql = (
            f"SELECT id, kind, namespace, name FROM {raw_sql.ENTITY} "
            f"WHERE cluster_id = %s AND ({' OR '.join(terms)}) ORDER BY id"
        )
        for pk, kind, ns, name in raw_sql.fetch(sql, params):
            related.setdefault(pk, Ref(cluster, kind, name, ns))
    return dict(list(related.items())[:MAX_RELATED_IDS])


_FIELD_HISTORY = (
    f"SELECT {raw_sql.CHANGE_SELECT} FROM {raw_sql.CHANGE} ch WHERE ch.entity_id = %s AND ch.field IN ({{fields}}) "
    "ORDER BY ch.time DESC, ch.id DESC LIMIT %s"
)


def field_history(entity: Entity, fields: Sequence[str], limit: int = 50) -> list[Change]:
    """Changes of some fields of one entity over its whole life, newest first (request-size history)."""
    sql = _FIELD_HISTORY.format(fields=raw_sql.in_list(fields))
    return [raw_sql.change(r) for r in raw_sql.fetch(sql, [entity.pk, *fields, limit])]


_VERSIONS_UNTIL = (
    f"SELECT {raw_sql.EV_SELECT} FROM {raw_sql.EV} v WHERE v.entity_id = %s AND v.valid_from <= %s "
    "ORDER BY v.valid_from DESC LIMIT %s"
)


def versions_until(entity: Entity, t: datetime, limit: int = 20) -> list[EntityVersion]:
    """The entity's last ``limit`` versions started at or before t, newest first, tombstones included (one
    query along the (entity, valid_from) index): the pod page's YAML diff and container state history."""
    found = raw_sql.fetch(_VERSIONS_UNTIL, [entity.pk, raw_sql.db_time(t), limit])
    out = [raw_sql.version(r) for r in found]
    for v in out:
        v.entity = entity
    return out


#
# Collection errors
#

# The entity page's first query: the entity and its version at t (one row, part 0), UNION ALL the failed
# source calls of its cluster in the window (part 1), each part's columns NULL in the other's rows.
_RUN_TIME = 1 + 1 + _AT_WIDTH + raw_sql.source_run.fields.index("time")  # ORDER BY ordinal
_ENTITY_PAGE_AT = f"""
SELECT 0 AS part, {_ENTITY_AT_COLUMNS}, {", ".join(["NULL"] * raw_sql.source_run.width)}{_ENTITY_AT_FROM}
UNION ALL
SELECT 1, {", ".join(["NULL"] * _AT_WIDTH)}, {raw_sql.SOURCE_RUN_SELECT}
FROM (SELECT r.* FROM {raw_sql.SOURCE_RUN} r JOIN {raw_sql.CLUSTER} rc ON rc.id = r.cluster_id
      WHERE rc.name = %s AND NOT r.ok AND r.time >= %s AND r.time <= %s ORDER BY r.time LIMIT 200) sr
ORDER BY 1, {_RUN_TIME}"""


def entity_page_at(
    cluster: str, kind: str, name: str, namespace: str, t: datetime, errors_since: datetime
) -> tuple[Entity | None, EntityVersion | None, list[SourceTrouble]]:
    """:func:`entity_at` and :func:`collection_errors` of its cluster from ``errors_since`` to t, in one
    query (a round trip fewer on every entity page); (None, None, []) when the object was never recorded."""
    found = raw_sql.fetch(
        _ENTITY_PAGE_AT,
        [
            raw_sql.db_time(t),
            cluster,
            kind,
            namespace,
            name,
            cluster,
            raw_sql.db_time(errors_since),
            raw_sql.db_time(t),
        ],
    )
    if not found or found[0][0] != 0:
        return None, None, []
    entity, version = _entity_and_version(found[0][1:], t)
    runs = [raw_sql.source_run(row, 1 + _AT_WIDTH) for row in found[1:]]
    return entity, version, troubles(runs)


#
# Related objects as of t
#


def _by_name(v: EntityVersion) -> tuple[str, str]:
    return v.entity.namespace, v.entity.name


def _versions_at(
    cluster: Cluster, kinds: Sequence[str], t: datetime, order: str = "", **hot: str
) -> list[EntityVersion]:
    """Versions of ``kinds`` at t whose hot columns equal ``hot``, each with its entity (and the entity's
    cluster) attached, in one query (:func:`collectors.storage.versions_at`).
    ``order``: "name" (namespace, name; sorted here, the same on both backends) or "" (the callers sort)."""
    out = storage.versions_at(cluster, kinds, t, **hot)
    if order == "name":
        out.sort(key=_by_name)
    return out


def pods_on_node(cluster: Cluster, node: str, t: datetime) -> list[EntityVersion]:
    return _versions_at(cluster, ["pod"], t, order="name", node=node)


def _gpu_order(v: EntityVersion) -> tuple[bool, Any, str]:
    return (v.state.get("index") is None, v.state.get("index", 0), v.entity.name)


def gpus_of_node(cluster: Cluster, node: str, t: datetime) -> list[EntityVersion]:
    return sorted(_versions_at(cluster, ["gpu"], t, node=node), key=_gpu_order)


def gpus_and_pods_on_node(
    cluster: Cluster, node: str, t: datetime
) -> tuple[list[EntityVersion], list[EntityVersion]]:
    """:func:`gpus_of_node` and :func:`pods_on_node` (same orders) in one query on the (node) index."""
    found = _versions_at(cluster, ["gpu", "pod"], t, order="name", node=node)
    gpus = sorted((v for v in found if v.kind == "gpu"), key=_gpu_order)
    return gpus, [v for v in found if v.kind == "pod"]


def gpus_of_pod(cluster: Cluster, namespace: str, name: str, t: datetime) -> list[EntityVersion]:
    found = _versions_at(cluster, ["gpu"], t, pod=f"{namespace}/{name}")
    found.sort(key=lambda v: (v.node, v.state.get("index", 0)))
    return found


def pods_of_job(cluster: Cluster, namespace: str, job: str, t: datetime) -> list[EntityVersion]:
    return _versions_at(cluster, ["pod"], t, order="name", namespace=namespace, job=job)


def jobs_where(cluster: Cluster, t: datetime, **hot: str) -> list[EntityVersion]:
    return _versions_at(cluster, ["job"], t, **hot)


def gpu_users_in_window(gpu: Entity, start: datetime, end: datetime, limit: int = 50) -> list[EntityVersion]:
    """The versions of one GPU overlapping the window that name a pod: who used it around t."""
    return list(
        EntityVersion.objects.overlapping(start, end)
        .filter(entity=gpu)
        .exclude(pod="")
        .order_by("valid_from")[:limit]
    )


def running_gpu_units(cluster: Cluster, t: datetime, **hot: Any) -> float:
    """GPUs held at t by running pods matching ``hot``, counted as their queue counts them: a 0.5 share is 0.5,
    a MIG 3g.40gb instance 3 (KAI); pods recorded before ``gpu_units`` existed count their whole GPUs."""
    agg = (
        EntityVersion.objects.as_of(t)
        .filter(cluster=cluster, kind="pod", deleted=False, phase="Running", **hot)
        .exclude(node="")
        .aggregate(n=Sum(Coalesce("gpu_units", Cast("gpus", FloatField()))))
    )
    return round(float(agg["n"] or 0), 4)


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
    terms, params = [], [cluster.pk, raw_sql.db_time(t - window), raw_sql.db_time(t + window)]
    for kind, ns, name in objects[:200]:
        terms.append("(ev.involved_kind = %s AND ev.involved_namespace = %s AND ev.involved_name = %s)")
        params += [kind, ns, name]
    sql = (
        f"SELECT {raw_sql.EVENT_SELECT} FROM {raw_sql.EVENT} ev "
        f"WHERE ev.cluster_id = %s AND ev.last_time >= %s AND ev.first_time <= %s AND ({' OR '.join(terms)}) "
        "ORDER BY ev.last_time, ev.id LIMIT %s"
    )
    rows = [raw_sql.event(r) for r in raw_sql.fetch(sql, [*params, limit])]
    for ev in rows:
        page_kind = EVENT_KINDS.get(ev.involved_kind)
        ev.ref = ref(cluster, page_kind, ev.involved_name, ev.involved_namespace) if page_kind else None
    return rows
