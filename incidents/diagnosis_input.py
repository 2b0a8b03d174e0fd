"""Load what the diagnosis reads: the incident's observations and the inventory as of t (DiagnosisInput).

Not pure (database reads only, never writes); ``incidents.diagnosis_run`` runs the checks on what this returns.
The inventory part, bounded by the incident (docs/diagnosis.md), is ``incidents.inventory_input``; here are the
entry points, the moment a diagnosis describes, the incident's own observations, stored GPU samples and the
sources' failures. Every inventory fact carries the id of the incident Observation that shows it when the
evidence collector froze one, so citations point at collected evidence first and at computed inventory facts
only otherwise.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db.models import Max
from django.utils import timezone

from collectors.models import Cluster, Entity, EntityVersion, SourceRun, TelemetrySample
from incidents import batch_reads
from incidents.diagnosis.types import (
    DiagnosisInput,
    EntityState,
    EventRec,
    LogRec,
    Ref,
    Series,
    SourceFailure,
    parse_ts,
)
from incidents.inventory_input import HISTORY, load_inventory, load_pass_state
from incidents.models import Alert, Incident, IncidentSubject, Observation

logger = logging.getLogger(__name__)

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
    load_inventory(di, entity.cluster, t, subject_entities=[entity], obs_by_key={}, bounded=bounded)
    return di, di.find("job", entity.name, entity.namespace)


def load_cluster_input(cluster: Cluster, t: datetime) -> DiagnosisInput:
    """The whole cluster as of t with no subject, as one scheduling pass reads it (the what-if page): every
    waiting job by the keys the scheduling model reads of it (``snapshot.SLIM_JOB_KEYS``), the fleet's rows, each
    node's most GPUs over the lookback (``inventory_input.load_pass_state``)."""
    di = DiagnosisInput(t=t, onset=t, cluster=cluster.name, scheduler=cluster.scheduler)
    load_pass_state(di, cluster, t)
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
        load_inventory(di, cluster, t, subject_entities=subjects, obs_by_key=obs_by_key, bounded=bounded)
        di.batch = batch_reads.shared_values(cluster, t) if bounded else None
    _load_observations(di, observations)
    if cluster is not None:
        _load_samples(di, cluster, t)  # only where the evidence holds no live series
        _load_source_runs(di, cluster, t)
    return di


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
