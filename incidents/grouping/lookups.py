"""The inventory reads of grouping, one by one or prefetched for a batch of alerts (:class:`Lookups`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from collectors.models import Cluster, Entity, EntityVersion
from incidents.grouping.labels import identities, node_label
from incidents.models import Alert


class Lookups:
    """What ``resolve_subjects`` and ``related_entities`` read, prefetched for a batch of alerts in a few
    queries instead of a few per alert.

    The inventory as of the batch's start: clusters, entities and versions are written only by inventory
    sweeps, and one that commits while a batch runs is seen by the next batch, as by an alert grouped a
    moment earlier. Grouping's own writes (incidents, their subjects) are never cached here. A name that
    was not prefetched is read when asked (and remembered), so the answers are the uncached functions'.
    """

    def __init__(self) -> None:
        self._clusters: dict[str, Cluster | None] = {}
        self._only: list[Cluster | None] = []
        self._by_id: dict[int, Cluster] = {}  # the prefetched clusters by pk (prefetch fills it)
        self._entities: dict[tuple[int, str, str, str], Entity | None] = {}
        self._jobs: dict[tuple[int, str], list[Entity]] = {}
        self._gpu_versions: dict[tuple[int, str], list[EntityVersion]] = {}
        self._versions: dict[
            int, list[EntityVersion]
        ] = {}  # subject entity id -> its versions, by valid_from
        self._on_node: dict[
            tuple[int, str, str], list[EntityVersion]
        ] = {}  # (cluster, kind, node) -> versions

    @classmethod
    def prefetch(cls, alerts: list[Alert]) -> Lookups:
        """One query for the clusters, one per kind for the entities, one for the GPUs of named nodes."""
        self = cls()
        names = {a.labels.get("cluster", "") for a in alerts}
        found = {c.name: c for c in Cluster.objects.filter(name__in=names - {""})}
        self._clusters = {n: found.get(n) for n in names - {""}}
        if "" in names:
            self.cluster({})
        wanted: dict[tuple[int, str], set[tuple[str, str]]] = {}  # (cluster, kind) -> {(namespace, name)}
        gpu_nodes: dict[int, set[str]] = {}
        for a in alerts:
            cluster = self.cluster(a.labels)
            if cluster is None:
                continue
            for kind, ns, name in identities(a.labels):
                wanted.setdefault((cluster.pk, kind), set()).add((ns, name))
            node = node_label(a.labels)
            if a.labels.get("gpu") and not a.labels.get("UUID") and node:
                gpu_nodes.setdefault(cluster.pk, set()).add(node)
        clusters = self._by_id = {c.pk: c for c in [*self._clusters.values(), *self._only] if c is not None}
        for (cluster_id, kind), keys in wanted.items():
            by_key = {}
            for e in Entity.objects.filter(cluster_id=cluster_id, kind=kind, name__in={n for _, n in keys}):
                e.cluster = clusters[cluster_id]  # related_entities reads it: no query per entity
                by_key[(e.namespace, e.name)] = e
            for ns, name in keys:
                self._entities[(cluster_id, kind, ns, name)] = by_key.get((ns, name))
        for cluster_id, nodes in gpu_nodes.items():
            rows = EntityVersion.objects.filter(cluster_id=cluster_id, kind="gpu", node__in=nodes)
            for v in rows.select_related("entity").order_by("id"):
                v.entity.cluster = clusters[cluster_id]
                self._gpu_versions.setdefault((cluster_id, v.node), []).append(v)
            for node in nodes:
                self._gpu_versions.setdefault((cluster_id, node), [])
        return self

    def prefetch_related(self, subjects: list[Entity], start: datetime, end: datetime) -> None:
        """For ``related_entities`` of these subjects at times in [start, end]: their versions, and the GPU and
        pod versions on subject nodes (three queries)."""
        ids = {e.pk for e in subjects}
        if not ids:
            return
        for v in EntityVersion.objects.filter(entity_id__in=ids, valid_from__lte=end).order_by(
            "valid_from", "id"
        ):
            self._versions.setdefault(v.entity_id, []).append(v)
        for pk in ids:
            self._versions.setdefault(pk, [])
        nodes: dict[int, set[str]] = {}
        for e in subjects:
            if e.kind == "node":
                nodes.setdefault(e.cluster_id, set()).add(e.name)
        for cluster_id, names in nodes.items():
            for kind in ("gpu", "pod"):
                rows = (
                    EntityVersion.objects.overlapping(start, end + timedelta(microseconds=1))
                    .filter(cluster_id=cluster_id, kind=kind, node__in=names)
                    .select_related("entity")
                    .order_by("id")
                )
                for v in rows:
                    if cluster_id in self._by_id:
                        v.entity.cluster = self._by_id[cluster_id]
                    self._on_node.setdefault((cluster_id, kind, v.node), []).append(v)
                for name in names:
                    self._on_node.setdefault((cluster_id, kind, name), [])

    def version(self, ent: Entity, at: datetime) -> EntityVersion | None | Literal[False]:
        """The entity's version at ``at`` (else its last one before), as ``related_entities`` reads it; False
        when this entity was not prefetched."""
        versions = self._versions.get(ent.pk)
        if versions is None:
            return False
        current = [v for v in versions if v.valid_from <= at and (v.valid_to is None or v.valid_to > at)]
        if current:
            return min(current, key=lambda v: v.pk)
        before = [v for v in versions if v.valid_from <= at]
        return before[-1] if before else None

    def on_node(self, cluster: Cluster, kind: str, node: str, at: datetime) -> list[EntityVersion] | None:
        """Versions of ``kind`` on ``node`` at ``at`` (None when not prefetched)."""
        versions = self._on_node.get((cluster.pk, kind, node))
        if versions is None:
            return None
        return [v for v in versions if v.valid_from <= at and (v.valid_to is None or v.valid_to > at)]

    def cluster(self, labels: dict[str, str]) -> Cluster | None:
        name = labels.get("cluster", "")
        if name:
            if name not in self._clusters:
                self._clusters[name] = Cluster.objects.filter(name=name).first()
            return self._clusters[name]
        if not self._only:
            self._only.append(resolve_cluster({}))
        return self._only[0]

    def entity(self, cluster: Cluster, kind: str, name: str, namespace: str = "") -> Entity | None:
        key = (cluster.pk, kind, namespace, name)
        if key not in self._entities:
            self._entities[key] = find_entity(cluster, kind, name, namespace)
        return self._entities[key]

    def jobs_named(self, cluster: Cluster, name: str) -> list[Entity]:
        key = (cluster.pk, name)
        if key not in self._jobs:
            self._jobs[key] = list(Entity.objects.filter(cluster=cluster, kind="job", name=name)[:2])
        return self._jobs[key]

    def gpu_by_index(self, cluster: Cluster, node: str, index: str, at: datetime) -> Entity | None:
        """As :func:`gpu_by_index`, on the node's prefetched GPU versions."""
        versions = self._gpu_versions.get((cluster.pk, node))
        if versions is None:
            return gpu_by_index(cluster, node, index, at)
        try:
            idx = int(index)
        except ValueError:
            return None
        mine = [v for v in versions if v.state.get("index") == idx and v.valid_from <= at]
        current = [v for v in mine if v.valid_to is None or v.valid_to > at]
        if not current:  # the GPU vanished before the alert (Xid 79): its last known version
            current = sorted(mine, key=lambda v: v.valid_from, reverse=True)[:1]
        return current[0].entity if current else None


def resolve_cluster(labels: dict[str, str]) -> Cluster | None:
    """The ``cluster`` label, or the only cluster rcaweb watches when the rule does not add one."""
    name = labels.get("cluster", "")
    if name:
        return Cluster.objects.filter(name=name).first()
    only = list(Cluster.objects.all()[:2])
    return only[0] if len(only) == 1 else None


def find_entity(cluster: Cluster, kind: str, name: str, namespace: str = "") -> Entity | None:
    return Entity.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name=name).first()


def gpu_by_index(cluster: Cluster, node: str, index: str, at: datetime) -> Entity | None:
    """A ``gpu`` label is an index on the node: find the GPU entity that had that index there at ``at``."""
    try:
        idx = int(index)
    except ValueError:
        return None
    versions = EntityVersion.objects.filter(cluster=cluster, kind="gpu", node=node).select_related("entity")
    current = [v for v in versions.as_of(at) if v.state.get("index") == idx]
    if not current:  # the GPU vanished before the alert (Xid 79): take its last known version
        current = [
            v
            for v in versions.filter(valid_from__lte=at).order_by("-valid_from")[:64]
            if v.state.get("index") == idx
        ]
    return current[0].entity if current else None
