"""The inventory as of t, as the diagnosis reads it: the fleet, the incident's own objects in full, history,
changes and events over the lookback (``load_inventory``, for ``incidents.diagnosis_input``).

Bounded by the incident (docs/diagnosis.md): the fleet-wide rows one query per kind (nodes, GPUs, unfinished
pods' hot columns and what the fit counts, other jobs by the keys the checks read), the incident's own jobs
in full, only the changes the checks can read, and for an incident about placed objects only its own nodes'
history (of the others, their peak GPU count); never one query per node, pod or job. Objects picked by name
are found by their entity ids first, so each read is served by an index of the version table rather than by
joining every version of a kind to its entity.
Every fact carries the id of the incident Observation that shows it when the evidence collector froze one
(dedup keys ``state:<version>``, ``change:<id>``, ``event:<cluster>:<uid>:<count>``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from collectors.models import Cluster, Entity, EntityVersion
from incidents import batch_reads, snapshot
from incidents.batch_reads import HISTORY_COLUMNS
from incidents.diagnosis.types import DiagnosisInput, EntityState, Ref, gpus_of
from incidents.lookback_input import load_changes, load_events, placed_nodes
from incidents.models import Observation

HISTORY = timedelta(hours=3)  # request history, quota changes, "shortly before onset"
MAX_VERSIONS = 20000


def _state(v: EntityVersion, obs_by_key: dict[str, Observation]) -> EntityState:
    obs = obs_by_key.get(f"state:{v.pk}")
    e = v.entity
    return _row_state(e.kind, e.name, e.namespace, v.state, v.valid_from, v.valid_to, obs.pk if obs else None)


def _row_state(
    kind: str,
    name: str,
    namespace: str,
    state: dict[str, Any] | None,
    since: datetime,
    until: datetime | None,
    obs_id: int | None,
) -> EntityState:
    """One version as the checks read it (``obs_id``: the observation that recorded it, if any)."""
    return EntityState(
        kind,
        name,
        namespace,
        state=state or {},
        valid_from=since,
        valid_to=until,
        obs_id=obs_id,
    )


def load_inventory(
    di: DiagnosisInput,
    cluster: Cluster,
    t: datetime,
    *,
    subject_entities: list[Entity],
    obs_by_key: dict[str, Observation],
    bounded: bool = True,
) -> None:
    subject_ids = {e.pk for e in subject_entities}
    base = EntityVersion.objects.as_of(t).filter(cluster=cluster, deleted=False)
    fleet = snapshot.fleet_rows(cluster, t)
    # Observation id per version id, once (not one key string per fleet row).
    state_obs = {
        int(k[6:]): o.pk for k, o in obs_by_key.items() if k.startswith("state:") and k[6:].isdigit()
    }

    def states(kind: str, rows: list[tuple[Any, ...]]) -> list[EntityState]:
        return [
            _row_state(kind, name, ns, state, since, until, state_obs.get(pk))
            for pk, name, ns, state, since, until in rows[:MAX_VERSIONS]
        ]

    for kind in snapshot.KINDS:
        di._of(kind).extend(states(kind, fleet[kind]))
    _load_pods(di, cluster.pk, base, fleet["pod"], subject_entities, obs_by_key, state_obs)
    jobs = _jobs(di, cluster, base, fleet, subject_entities, bounded)
    di.jobs.extend(states("job", jobs))
    slim_ids = {id(row) for row in fleet["job"]}
    di.partial.update(Ref("job", row[1], row[2]) for row in jobs if id(row) in slim_ids)
    di.departments.extend(_departments(base, state_obs))
    _load_vanished_gpus(di, cluster, t, [e for e in subject_entities if e.kind == "gpu"], obs_by_key)
    start = min(di.onset, t) - HISTORY
    placed = placed_nodes(di) if bounded else None
    _load_history(
        di, cluster, start, t, subject_ids, subject_entities, obs_by_key, placed=placed, bounded=bounded
    )
    load_changes(
        di,
        cluster,
        subject_entities,
        start,
        t,
        obs_by_key,
        fleet_shared=placed is None and bounded,
        bounded=bounded,
    )
    load_events(di, cluster, start, t, obs_by_key)


def load_pass_state(di: DiagnosisInput, cluster: Cluster, t: datetime) -> None:
    """What one scheduling pass reads of the cluster at t, with no subject (the what-if and queues pages, the
    waiting order): the fleet's rows (``snapshot.fleet_rows``: every node, GPU, queue and project in full, every
    unfinished pod's hot columns, every job by ``snapshot.SLIM_JOB_KEYS``), the departments, and of the lookback
    only the most GPUs each node reported (its nominal count, ``node_resources.node_nominal_gpus``).

    Not the nodes' versions over the lookback, nor the changes and events a diagnosis cites: the pass, the
    what-if edits and the reclaims they bring read none of them, and at 200 nodes decoding them was most of the
    what-if page (~10,000 JSON states per request)."""
    fleet = snapshot.fleet_rows(cluster, t)
    for kind in snapshot.KINDS:
        di._of(kind).extend(
            _row_state(kind, name, ns, state, since, until, None)
            for _, name, ns, state, since, until in fleet[kind][:MAX_VERSIONS]
        )
    di.pods.extend(
        EntityState("pod", name, ns, state=state, valid_from=since)
        for _, name, ns, state, since in fleet["pod"][:MAX_VERSIONS]
    )
    di.jobs.extend(
        _row_state("job", name, ns, state, since, until, None)
        for _, name, ns, state, since, until in fleet["job"][:MAX_VERSIONS]
    )
    di.partial.update(Ref("job", row[1], row[2]) for row in fleet["job"])
    base = EntityVersion.objects.as_of(t).filter(cluster=cluster, deleted=False)
    di.departments.extend(_departments(base, {}))
    di.peak_gpus = _peak_gpus(cluster, t - HISTORY, t, set())


def _departments(base: Any, state_obs: dict[int, int]) -> list[EntityState]:
    """Departments (KAI parent queues, Kueue cohorts): few, read as of t here rather than through the fleet cache."""
    return [
        _row_state("department", name, ns, state, since, until, state_obs.get(pk))
        for pk, name, ns, state, since, until in base.filter(kind="department")
        .order_by("entity__name")
        .values_list("pk", "entity__name", "entity__namespace", "state", "valid_from", "valid_to")[
            :MAX_VERSIONS
        ]
    ]


def _load_history(
    di: DiagnosisInput,
    cluster: Cluster,
    start: datetime,
    t: datetime,
    subject_ids: set[int],
    subject_entities: list[Entity],
    obs_by_key: dict[str, Observation],
    *,
    placed: set[str] | None,
    bounded: bool,
) -> None:
    """The versions of (start, t] the checks read over time into ``di.history`` (and, for an incident about
    placed objects, ``di.peak_gpus``)."""
    # History of what the checks read over time: subject objects, their jobs/pods, nodes, GPUs and policy.
    # (GPU history only for subject GPUs: a fleet's GPUs would dominate the load for nothing.)
    # An incident about placed objects reads the history of its own nodes only: of the others the checks read
    # nothing but the most GPUs each reported (a node's nominal count, for the fit in an action's impact).
    kinds = ["queue", "project"]
    named = Q(pk__in=[])  # the entities picked by name: their ids, so the versions are found by index
    if placed is None:
        kinds.append("node")
    else:
        named |= Q(kind="node", name__in=placed)
        di.peak_gpus = _peak_gpus(cluster, start, t, placed)
    job_names = [e.name for e in subject_entities if e.kind == "job"]
    subject_pods = {(e.name, e.namespace) for e in subject_entities if e.kind == "pod"}
    pod_jobs = [s.get("job") for s in di.pods if (s.name, s.namespace) in subject_pods]
    if job_names or pod_jobs:
        named |= Q(kind="job", name__in=[*job_names, *[j for j in pod_jobs if j]])
    ids = set(subject_ids)
    if placed or job_names or pod_jobs:
        ids.update(Entity.objects.filter(named, cluster=cluster).values_list("pk", flat=True))
    # Inside a batch (``batch_reads``) a waiting job's incident takes the fleet's part from the shared rows.
    shared = batch_reads.fleet_history(cluster, start, t) if placed is None and bounded else None
    if shared is not None and set(kinds) == set(batch_reads.HISTORY_KINDS):
        hist_rows = batch_reads.merged(
            shared, _history(cluster, start, t, Q(entity_id__in=ids)) if ids else [], 5
        )
    else:
        hist_rows = _history(cluster, start, t, Q(entity_id__in=ids) | Q(kind__in=kinds))
    # Tuples, not model instances: a fleet's 3 h of node history is ~20,000 rows.
    for pk, kind, name, ns, state, since, until in hist_rows[:MAX_VERSIONS]:
        obs = obs_by_key.get(f"state:{pk}")
        es = _row_state(kind, name, ns, state, since, until, obs.pk if obs else None)
        di.history.setdefault(es.ref, []).append(es)


def _history(cluster: Cluster, start: datetime, t: datetime, wanted: Q) -> list[tuple[Any, ...]]:
    """The versions ``wanted`` valid at some moment of (start, t], oldest first (``HISTORY_COLUMNS``)."""
    return list(
        EntityVersion.objects.filter(cluster=cluster, valid_from__lte=t, deleted=False)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=start))
        .filter(wanted)
        .order_by("valid_from", "id")
        .values_list(*HISTORY_COLUMNS)[:MAX_VERSIONS]
    )


def _peak_gpus(cluster: Cluster, start: datetime, t: datetime, skip: set[str]) -> dict[str, int]:
    """The most GPUs each node but ``skip`` reported over [start, t] (``fit.node_nominal_gpus``), from one
    text column per version rather than its state, each distinct (node, count) once: a fleet's nodes report the
    same count sweep after sweep (1,213 nodes over 3 h were 20,000 versions, past the read's bound)."""
    gpus = KeyTextTransform("nvidia.com/gpu", KeyTransform("capacity", "state"))
    rows = (
        EntityVersion.objects.filter(cluster=cluster, kind="node", valid_from__lte=t, deleted=False)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=start))
        .exclude(entity__name__in=skip)
        .annotate(s_gpus=gpus)
        .values_list("entity__name", "s_gpus")
        .distinct()[:MAX_VERSIONS]
    )
    peak: dict[str, int] = {}
    for name, text in rows:
        n = gpus_of({"nvidia.com/gpu": text})
        if n > peak.get(name, 0):
            peak[name] = n
    return peak


def _jobs(
    di: DiagnosisInput,
    cluster: Cluster,
    base: Any,
    fleet: snapshot.Rows,
    subject_entities: list[Entity],
    bounded: bool,
) -> list[tuple[Any, ...]]:
    """Every job as of t: the incident's own in full, the others by the keys the checks read of them.

    The incident's own: the subject jobs, the jobs of the subject pods and of the pods on the subject nodes
    (a GPU's node too), and every job of the subject jobs' and pods' queues and projects (quota, queue
    order, the other waiting jobs a quota change would admit). Any other job is read for whether it waits, where it is charged and
    served and what it asks for (``snapshot.SLIM_JOB_KEYS``): one query for the few in full, the rest from
    the fleet rows. Rows keep the fleet's order.
    """
    if not bounded:
        return list(
            base.filter(kind="job")
            .order_by("entity__namespace", "entity__name")
            .values_list("pk", "entity__name", "entity__namespace", "state", "valid_from", "valid_to")[
                :MAX_VERSIONS
            ]
        )
    slim = fleet["job"]
    names = {(e.namespace, e.name) for e in subject_entities if e.kind == "job"}
    subject_pods = {(e.namespace, e.name) for e in subject_entities if e.kind == "pod"}
    nodes = {e.name for e in subject_entities if e.kind == "node"}
    gpu_names = {e.name for e in subject_entities if e.kind == "gpu"}
    nodes.update(g.get("node") for g in di.gpus if g.name in gpu_names and g.get("node"))
    for p in di.pods:
        if (p.namespace, p.name) in subject_pods:
            if p.get("job"):
                names.add((p.namespace, p.get("job")))
            if p.get("node"):
                nodes.add(p.get("node"))
    policy: set[str] = set()
    for _, name, ns, state, *_ in slim:
        if (ns, name) in names:
            policy.update(v for v in (state.get("queue"), state.get("project")) if v)
    names.update((p.namespace, p.get("job")) for p in di.pods if p.get("node") in nodes and p.get("job"))
    policy.update(
        p.get(k) for p in di.pods if (p.namespace, p.name) in subject_pods for k in ("queue", "project")
    )
    policy.discard(None)
    policy.discard("")
    if not names and not policy:
        return slim
    # The named jobs by entity id and the others by their hot columns: each branch is an index's, where
    # matching names on the entity table joined every job version of the cluster to its entity.
    ids = Entity.objects.filter(cluster=cluster, kind="job", name__in={n for _, n in names})
    wanted = Q(entity_id__in=list(ids.values_list("pk", flat=True))) if names else Q(pk__in=[])
    if policy:
        wanted |= Q(queue__in=policy) | Q(project__in=policy)
    full = {
        row[0]: row
        for row in base.filter(kind="job")
        .filter(wanted)
        .values_list("pk", "entity__name", "entity__namespace", "state", "valid_from", "valid_to")[
            :MAX_VERSIONS
        ]
    }
    return [full.get(row[0], row) for row in slim]


def _load_pods(
    di: DiagnosisInput,
    cluster_id: int,
    base: Any,
    slim: list[tuple[Any, ...]],
    subject_entities: list[Entity],
    obs_by_key: dict[str, Observation],
    state_obs: dict[int, int],
) -> None:
    """Subject pods, pods of subject jobs and pods holding subject GPUs in full; every other unfinished pod by
    its hot columns only.

    The checks need only where other pods run, what they hold and when they started (fit, quota usage,
    overtaking); decoding 20,000 pod states for that would dominate the diagnosis.
    """
    subject_ids = {e.pk for e in subject_entities}
    full = Q(entity_id__in=subject_ids)
    for e in subject_entities:
        if e.kind == "job":
            full |= Q(job=e.name, namespace=e.namespace)
    gpu_ids = [e.pk for e in subject_entities if e.kind == "gpu"]
    if gpu_ids:  # the pods holding subject GPUs: a pod that never ran leaves its GPUs allocated and idle
        holders = [
            holder.partition("/")
            for holder in base.filter(kind="gpu", entity_id__in=gpu_ids)
            .exclude(pod="")
            .values_list("pod", flat=True)
        ]
        # By entity id (one query for their names), so each branch is an index's: matching the name on the
        # entity table joined every pod version of the cluster to its entity.
        ids: dict[str, list[int]] = {}
        if holders:
            for pk, name in Entity.objects.filter(
                cluster_id=cluster_id, kind="pod", name__in={name for _, _, name in holders}
            ).values_list("pk", "name"):
                ids.setdefault(name, []).append(pk)
        for ns, _, name in holders:
            full |= Q(entity_id__in=ids.get(name, []), namespace=ns)
    seen: set[int] = set()
    for v in base.filter(kind="pod").filter(full).select_related("entity")[:MAX_VERSIONS]:
        seen.add(v.pk)
        di.pods.append(_state(v, obs_by_key))
    kept = 0
    for pk, name, ns, state, since in slim:  # hot columns and what the fit counts (snapshot.pod_extras)
        if pk in seen:
            continue
        if kept >= MAX_VERSIONS:
            break
        kept += 1
        di.pods.append(EntityState("pod", name, ns, state=state, valid_from=since, obs_id=state_obs.get(pk)))


def _load_vanished_gpus(
    di: DiagnosisInput, cluster: Cluster, t: datetime, gpus: list[Entity], obs_by_key: dict[str, Observation]
) -> None:
    """A subject GPU with no version at t stopped being listed by DCGM: keep its last state, marked missing."""
    have = {g.name for g in di.gpus}
    for ent in gpus:
        if ent.name in have:
            continue
        last = (
            EntityVersion.objects.filter(entity=ent, valid_from__lte=t, deleted=False)
            .select_related("entity")
            .order_by("-valid_from")
            .first()
        )
        if last is None:
            continue
        es = _state(last, obs_by_key)
        es.state = {**es.state, "present": False, "phase": "missing"}
        es.valid_from = last.valid_to or es.valid_from
        di.gpus.append(es)
