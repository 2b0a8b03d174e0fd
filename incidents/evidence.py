"""Freeze an incident's evidence into Observations, with provenance, so it outlives event TTL and retention.

Window: [onset − 1 h, resolution or now], DCGM series from 15 min earlier. For every subject and related
entity: object states (one observation per inventory version overlapping the window),
Kubernetes events, changes (inventory diffs and external ones), DCGM series
(live from Prometheus when the cluster has one, else the downsampled
TelemetrySample points), previous-container logs of failing pods, and the
alerts themselves. A source that fails becomes an observation with ``error``.

Idempotent: every fact has a ``dedup_key``; a rerun adds new facts, refreshes
changed ones (a version that closed, more series points — merged, never
dropped) and leaves the rest alone, so a worker killed mid-way can rerun.
The observation vocabulary (kinds and content shapes) is read by
``incidents.diagnosis``: add keys freely, never rename.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from collectors.changefmt import describe_change
from collectors.models import Change, Cluster, Entity, EntityVersion, KubeEvent, SourceRun
from collectors.storage import insert_rows
from incidents import diagnosis_run, inline_worker, pod_logs, telemetry
from incidents.models import Alert, Incident, IncidentSubject, Observation
from incidents.observation_batch import Batch
from rcaweb.timestamps import format_t_or_none

logger = logging.getLogger(__name__)

LOOKBACK = timedelta(hours=1)
# DCGM series start this much earlier than the rest of the window: a rule that needs a spell as long as the
# lookback (an allocation idle for 1 h, the idle alert's own ``for``) must see where that spell began, not
# have it cut at the window's start a step or two short of the hour.
SERIES_LEAD = timedelta(minutes=15)
MAX_STATE_OBSERVATIONS = 3000
MAX_EVENTS = 2000
MAX_CHANGES = 1000
STATE_SOURCES = {"pod": "k8s", "job": "k8s", "node": "k8s", "gpu": "prometheus"}


def collect_evidence(incident_id: int, now: datetime | None = None) -> int:
    """Collect (or re-collect) the incident's evidence; returns how many observations were written or refreshed."""
    now = now or timezone.now()
    Incident.objects.filter(pk=incident_id).update(collection_state="running")
    try:
        incident = Incident.objects.select_related("cluster").get(pk=incident_id)
        start = incident.window_start or (incident.onset - LOOKBACK)
        end = incident.window_end or incident.resolved_at or cluster_now(incident.cluster, now)
        if end < incident.onset:
            end = incident.onset
        batch = Batch(incident, now)
        links = list(
            IncidentSubject.objects.filter(incident=incident).select_related("entity", "entity__cluster")
        )
        entities = [s.entity for s in links]
        picked = telemetry.pick_gpus(links)
        collect_alerts(batch)
        collect_states(batch, entities, start, end, healthy_unless=candidate_gpus(links, picked))
        collect_events(batch, entities, start, end)
        collect_changes(batch, entities, start, end)
        telemetry.collect_dcgm(batch, incident.cluster, links, start - SERIES_LEAD, end, gpus=picked)
        pod_logs.collect_logs(batch, incident.cluster, links, start, end)
        written = save(batch)
    except Exception:
        Incident.objects.filter(pk=incident_id).update(collection_state="failed")
        logger.exception("evidence collection for incident %s failed", incident_id)
        raise
    Incident.objects.filter(pk=incident_id).update(collection_state="done", collected_at=now)
    run_diagnosis(incident_id)
    return written


CLUSTER_CLOCK_SLACK = timedelta(minutes=10)


def cluster_now(cluster: Cluster | None, now: datetime) -> datetime:
    """ "Now" as far as the cluster's sources are concerned: never past the last sweep by more than the slack.

    Live, sweeps run every 30 s and this is ``now``. A simulated cluster in fast forward (run_scenario)
    lives hours behind the wall clock: its window must end at its own present, not ours.
    """
    if cluster is None:
        return now
    last = SourceRun.objects.filter(cluster=cluster).aggregate(t=Max("time"))["t"]
    return min(now, last + CLUSTER_CLOCK_SLACK) if last else now


def run_diagnosis(incident_id: int) -> None:
    """Hand over to the diagnosis (``incidents.diagnosis_run``); a failure is logged, the evidence stays."""
    try:
        diagnosis_run.diagnose_incident(incident_id)
        Incident.objects.filter(pk=incident_id).update(diagnosed_at=timezone.now())
    except Exception:
        logger.exception("diagnosis of incident %s failed", incident_id)


#
# Save: insert new facts, refresh changed ones
#


_OBSERVATION_FIELDS = tuple(f.attname for f in Observation._meta.concrete_fields if not f.primary_key)


def _row(obs: Observation) -> dict[str, Any]:
    return {name: getattr(obs, name) for name in _OBSERVATION_FIELDS}


def save(batch: Batch) -> int:
    if not batch.items:
        return 0
    # A first collection (most are) has nothing stored to compare with: one EXISTS instead of sending every
    # key of the batch (hundreds of states on a busy cluster) in an IN list.
    existing = (
        {
            key: (pk, content, error)
            for key, pk, content, error in Observation.objects.filter(
                incident=batch.incident, dedup_key__in=list(batch.items)
            ).values_list("dedup_key", "id", "content", "error")
        }
        if Observation.objects.filter(incident=batch.incident).exists()
        else {}
    )
    new = [o for k, o in batch.items.items() if k not in existing]
    written = 0
    with inline_worker.serialized(), transaction.atomic():
        # COPY on PostgreSQL (collectors.storage): a busy cluster's incident stores hundreds of states, whose
        # JSON bulk_create escaped one parameter at a time.
        insert_rows(Observation, [_row(o) for o in new], ignore_conflicts=True)
        written += len(new)
        for key, obs in batch.items.items():
            if key not in existing:
                continue
            pk, content, error = existing[key]
            if obs.kind == "dcgm_series" and not obs.error:
                obs.content = telemetry.merge_points(content, obs.content)
            if (content, error) != (obs.content, obs.error):
                Observation.objects.filter(pk=pk).update(
                    content=obs.content,
                    error=obs.error,
                    summary=obs.summary,
                    collected_at=obs.collected_at,
                    observed_at=obs.observed_at,
                )
                written += 1
    return written


#
# Alerts, states, events, changes
#


def collect_alerts(batch: Batch) -> None:
    for a in Alert.objects.filter(incident=batch.incident):
        content = {
            "name": a.name,
            "status": a.status,
            "labels": a.labels,
            "annotations": a.annotations,
            "starts_at": format_t_or_none(a.starts_at),
            "ends_at": format_t_or_none(a.ends_at),
        }
        batch.add(
            kind="alert",
            source="alert",
            locator=a.generator_url or f"alertmanager {a.group_key}",
            observed_at=a.starts_at,
            content=content,
            key=f"alert:{a.pk}:firing",
            summary=f"alert {a.name} fired ({a.severity or 'no severity'})",
        )
        if a.status == "resolved" and a.ends_at:
            batch.add(
                kind="alert",
                source="alert",
                locator=a.generator_url or f"alertmanager {a.group_key}",
                observed_at=a.ends_at,
                content=content,
                key=f"alert:{a.pk}:resolved",
                summary=f"alert {a.name} resolved",
            )


def api_path(entity: Entity, scheduler: str = "") -> str:
    """Where the fact lives in the cluster's API (what ``kubectl get --raw`` would read)."""
    ns, name = entity.namespace, entity.name
    if entity.kind == "pod":
        return f"/api/v1/namespaces/{ns}/pods/{name}"
    if entity.kind == "job":
        return f"/apis/batch/v1/namespaces/{ns}/jobs/{name}"
    if entity.kind == "node":
        return f"/api/v1/nodes/{name}"
    if entity.kind == "gpu":
        return f'DCGM_FI_DEV_GPU_UTIL{{UUID="{name}"}}'
    if scheduler == "kueue":
        return f"/apis/kueue.x-k8s.io/v1beta1/clusterqueues/{name}"
    return f"/apis/scheduling.run.ai/v2/queues/{name}"


def state_summary(kind: str, name: str, version: EntityVersion) -> str:
    """One line for the timeline: phase and, for scheduler decisions, the condition's reason and message."""
    st = version.state or {}
    if version.deleted:
        return f"{kind} {name} deleted"
    bits = [f"{kind} {name}"]
    if version.phase:
        bits.append(version.phase)
    sched = st.get("scheduling") or (st.get("conditions") or {}).get("PodScheduled")
    if isinstance(sched, dict) and sched.get("status") == "False":
        bits.append(f"{sched.get('reason', '')}: {sched.get('message', '')}".strip(": "))
    if kind in ("queue", "project") and st.get("quota_gpus") is not None:
        limit = st.get("limit_gpus")
        bits.append(
            f"quota {st.get('quota_gpus')} GPUs, " + (f"limit {limit}" if limit is not None else "no limit")
        )
    if kind == "node" and st.get("unschedulable"):
        bits.append("cordoned")
    if kind == "node" and version.gpus_allocatable is not None:
        bits.append(f"{version.gpus_allocatable}/{version.gpus} GPUs allocatable")
    return " · ".join(b for b in bits if b)


def candidate_gpus(links: list[IncidentSubject], picked: list[tuple[str, Any]]) -> set[int]:
    """GPUs linked only because their node is a candidate for a pending job (not the job's, not a subject's).

    A pending job's neighbourhood is its candidate nodes; of their GPUs only a fault costs it capacity (a
    GPU missing, an Xid, ECC errors: incidents.diagnosis.relevance). Their healthy states say nothing, and
    on a fleet they are hundreds of GPUs: only their unhealthy versions are frozen as evidence.
    """
    wanted = {e.pk for _, e in picked}
    return {
        s.entity.pk
        for s in links
        if s.entity.kind == "gpu" and s.role != "subject" and s.entity.pk not in wanted
    }


HEALTHY_GPU_PHASES = ("ok", "")


def collect_states(
    batch: Batch,
    entities: list[Entity],
    start: datetime,
    end: datetime,
    *,
    healthy_unless: frozenset[int] | set[int] = frozenset(),
) -> None:
    """Every version of these objects overlapping the window; of the ``healthy_unless`` GPUs, the unhealthy ones."""
    by_id = {e.pk: e for e in entities}
    wanted = Q(entity_id__in=[pk for pk in by_id if pk not in healthy_unless])
    if healthy_unless:
        unhealthy = ~Q(phase__in=HEALTHY_GPU_PHASES) | Q(deleted=True)
        wanted |= Q(entity_id__in=[pk for pk in by_id if pk in healthy_unless]) & unhealthy
    qs = EntityVersion.objects.overlapping(start, end).filter(wanted).order_by("valid_from")
    for v in qs[:MAX_STATE_OBSERVATIONS]:
        ent = by_id[v.entity_id]
        scheduler = ent.cluster.scheduler if ent.kind in ("queue", "project") else ""
        source = STATE_SOURCES.get(ent.kind) or (scheduler if scheduler in ("kai", "kueue") else "k8s")
        content = {
            "state": v.state,
            "valid_from": format_t_or_none(v.valid_from),
            "valid_to": format_t_or_none(v.valid_to),
        }
        if v.deleted:
            content["deleted"] = True
        batch.add(
            kind=f"{ent.kind}_state",
            source=source,
            locator=api_path(ent, scheduler),
            observed_at=v.valid_from,
            content=content,
            key=f"state:{v.pk}",
            entity=ent,
            summary=state_summary(ent.kind, f"{ent.namespace + '/' if ent.namespace else ''}{ent.name}", v),
        )


def collect_events(batch: Batch, entities: list[Entity], start: datetime, end: datetime) -> None:
    """Events of these objects, and of the PodGroup/Workload a job's scheduler keeps for it."""
    wanted = {
        (e.kind.capitalize(), e.namespace, e.name): e for e in entities if e.kind in ("pod", "job", "node")
    }
    jobs = {(e.namespace, e.name): e for e in entities if e.kind == "job"}
    clusters = {e.cluster_id for e in entities}
    if not wanted:
        return
    names = Q(involved_name__in={k[2] for k in wanted})
    for ns, job in jobs:
        names |= Q(
            involved_kind__in=("PodGroup", "Workload"), involved_namespace=ns, involved_name__contains=job
        )
    qs = (
        KubeEvent.objects.filter(cluster_id__in=clusters, last_time__gte=start, first_time__lte=end)
        .filter(names)
        .order_by("last_time")[:MAX_EVENTS]
    )
    for ev in qs:
        ent = wanted.get((ev.involved_kind, ev.involved_namespace, ev.involved_name))
        if ent is None and ev.involved_kind in ("PodGroup", "Workload"):
            ent = next(
                (
                    j
                    for (ns, name), j in jobs.items()
                    if ns == ev.involved_namespace and name in ev.involved_name
                ),
                None,
            )
        if ent is None:
            continue
        content = {
            "reason": ev.reason,
            "message": ev.message,
            "type": ev.type,
            "count": ev.count,
            "component": ev.component,
            "involved": {
                "kind": ev.involved_kind,
                "namespace": ev.involved_namespace,
                "name": ev.involved_name,
            },
            "first_time": format_t_or_none(ev.first_time),
            "last_time": format_t_or_none(ev.last_time),
        }
        ns = ev.involved_namespace or ev.namespace
        locator = (
            f"/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name={ev.involved_name}"
            if ns
            else f"/api/v1/events?fieldSelector=involvedObject.name={ev.involved_name}"
        )
        batch.add(
            kind="event",
            source="k8s",
            locator=locator,
            observed_at=ev.last_time,
            content=content,
            key=f"event:{ev.cluster_id}:{ev.uid}:{ev.count}",
            entity=ent,
            summary=f"{ev.type} {ev.reason} on {ev.involved_kind.lower()} {ev.involved_name}: {ev.message}",
        )


def collect_changes(batch: Batch, entities: list[Entity], start: datetime, end: datetime) -> None:
    ids = [e.pk for e in entities]
    qs = (
        Change.objects.filter(entity_id__in=ids, time__gte=start, time__lte=end)
        .select_related("entity", "entity__cluster")
        .order_by("time", "id")[:MAX_CHANGES]
    )
    for ch in qs:
        ent = ch.entity
        content = {
            "field": ch.field,
            "old": ch.old,
            "new": ch.new,
            "actor": ch.actor,
            "source": ch.source,
            "entity": {"kind": ent.kind, "namespace": ent.namespace, "name": ent.name} if ent else None,
            "summary": ch.summary,
            "link": ch.link,
        }
        what = ch.summary or describe_change(ch.field, ch.old, ch.new)
        batch.add(
            kind="change",
            source="change",
            locator=ch.link or (api_path(ent, ent.cluster.scheduler) if ent else "change"),
            observed_at=ch.time,
            content=content,
            key=f"change:{ch.pk}",
            entity=ent,
            summary=f"{ent or ''} {what}{' by ' + ch.actor if ch.actor else ''}".strip(),
        )
