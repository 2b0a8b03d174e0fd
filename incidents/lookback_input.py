"""The changes and events a diagnosis reads over its lookback, bounded by the incident (``load_changes``,
``load_events``, for ``incidents.inventory_input``), and the nodes an incident about placed objects is about.

Every fact carries the id of the incident Observation that shows it when the evidence collector froze one
(dedup keys ``change:<id>``, ``event:<cluster>:<uid>:<count>``).
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q, Subquery

from collectors.models import Change, Cluster, Entity, KubeEvent
from incidents import batch_reads
from incidents.batch_reads import CHANGE_COLUMNS
from incidents.diagnosis.health import subject_nodes
from incidents.diagnosis.types import ChangeRec, DiagnosisInput, EventRec, Ref
from incidents.models import Observation

MAX_CHANGES = 3000
MAX_EVENTS = 2000


def placed_nodes(di: DiagnosisInput) -> set[str] | None:
    """The nodes an incident about placed objects is about, or None when the whole fleet is its neighbourhood:
    the nodes the checks examine (``incidents.diagnosis.health.subject_nodes``), and None as well when a
    subject job is not in the input (its pods could be anywhere)."""
    if any(r.kind == "job" and di.find("job", r.name, r.namespace) is None for r in di.subjects):
        return None
    nodes, whole = subject_nodes(di)
    return None if whole else nodes


def changes_read(
    di: DiagnosisInput, cluster: Cluster, subject_entities: list[Entity], *, fleet: bool = True
) -> Q:
    """The changes the checks can read: external ones, of policy objects, of the nodes and GPUs the incident
    examines (every node and GPU for a waiting job, else those of ``placed_nodes``) and of the incident's own
    pods and jobs (the subjects, a subject job's pods, a subject pod's job). Pod churn elsewhere in the fleet
    is none of these.

    The entities are picked in a subquery on the entity table, not by joining every change of the lookback to
    its entity (49,000 changes in 3 h at 1,000 nodes: the join was most of a placed incident's input).
    """
    pods = {e.name for e in subject_entities if e.kind == "pod"}
    jobs = {e.name for e in subject_entities if e.kind == "job"}
    for e in subject_entities:
        if e.kind == "job":
            pods.update(p.name for p in di.pods if p.namespace == e.namespace and p.get("job") == e.name)
        elif e.kind == "pod":
            pod = di.find("pod", e.name, e.namespace)
            if pod is not None and pod.get("job"):
                jobs.add(pod.get("job"))
    read = Q(kind__in=("queue", "project", "department")) if fleet else Q(pk__in=[])
    nodes = placed_nodes(di)
    if nodes is None:
        if fleet:
            read |= Q(kind__in=("node", "gpu"))
    else:
        gpus = {g.name for g in di.gpus if g.get("node") in nodes}
        read |= Q(kind="node", name__in=nodes) | Q(kind="gpu", name__in=gpus)
    if pods:
        read |= Q(kind="pod", name__in=pods)
    if jobs:
        read |= Q(kind="job", name__in=jobs)
    entities = Entity.objects.filter(cluster=cluster).filter(read).values("pk")
    if not fleet:  # the incident's own few objects by id: the (entity, time) index's lookups
        return Q(entity_id__in={e.pk for e in subject_entities} | set(entities.values_list("pk", flat=True)))
    return (
        Q(entity__isnull=True)
        | Q(entity_id__in={e.pk for e in subject_entities})
        | Q(entity_id__in=Subquery(entities))
    )


def load_changes(
    di: DiagnosisInput,
    cluster: Cluster,
    subject_entities: list[Entity],
    start: datetime,
    t: datetime,
    obs_by_key: dict[str, Observation],
    *,
    fleet_shared: bool,
    bounded: bool,
) -> None:
    """The changes of (start, t] the checks can read into ``di.changes``; ``fleet_shared``: inside a batch
    (``batch_reads``) the fleet's part comes from the shared rows."""
    lookback = Change.objects.filter(cluster=cluster, time__gte=start, time__lte=t)
    shared = batch_reads.fleet_changes(cluster, start, t) if fleet_shared else None
    if shared is not None:
        own = changes_read(di, cluster, subject_entities, fleet=False)
        mine = list(lookback.filter(own).order_by("time", "id").values_list(*CHANGE_COLUMNS)[:MAX_CHANGES])
        changes = batch_reads.merged(shared, mine, 5)[:MAX_CHANGES]
    else:
        if bounded:
            lookback = lookback.filter(changes_read(di, cluster, subject_entities))
        changes = list(lookback.order_by("time", "id").values_list(*CHANGE_COLUMNS)[:MAX_CHANGES])
    for pk, eid, kind, name, ns, when, fld, old, new, actor, source, summary, link in changes:
        obs = obs_by_key.get(f"change:{pk}")
        di.changes.append(
            ChangeRec(
                time=when,
                entity=Ref(kind, name, ns) if eid is not None else None,
                field=fld,
                old=old,
                new=new,
                actor=actor,
                source=source,
                summary=summary,
                link=link,
                obs_id=obs.pk if obs else None,
            )
        )


def load_events(
    di: DiagnosisInput, cluster: Cluster, start: datetime, t: datetime, obs_by_key: dict[str, Observation]
) -> None:
    names = {r.name for r in di.subjects}
    for r in di.subjects:
        if r.kind == "job":
            job = di.find("job", r.name, r.namespace)
            if job is not None:
                names.update(p.name for p in di.pods_of_job(job))
    for r in di.subjects:  # the nodes the incident is about, or its pods run on (not the whole fleet)
        if r.kind == "gpu":
            g = di.find("gpu", r.name)
            if g is not None and g.get("node"):
                names.add(g.get("node"))
    names.update(p.get("node") for p in di.pods if p.get("node") and p.ref in set(di.subjects))
    if not names:
        return
    q = Q(involved_name__in=names)
    for r in di.subjects:
        if r.kind == "job":
            q |= Q(involved_kind__in=("PodGroup", "Workload"), involved_name__contains=r.name)
    qs = (
        KubeEvent.objects.filter(cluster=cluster, last_time__gte=start, first_time__lte=t)
        .filter(q)
        .order_by("last_time")[:MAX_EVENTS]
    )
    for ev in qs:
        obs = obs_by_key.get(f"event:{ev.cluster_id}:{ev.uid}:{ev.count}")
        di.events.append(
            EventRec(
                time=ev.last_time,
                reason=ev.reason,
                message=ev.message,
                involved=Ref(ev.involved_kind.lower(), ev.involved_name, ev.involved_namespace),
                type=ev.type,
                count=ev.count,
                component=ev.component,
                first_time=ev.first_time,
                obs_id=obs.pk if obs else None,
            )
        )
