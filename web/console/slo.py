"""Queue-time SLOs over the cursor window, allocation failure reasons, restarts and preemptions.

Queue time of a job = valid_from of its first version with phase Running - ``state.submitted``
(the job's first_seen when the collector did not record a submission time). A job counts in the
window when it *started* running in [t-w, t]; jobs still waiting at t are counted apart (their
wait is not over yet, so they cannot enter a percentile without biasing it).

A fixed number of queries whatever the cluster size: each table is one query, grouping in Python.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Exists, OuterRef, Q

from collectors.models import Cluster, EntityVersion, KubeEvent
from incidents.diagnosis.codes import HEALTH_CODES, SCHEDULING_CODES
from incidents.models import Hypothesis, IncidentSubject
from rcaweb.cursor import Cursor, t_or_none
from rcaweb.durations import format_minutes
from rcaweb.row_attribute import Via
from web.console.percentile import percentile

logger = logging.getLogger(__name__)

DEFAULT_TARGET = timedelta(minutes=int(getattr(settings, "RCAWEB_SLO_QUEUE_TARGET_MIN", 30)))
HISTOGRAM_EDGES_MIN = (0, 5, 15, 30, 60, 120, 240, 480)
ROW_LIMIT = 5000
_PREEMPTED_POD = re.compile(r"\bPod ([a-z0-9][-a-z0-9.]*)/([a-z0-9][-a-z0-9.]*) was preempted", re.I)


@dataclass
class JobWait:
    cluster: str
    namespace: str
    name: str
    project: str
    queue: str
    submitted: datetime
    started: datetime

    @property
    def wait_s(self) -> float:
        return max(0.0, (self.started - self.submitted).total_seconds())


@dataclass
class WaitStats:
    key: str
    cluster: str
    waits: list[float] = field(default_factory=list)
    over: int = 0

    @property
    def n(self) -> int:
        return len(self.waits)

    def p(self, q: float) -> float | None:
        return percentile(self.waits, q)

    @property
    def p50(self) -> float | None:
        return self.p(50)

    @property
    def p90(self) -> float | None:
        return self.p(90)

    @property
    def p99(self) -> float | None:
        return self.p(99)

    @property
    def p50_m(self) -> str:
        return format_minutes(self.p50)

    @property
    def p90_m(self) -> str:
        return format_minutes(self.p90)

    @property
    def p99_m(self) -> str:
        return format_minutes(self.p99)

    @property
    def share_over(self) -> float:
        return self.over / self.n if self.n else 0.0


@dataclass
class Preemption:
    """A preemption event with the pod it preempted (from KAI's message, else the event's object)."""

    event: KubeEvent
    pod_namespace: str
    pod_name: str  # "" when the event names no pod

    last_time = Via[datetime]("event")
    cluster = Via[Cluster]("event")
    involved_kind = Via[str]("event")
    involved_namespace = Via[str]("event")
    involved_name = Via[str]("event")
    reason = Via[str]("event")
    message = Via[str]("event")


@dataclass
class Slo:
    target: timedelta
    jobs: list[JobWait]
    overall: WaitStats
    by_project: list[WaitStats]
    by_queue: list[WaitStats]
    histogram: list[tuple[str, int, float]]  # (label, count, share)
    still_waiting: list[tuple[EntityVersion, float]]  # pending at t longer than target, with wait seconds
    sched_reasons: dict[str, Counter]  # project -> scheduler reason -> distinct jobs
    sched_reason_jobs: dict[tuple[str, str], list[EntityVersion]]
    diag_codes: dict[str, Counter]  # project -> supported scheduling cause code -> hypotheses
    diag_faults: dict[str, Counter]  # project -> a fault (HEALTH_CODES) a waiting workload's incident blamed
    diag_hypotheses: dict[tuple[str, str], list[Hypothesis]]
    restarts: dict[str, int]
    restart_pods: dict[str, list[tuple[EntityVersion, int]]]
    preemptions: dict[str, int]
    preempted_pods: dict[str, list[Preemption]]


def first_runs(cursor: Cursor, scope: dict[str, Any]) -> list[JobWait]:
    """Jobs whose first Running version starts inside the window (one query, an anti-join on earlier runs)."""
    earlier = EntityVersion.objects.filter(
        entity=OuterRef("entity"), phase="Running", valid_from__lt=OuterRef("valid_from")
    )
    qs = (
        EntityVersion.objects.filter(
            kind="job", phase="Running", valid_from__gte=cursor.start, valid_from__lte=cursor.t, **scope
        )
        .filter(~Exists(earlier))
        .select_related("entity", "entity__cluster")
        .order_by("valid_from")[:ROW_LIMIT]
    )
    out = []
    for v in qs:
        submitted = t_or_none(v.state.get("submitted")) or v.entity.first_seen
        out.append(
            JobWait(
                v.entity.cluster.name,
                v.entity.namespace,
                v.entity.name,
                v.project or "—",
                v.queue or "—",
                submitted,
                v.valid_from,
            )
        )
    return out


def wait_stats(jobs: list[JobWait], target: timedelta) -> tuple[WaitStats, list[WaitStats], list[WaitStats]]:
    overall = WaitStats("all", "")
    projects: dict[tuple[str, str], WaitStats] = {}
    queues: dict[tuple[str, str], WaitStats] = {}
    limit = target.total_seconds()
    for j in jobs:
        for st in (
            overall,
            projects.setdefault((j.cluster, j.project), WaitStats(j.project, j.cluster)),
            queues.setdefault((j.cluster, j.queue), WaitStats(j.queue, j.cluster)),
        ):
            st.waits.append(j.wait_s)
            st.over += j.wait_s > limit
    return overall, [projects[k] for k in sorted(projects)], [queues[k] for k in sorted(queues)]


def histogram(waits: list[float]) -> list[tuple[str, int, float]]:
    edges = HISTOGRAM_EDGES_MIN
    counts = [0] * len(edges)
    for w in waits:
        minutes = w / 60
        i = max(i for i, e in enumerate(edges) if minutes >= e)
        counts[i] += 1
    labels = [f"{a}–{b}m" for a, b in zip(edges, edges[1:], strict=False)] + [f"≥{edges[-1]}m"]
    total = len(waits) or 1
    return [(lab, c, c / total) for lab, c in zip(labels, counts, strict=True)]


def compute(cursor: Cursor, cluster: Cluster | None = None, target: timedelta = DEFAULT_TARGET) -> Slo:
    t, start = cursor.t, cursor.start
    scope: dict[str, Any] = {"cluster": cluster} if cluster is not None else {}
    jobs = first_runs(cursor, scope)
    overall, by_project, by_queue = wait_stats(jobs, target)

    # Jobs still waiting at t beyond the target (one query).
    still: list[tuple[EntityVersion, float]] = []
    for v in (
        EntityVersion.objects.as_of(t)
        .filter(kind="job", phase="Pending", **scope)
        .select_related("entity", "entity__cluster")[:ROW_LIMIT]
    ):
        since = t_or_none(v.state.get("submitted")) or v.entity.first_seen
        if t - since > target:
            still.append((v, (t - since).total_seconds()))
    still.sort(key=lambda p: -p[1])

    # Scheduler reasons of jobs that were pending at some point in the window (one query).
    sched: dict[str, Counter] = defaultdict(Counter)
    sched_jobs: dict[tuple[str, str], list[EntityVersion]] = defaultdict(list)
    seen: set[tuple[int, str]] = set()
    pending = (
        EntityVersion.objects.overlapping(start, t)
        .filter(kind="job", phase="Pending", **scope)
        .select_related("entity", "entity__cluster")
        .order_by("-valid_from")[:ROW_LIMIT]
    )
    for v in pending:
        s = v.state.get("scheduling") or {}
        reason = str(s.get("reason") or "(no reason reported)")
        if (v.entity_id, reason) in seen:
            continue
        seen.add((v.entity_id, reason))
        sched[v.project or "—"][reason] += 1
        sched_jobs[(v.project or "—", reason)].append(v)

    diag, faults, diag_h = _diagnosed(cursor, scope)
    restarts, restart_pods, preemptions, preempted = _restarts_and_preemptions(cursor, scope)
    return Slo(
        target=target,
        jobs=jobs,
        overall=overall,
        by_project=by_project,
        by_queue=by_queue,
        histogram=histogram(overall.waits),
        still_waiting=still,
        sched_reasons=dict(sched),
        sched_reason_jobs=dict(sched_jobs),
        diag_codes=dict(diag),
        diag_faults=dict(faults),
        diag_hypotheses=dict(diag_h),
        restarts=restarts,
        restart_pods=restart_pods,
        preemptions=preemptions,
        preempted_pods=preempted,
    )


def _diagnosed(
    cursor: Cursor, scope: dict[str, Any]
) -> tuple[dict[str, Counter], dict[str, Counter], dict[tuple[str, str], list[Hypothesis]]]:
    """Allocation failures as diagnosed: the supported scheduling causes (``SCHEDULING_CODES``: a job could not
    be placed; an idle or over-requested allocation is no failure to allocate) of incidents open at some point
    in the window, per project (three queries).

    The project is the hypothesis subject's (a project or queue by name, else a workload's project as of t);
    a cause about a node or GPU, or about nothing, takes the project of the incident's own subject workload,
    so a job waiting on a failed node counts for its project, not under "—". A hardware or node fault
    (``HEALTH_CODES``) blamed by the incident of a waiting job or pod is counted apart (``faults``): it kept the
    workload from its GPUs without being a scheduling decision.
    """
    inc_scope = {"incident__cluster": scope["cluster"]} if scope else {}
    hyps = list(
        Hypothesis.objects.causes()
        .filter(
            Q(incident__resolved_at__isnull=True) | Q(incident__resolved_at__gte=cursor.start),
            status="supported",
            code__in=SCHEDULING_CODES + HEALTH_CODES,
            incident__onset__lte=cursor.t,
            **inc_scope,
        )
        .select_related("incident", "subject", "subject__cluster")
        .order_by("incident_id", "rank")[:ROW_LIMIT]
    )
    own: dict[int, list[tuple[int, str, str]]] = defaultdict(
        list
    )  # incident -> its subjects (id, kind, name)
    if hyps:
        for inc_id, ent_id, kind, name in IncidentSubject.objects.filter(
            incident_id__in={h.incident_id for h in hyps}, role="subject"
        ).values_list("incident_id", "entity_id", "entity__kind", "entity__name"):
            own[inc_id].append((ent_id, kind, name))
    entity_ids = {h.subject_id for h in hyps if h.subject_id} | {
        e for rows in own.values() for e, _, _ in rows
    }
    project_of: dict[int, str] = {}
    if entity_ids:
        for row in (
            EntityVersion.objects.filter(entity_id__in=entity_ids)
            .filter(valid_from__lte=cursor.t)
            .order_by("valid_from")
            .values("entity_id", "project")
        ):
            if row["project"]:
                project_of[row["entity_id"]] = row["project"]

    def project_of_entity(ent_id: int, kind: str, name: str) -> str:
        return name if kind in ("project", "queue") else project_of.get(ent_id, "")

    counts: dict[str, Counter] = defaultdict(Counter)
    faults: dict[str, Counter] = defaultdict(Counter)
    listed: dict[tuple[str, str], list[Hypothesis]] = defaultdict(list)
    for h in hyps:
        waiting = any(k in ("job", "pod") for _, k, _ in own.get(h.incident_id, []))
        if h.code not in SCHEDULING_CODES and not waiting:
            continue  # a fault of a node or GPU incident: no workload's allocation failed on it
        subj = h.subject
        project = project_of_entity(subj.pk, subj.kind, subj.name) if subj is not None else ""
        if not project:
            project = next(
                (
                    p
                    for e, k, n in sorted(own.get(h.incident_id, []), key=_workload_first)
                    if (p := project_of_entity(e, k, n))
                ),
                "—",
            )
        (counts if h.code in SCHEDULING_CODES else faults)[project][h.code] += 1
        listed[(project, h.code)].append(h)
    return counts, faults, listed


def _workload_first(subject: tuple[int, str, str]) -> int:
    return {"job": 0, "pod": 1, "project": 2, "queue": 3}.get(subject[1], 9)


def _restarts_and_preemptions(
    cursor: Cursor, scope: dict[str, Any]
) -> tuple[
    dict[str, int], dict[str, list[tuple[EntityVersion, int]]], dict[str, int], dict[str, list[Preemption]]
]:
    """Container restarts in the window (restart_count growth per pod) and Preempted events, per project."""
    start, t = cursor.start, cursor.t
    by_pod: dict[int, list[EntityVersion]] = defaultdict(list)
    for v in (
        EntityVersion.objects.filter(kind="pod", valid_from__lte=t)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=start))
        .filter(**scope)
        .select_related("entity", "entity__cluster")
        .order_by("valid_from")[:ROW_LIMIT]
    ):
        by_pod[v.entity_id].append(v)
    restarts: dict[str, int] = defaultdict(int)
    restart_pods: dict[str, list[tuple[EntityVersion, int]]] = defaultdict(list)
    project_of_pod: dict[tuple[int, str, str], str] = {}
    project_of_ns: dict[tuple[int, str], str] = {}
    for versions in by_pod.values():
        counts = [
            sum(int(c.get("restart_count") or 0) for c in v.state.get("containers") or []) for v in versions
        ]
        baseline = counts[0] if versions[0].valid_from < start else 0
        grew = max(counts) - baseline
        last = versions[-1]
        project = last.project or "—"
        project_of_pod[(last.cluster_id, last.entity.namespace, last.entity.name)] = project
        if last.project:
            project_of_ns[(last.cluster_id, last.entity.namespace)] = last.project
        if grew > 0:
            restarts[project] += grew
            restart_pods[project].append((last, grew))
    preemptions: dict[str, int] = defaultdict(int)
    preempted: dict[str, list[Preemption]] = defaultdict(list)
    ev_scope = {"cluster": scope["cluster"]} if scope else {}
    # kube-scheduler: "Preempted" on the victim pod; KAI: "Evict" on the victim's PodGroup ("Pod ns/x was preempted by …").
    events = (
        KubeEvent.objects.filter(last_time__gte=start, first_time__lte=t, **ev_scope)
        .filter(Q(reason__in=["Preempted", "Evict"]) | Q(message__icontains="was preempted"))
        .select_related("cluster")
        .order_by("last_time")[:ROW_LIMIT]
    )
    for ev in events:
        m = _PREEMPTED_POD.search(ev.message or "")
        if m:
            row = Preemption(ev, m.group(1), m.group(2))
        elif ev.involved_kind == "Pod":
            row = Preemption(ev, ev.involved_namespace, ev.involved_name)
        else:
            row = Preemption(ev, ev.involved_namespace, "")
        project = project_of_pod.get(
            (ev.cluster_id, row.pod_namespace, row.pod_name),
            project_of_ns.get((ev.cluster_id, ev.involved_namespace), ev.involved_namespace or "—"),
        )
        preemptions[project] += 1
        preempted[project].append(row)
    return dict(restarts), dict(restart_pods), dict(preemptions), dict(preempted)
