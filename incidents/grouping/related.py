"""Rule 6: the entities an on-call engineer looks at next, attached to an incident as related."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Q

from collectors.models import Cluster, Entity, EntityVersion
from incidents.models import Incident, IncidentSubject

if TYPE_CHECKING:
    from incidents.grouping.lookups import Lookups

MAX_CANDIDATE_NODES = 64  # a pending job on a 1,000-node cluster: keep the first 64 candidates, not all
MAX_RELATED = 600

Attached = dict[int, tuple[str, str]]  # an incident's entities: entity id -> (role, kind)


def attached(incident: Incident) -> Attached:
    return attached_to([incident.pk])[incident.pk]


def attached_to(incident_ids: list[int], related_gpus: set[int] | None = None) -> dict[int, Attached]:
    """``attached`` of each incident, in one query. With ``related_gpus``, of the GPUs attached as related only
    those among them: a pending job relates every GPU of its candidate nodes (most of a busy incident's rows),
    and rule 7 reads of another incident's GPUs only its subjects and the faulty ones."""
    out: dict[int, Attached] = {pk: {} for pk in incident_ids}
    rows = IncidentSubject.objects.filter(incident_id__in=incident_ids)
    if related_gpus is not None:
        rows = rows.filter(Q(role="subject") | ~Q(entity__kind="gpu") | Q(entity_id__in=related_gpus))
    for pk, e, role, kind in rows.values_list("incident_id", "entity_id", "role", "entity__kind"):
        out[pk][e] = (role, kind)
    return out


def attach_subjects(
    incident: Incident, entities: list[Entity], *, role: str, have: Attached | None = None
) -> bool:
    """Attach entities not yet attached; an entity already a subject is never demoted to related.

    ``have`` is what is attached already (``attached(incident)``, read here when not given); it is kept
    up to date, so one read serves both roles and rule 7.
    """
    if not entities:
        return False
    if have is None:
        have = attached(incident)
    promoted = 0
    if role == "subject":
        related = [e.pk for e in entities if have.get(e.pk, ("",))[0] == "related"]
        if related:
            promoted = IncidentSubject.objects.filter(
                incident=incident, entity__in=related, role="related"
            ).update(role="subject")
            for pk in related:
                have[pk] = ("subject", have[pk][1])
    new = [
        IncidentSubject(incident=incident, entity=e, role=role) for e in _dedup(entities) if e.pk not in have
    ][:MAX_RELATED]
    IncidentSubject.objects.bulk_create(new, ignore_conflicts=True)
    for link in new:
        have[link.entity.pk] = (role, link.entity.kind)
    return bool(new) or bool(promoted)


def _dedup(entities: list[Entity]) -> list[Entity]:
    seen: dict[int, Entity] = {}
    for e in entities:
        seen.setdefault(e.pk, e)
    return list(seen.values())


def related_entities(subjects: list[Entity], at: datetime, lookups: Lookups | None = None) -> list[Entity]:
    """What an on-call engineer looks at next: a job's project, queue, pods, candidate nodes and their GPUs.

    With a batch's ``lookups`` (prefetched versions), a node's or GPU's relations are read from memory.
    """
    out: list[Entity] = []
    for ent in subjects:
        version = lookups.version(ent, at) if lookups else False
        if version is False:
            version = EntityVersion.objects.as_of(at).filter(entity=ent).first() or (
                EntityVersion.objects.filter(entity=ent, valid_from__lte=at).order_by("-valid_from").first()
            )
        hot = version or EntityVersion()
        cluster = ent.cluster
        if ent.kind == "pod":
            out += _named(cluster, "job", [hot.job], ent.namespace)
            out += _named(cluster, "node", [hot.node])
            out += _named(cluster, "queue", [hot.queue]) + _named(cluster, "project", [hot.project])
        elif ent.kind == "job":
            out += _named(cluster, "queue", [hot.queue]) + _named(cluster, "project", [hot.project])
            pods = list(
                EntityVersion.objects.as_of(at)
                .filter(cluster=cluster, kind="pod", job=ent.name, namespace=ent.namespace)
                .select_related("entity")[:64]
            )
            out += [p.entity for p in pods]
            nodes = {p.node for p in pods if p.node}
            pending = [p for p in pods if not p.node] or ([] if pods else [hot])
            node_entities = _named(cluster, "node", sorted(nodes))
            if pending:
                node_entities += candidate_nodes(cluster, (hot.state or {}).get("node_selector") or {}, at)
            out += node_entities
            out += gpus_of_nodes(cluster, [n.name for n in node_entities], at)
        elif ent.kind == "node":
            node_gpus = lookups.on_node(cluster, "gpu", ent.name, at) if lookups else None
            node_pods = lookups.on_node(cluster, "pod", ent.name, at) if lookups else None
            if node_gpus is not None and node_pods is not None:
                out += [v.entity for v in node_gpus[:MAX_RELATED]] + [v.entity for v in node_pods[:64]]
                continue
            out += gpus_of_nodes(cluster, [ent.name], at)
            out += [
                v.entity
                for v in EntityVersion.objects.as_of(at)
                .filter(cluster=cluster, kind="pod", node=ent.name)
                .select_related("entity")[:64]
            ]
        elif ent.kind == "gpu":
            if lookups is not None:
                node = lookups.entity(cluster, "node", hot.node) if hot.node else None
                out += [node] if node else []
            else:
                out += _named(cluster, "node", [hot.node])
            if hot.pod and "/" in hot.pod:
                ns, name = hot.pod.split("/", 1)
                pods = _named(cluster, "pod", [name], ns)
                out += pods
                pod_version = EntityVersion.objects.as_of(at).filter(entity__in=pods).first()
                if pod_version and pod_version.job:
                    out += _named(cluster, "job", [pod_version.job], ns)
        elif ent.kind == "queue":
            out += _named(cluster, "project", [hot.project])
        elif ent.kind == "project":
            out += _named(cluster, "queue", [hot.queue or ent.name])
    subject_ids = {s.pk for s in subjects}
    return [e for e in _dedup(out) if e.pk not in subject_ids][:MAX_RELATED]


def _named(cluster: Cluster, kind: str, names: list[str], namespace: str = "") -> list[Entity]:
    names = [n for n in names if n]
    if not names:
        return []
    return list(Entity.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name__in=names))


def candidate_nodes(cluster: Cluster, node_selector: dict[str, str], at: datetime) -> list[Entity]:
    """GPU nodes whose labels match the job's nodeSelector at ``at`` (bounded: the first MAX_CANDIDATE_NODES)."""
    ids: list[int] = []
    # Only the labels are read of each node's state (the whole state of every GPU node was most of a
    # grouping's time on a busy cluster), then the entities of those that match, in one more query.
    qs = EntityVersion.objects.as_of(at).filter(cluster=cluster, kind="node", gpus__gt=0)
    for entity_id, labels in qs.order_by("entity__name").values_list("entity_id", "state__labels"):
        labels = labels if isinstance(labels, dict) else {}
        if all(labels.get(k) == val for k, val in node_selector.items()):
            ids.append(entity_id)
            if len(ids) >= MAX_CANDIDATE_NODES:
                break
    found = Entity.objects.in_bulk(ids)
    return [found[i] for i in ids if i in found]


def gpus_of_nodes(cluster: Cluster, nodes: list[str], at: datetime) -> list[Entity]:
    if not nodes:
        return []
    qs = (
        EntityVersion.objects.as_of(at)
        .filter(cluster=cluster, kind="gpu", node__in=nodes)
        .select_related("entity")
        .only("entity")  # the entities, not the versions' states
    )
    return [v.entity for v in qs[:MAX_RELATED]]
