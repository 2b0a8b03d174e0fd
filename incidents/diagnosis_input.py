"""Load what the diagnosis reads: the incident's observations and the inventory as of t (DiagnosisInput).

Not pure (database reads only, never writes); ``incidents.diagnosis_run`` runs the checks on what this returns.
Bounded by the incident (docs/diagnosis.md): the fleet-wide rows one query per kind (nodes, GPUs, unfinished
pods' hot columns and what the fit counts, other jobs by the keys the checks read), the incident's own jobs
in full, only the changes the checks can read, and for an incident about placed objects only its own nodes'
history (of the others, their peak GPU count); never one query per node, pod or job.
Every inventory fact carries the id of the incident Observation that shows it when the evidence collector
froze one (dedup keys ``state:<version>``, ``change:<id>``, ``event:<cluster>:<uid>:<count>``), so
citations point at collected evidence first and at computed inventory facts only otherwise.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Q, Subquery
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.utils import timezone

from collectors.models import Change, Cluster, Entity, EntityVersion, KubeEvent, SourceRun, TelemetrySample
from incidents import snapshot
from incidents.diagnosis.health import subject_nodes
from incidents.diagnosis.types import (
    ChangeRec,
    DiagnosisInput,
    EntityState,
    EventRec,
    LogRec,
    Ref,
    Series,
    SourceFailure,
    gpus_of,
    parse_ts,
)
from incidents.models import Alert, Incident, IncidentSubject, Observation

logger = logging.getLogger(__name__)

HISTORY = timedelta(hours=3)  # request history, quota changes, "shortly before onset"
MAX_VERSIONS = 20000
MAX_CHANGES = 3000
MAX_EVENTS = 2000
SAMPLE_METRICS = (
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
)
# DCGM fields the checks read (health, efficiency); other evidence series are not parsed.
USED_METRICS = frozenset(
    {
        *SAMPLE_METRICS,
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    }
)


def default_t(incident: Incident) -> datetime:
    """The newest moment the inventory knows about (the last sweep), within the incident's window."""
    latest = None
    if incident.cluster_id:
        latest = SourceRun.objects.filter(cluster_id=incident.cluster_id).aggregate(m=Max("time"))["m"]
        if latest is None:
            latest = EntityVersion.objects.filter(cluster_id=incident.cluster_id).aggregate(
                m=Max("valid_from")
            )["m"]
    t = latest or timezone.now()
    if incident.window_end is not None and t > incident.window_end:
        t = incident.window_end
    return max(t, incident.onset)


def diagnosis_moment(incident: Incident) -> tuple[datetime, str]:
    """The moment the next diagnosis describes, and why: the firing time of the incident's newest alert.

    The first run describes the onset; each alert that joins later moves it to that alert's firing time.
    Never past what the inventory knows (the last sweep) nor past the incident's end, never before the onset.
    Only a moment at the onset is called the onset: a first run made once a later alert had joined describes
    that alert's moment and says so.
    """
    newest = (
        Alert.objects.filter(incident=incident).order_by("-starts_at").values_list("starts_at", flat=True)
    )
    t = max([incident.onset, *newest[:1]])
    t = min(t, default_t(incident))
    t = max(t, incident.onset)
    return t, "onset" if t <= incident.onset else "alert"


def load_job_input(
    entity: Entity, t: datetime, *, bounded: bool = True
) -> tuple[DiagnosisInput, EntityState | None]:
    """Input for the job page's "why not running at t" panel (no incident: inventory only)."""
    ref = Ref("job", entity.name, entity.namespace)
    di = DiagnosisInput(
        t=t, onset=t, cluster=entity.cluster.name, scheduler=entity.cluster.scheduler, subjects=[ref]
    )
    _load_inventory(di, entity.cluster, t, subject_entities=[entity], obs_by_key={}, bounded=bounded)
    return di, di.find("job", entity.name, entity.namespace)


def load_cluster_input(cluster: Cluster, t: datetime) -> DiagnosisInput:
    """The whole cluster as of t with no subject (the what-if page): every waiting job by the keys the
    scheduling model reads of it (``snapshot.SLIM_JOB_KEYS``), the fleet's rows, the nodes' history."""
    di = DiagnosisInput(t=t, onset=t, cluster=cluster.name, scheduler=cluster.scheduler)
    _load_inventory(di, cluster, t, subject_entities=[], obs_by_key={})
    return di


def load_incident_input(
    incident: Incident, t: datetime | None = None, *, bounded: bool = True
) -> DiagnosisInput:
    """The incident's observations and the inventory as of t, bounded by what its checks read (module doc).

    ``bounded=False`` reads every job of the cluster in full and every change of the lookback: the reference
    the bounded input is compared with (tests/incidents/test_scenarios_expect.py), not a production path.
    """
    t = t or default_t(incident)
    cluster = incident.cluster
    links = list(
        IncidentSubject.objects.filter(incident=incident).select_related("entity", "entity__cluster")
    )
    if cluster is None and links:
        cluster = links[0].entity.cluster
    subjects = [lk.entity for lk in links if lk.role == "subject"]
    di = DiagnosisInput(
        t=t,
        onset=incident.onset,
        cluster=cluster.name if cluster else "",
        scheduler=cluster.scheduler if cluster else "kai",
        subjects=[Ref(e.kind, e.name, e.namespace) for e in subjects],
        alertnames=sorted(set(Alert.objects.filter(incident=incident).values_list("name", flat=True))),
    )
    observations = list(Observation.objects.filter(incident=incident).select_related("entity"))
    obs_by_key = {o.dedup_key: o for o in observations}
    if cluster is not None:
        _load_inventory(di, cluster, t, subject_entities=subjects, obs_by_key=obs_by_key, bounded=bounded)
    _load_observations(di, observations)
    if cluster is not None:
        _load_samples(di, cluster, t)  # only where the evidence holds no live series
        _load_source_runs(di, cluster, t)
    return di


#
# Inventory as of t
#
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


def _load_inventory(
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
    _load_pods(di, base, fleet["pod"], subject_entities, obs_by_key, state_obs)
    jobs = _jobs(di, base, fleet, subject_entities, bounded)
    di.jobs.extend(states("job", jobs))
    slim_ids = {id(row) for row in fleet["job"]}
    di.partial.update(Ref("job", row[1], row[2]) for row in jobs if id(row) in slim_ids)
    # Departments (KAI parent queues, Kueue cohorts): few, read as of t here rather than through the fleet cache.
    di.departments.extend(
        _row_state("department", name, ns, state, since, until, state_obs.get(pk))
        for pk, name, ns, state, since, until in base.filter(kind="department")
        .order_by("entity__name")
        .values_list("pk", "entity__name", "entity__namespace", "state", "valid_from", "valid_to")[
            :MAX_VERSIONS
        ]
    )
    _load_vanished_gpus(di, cluster, t, [e for e in subject_entities if e.kind == "gpu"], obs_by_key)
    start = min(di.onset, t) - HISTORY
    # History of what the checks read over time: subject objects, their jobs/pods, nodes, GPUs and policy.
    # (GPU history only for subject GPUs: a fleet's GPUs would dominate the load for nothing.)
    # An incident about placed objects reads the history of its own nodes only: of the others the checks read
    # nothing but the most GPUs each reported (a node's nominal count, for the fit in an action's impact).
    placed = placed_nodes(di) if bounded else None
    wanted = Q(entity_id__in=subject_ids) | Q(kind__in=("queue", "project"))
    if placed is None:
        wanted |= Q(kind="node")
    else:
        wanted |= Q(kind="node", entity__name__in=placed)
        di.peak_gpus = _peak_gpus(cluster, start, t, placed)
    job_names = [e.name for e in subject_entities if e.kind == "job"]
    subject_pods = {(e.name, e.namespace) for e in subject_entities if e.kind == "pod"}
    pod_jobs = [s.get("job") for s in di.pods if (s.name, s.namespace) in subject_pods]
    if job_names or pod_jobs:
        wanted |= Q(kind="job", entity__name__in=[*job_names, *[j for j in pod_jobs if j]])
    hist = (
        EntityVersion.objects.filter(cluster=cluster, valid_from__lte=t, deleted=False)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=start))
        .filter(wanted)
        .order_by("valid_from", "id")
    )
    # Tuples, not model instances: a fleet's 3 h of node history is ~20,000 rows.
    for pk, kind, name, ns, state, since, until in hist.values_list(
        "pk", "entity__kind", "entity__name", "entity__namespace", "state", "valid_from", "valid_to"
    )[:MAX_VERSIONS]:
        obs = obs_by_key.get(f"state:{pk}")
        es = _row_state(kind, name, ns, state, since, until, obs.pk if obs else None)
        di.history.setdefault(es.ref, []).append(es)
    lookback = Change.objects.filter(cluster=cluster, time__gte=start, time__lte=t)
    if bounded:
        lookback = lookback.filter(_changes_read(di, cluster, subject_entities))
    changes = lookback.order_by("time", "id").values_list(
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
    )[:MAX_CHANGES]
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
    _load_events(di, cluster, start, t, obs_by_key)


def _peak_gpus(cluster: Cluster, start: datetime, t: datetime, skip: set[str]) -> dict[str, int]:
    """The most GPUs each node but ``skip`` reported over [start, t] (``fit.node_nominal_gpus``), from one
    text column per version rather than its state."""
    gpus = KeyTextTransform("nvidia.com/gpu", KeyTransform("capacity", "state"))
    rows = (
        EntityVersion.objects.filter(cluster=cluster, kind="node", valid_from__lte=t, deleted=False)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=start))
        .exclude(entity__name__in=skip)
        .annotate(s_gpus=gpus)
        .values_list("entity__name", "s_gpus")[:MAX_VERSIONS]
    )
    peak: dict[str, int] = {}
    for name, text in rows:
        n = gpus_of({"nvidia.com/gpu": text})
        if n > peak.get(name, 0):
            peak[name] = n
    return peak


def _jobs(
    di: DiagnosisInput, base: Any, fleet: snapshot.Rows, subject_entities: list[Entity], bounded: bool
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
    wanted = Q(entity__name__in={n for _, n in names})
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


def placed_nodes(di: DiagnosisInput) -> set[str] | None:
    """The nodes an incident about placed objects is about, or None when the whole fleet is its neighbourhood:
    the nodes the checks examine (``incidents.diagnosis.health.subject_nodes``), and None as well when a
    subject job is not in the input (its pods could be anywhere)."""
    if any(r.kind == "job" and di.find("job", r.name, r.namespace) is None for r in di.subjects):
        return None
    nodes, whole = subject_nodes(di)
    return None if whole else nodes


def _changes_read(di: DiagnosisInput, cluster: Cluster, subject_entities: list[Entity]) -> Q:
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
    read = Q(kind__in=("queue", "project", "department"))
    nodes = placed_nodes(di)
    if nodes is None:
        read |= Q(kind__in=("node", "gpu"))
    else:
        gpus = {g.name for g in di.gpus if g.get("node") in nodes}
        read |= Q(kind="node", name__in=nodes) | Q(kind="gpu", name__in=gpus)
    if pods:
        read |= Q(kind="pod", name__in=pods)
    if jobs:
        read |= Q(kind="job", name__in=jobs)
    entities = Entity.objects.filter(cluster=cluster).filter(read).values("pk")
    return (
        Q(entity__isnull=True)
        | Q(entity_id__in={e.pk for e in subject_entities})
        | Q(entity_id__in=Subquery(entities))
    )


def _load_pods(
    di: DiagnosisInput,
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
        for holder in (
            base.filter(kind="gpu", entity_id__in=gpu_ids).exclude(pod="").values_list("pod", flat=True)
        ):
            ns, _, name = holder.partition("/")
            full |= Q(entity__name=name, namespace=ns)
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


def _load_events(
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


def _load_samples(di: DiagnosisInput, cluster: Cluster, t: datetime) -> None:
    """Downsampled telemetry of the GPUs the incident touches (evidence series replace these when present)."""
    uuids: set[str] = set()
    nodes: set[str] = set()
    for r in di.subjects:
        if r.kind == "gpu":
            uuids.add(r.name)
        elif r.kind == "node":
            nodes.add(r.name)
        elif r.kind in ("pod", "job"):
            es = di.find(r.kind, r.name, r.namespace)
            pods = [es] if r.kind == "pod" else (di.pods_of_job(es) if es else [])
            uuids.update(
                g.name for g in di.gpus if any(g.get("pod") == f"{p.namespace}/{p.name}" for p in pods if p)
            )
    for g in di.gpus:
        if g.get("node") in nodes or g.name in uuids:
            uuids.add(g.name)
            nodes.add(g.get("node"))
    if not uuids:
        return
    have = {(s.uuid, s.metric) for s in di.series}
    uuids = {u for u in uuids if any((u, m) not in have for m in SAMPLE_METRICS)}
    if not uuids:
        return
    start = min(di.onset, t) - HISTORY
    rows = (
        TelemetrySample.objects.filter(
            cluster=cluster, gpu__name__in=uuids, metric__in=SAMPLE_METRICS, time__gte=start, time__lte=t
        )
        .values_list("gpu__name", "metric", "time", "value")
        .order_by("time")[:50000]
    )
    node_of = {g.name: g.get("node") or "" for g in di.gpus}
    series: dict[tuple[str, str], Series] = {}
    for uuid, metric, ts, value in rows:
        if (uuid, metric) in have:
            continue
        s = series.setdefault(
            (uuid, metric),
            Series(
                metric,
                uuid,
                node_of.get(uuid, ""),
                [],
                locator=f'avg_over_time({metric}{{UUID="{uuid}"}}[5m]) (stored samples)',
            ),
        )
        s.points.append((ts, value))
    di.series.extend(series.values())


#
# The incident's own observations
#
def _load_observations(di: DiagnosisInput, observations: list[Observation]) -> None:
    seen_events = {e.obs_id for e in di.events if e.obs_id}
    for o in observations:
        c = o.content or {}
        if o.error:
            di.failures.append(
                SourceFailure(
                    source=c.get("source") or o.source, locator=o.locator, error=o.error, obs_id=o.pk
                )
            )
            continue
        if o.kind == "alert":
            di.alert_obs.append(o.pk)
            di.alerts.append(
                (o.pk, dict(c.get("labels") or {}), parse_ts(c.get("starts_at")) or o.observed_at)
            )
        elif o.kind == "event" and o.pk not in seen_events:
            inv = c.get("involved") or {}
            di.events.append(
                EventRec(
                    time=parse_ts(c.get("last_time")) or o.observed_at,
                    reason=c.get("reason", ""),
                    message=c.get("message", ""),
                    type=c.get("type", "Normal"),
                    count=int(c.get("count") or 1),
                    component=c.get("component", ""),
                    first_time=parse_ts(c.get("first_time")),
                    involved=Ref(
                        str(inv.get("kind", "")).lower(), inv.get("name", ""), inv.get("namespace", "")
                    ),
                    obs_id=o.pk,
                )
            )
        elif o.kind == "dcgm_series" and c.get("points") and c.get("metric") in USED_METRICS:
            points = [(p, float(v)) for p, v in ((parse_ts(ts), v) for ts, v in c["points"]) if p is not None]
            uuid = c.get("uuid") or (o.entity.name if o.entity and o.entity.kind == "gpu" else "")
            # Evidence series (raw points, live from Prometheus) are read first; stored samples fill gaps only.
            di.series.append(
                Series(
                    c.get("metric", ""),
                    uuid,
                    c.get("node", ""),
                    sorted(points),
                    locator=o.locator,
                    obs_id=o.pk,
                )
            )
        elif o.kind == "log" and o.entity is not None:
            di.logs.append(
                LogRec(
                    Ref("pod", o.entity.name, o.entity.namespace),
                    c.get("container", ""),
                    list(c.get("lines") or []),
                    bool(c.get("previous")),
                    obs_id=o.pk,
                )
            )


def _load_source_runs(di: DiagnosisInput, cluster: Cluster, t: datetime) -> None:
    """A source whose latest call before t failed: the inventory it feeds may be stale.

    Only real failures (no answer, an HTTP error, a malformed answer) count; a call that answered
    "no data" (``SourceRun.is_gap``) is a gap the evidence shows, not a reason to doubt the findings.
    """
    recent = SourceRun.objects.filter(
        cluster=cluster, time__lte=t, time__gte=t - timedelta(minutes=30)
    ).order_by("time")
    latest: dict[tuple[str, str], SourceRun] = {}
    for run in recent:
        latest[(run.source, run.call)] = run
    known = {(f.source, f.locator) for f in di.failures}
    for (source, call), run in latest.items():
        if run.is_gap:  # answered with no data (a short history, a counter not exported): not a failure
            continue
        if not run.ok and (source, call) not in known:
            di.failures.append(SourceFailure(source=source, locator=call, error=run.error or "failed"))
