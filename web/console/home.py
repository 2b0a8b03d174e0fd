"""What the home page shows at t: a fixed number of queries whatever the cluster size.

Each panel is one query over all clusters (no per-row lookups), so the page costs the same
for 4 nodes as for 600; a test holds that.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import F, OuterRef, Q, Subquery
from django.urls import reverse

from collectors.models import Cluster, Entity, EntityVersion, SourceRun
from collectors.sources.redact import redact_text
from incidents import causes, problems
from incidents.lifecycle import auto_resolve_after
from incidents.models import Alert, DiagnosisRun, Hypothesis, Incident
from incidents.open_problems import group_open
from incidents.titles import TitleLines
from rcaweb.cursor import Cursor, t_or_none
from rcaweb.durations import format_age
from rcaweb.row_attribute import Via
from web.console.condition_line import one_line

logger = logging.getLogger(__name__)

PENDING_THRESHOLD = timedelta(minutes=int(getattr(settings, "RCAWEB_PENDING_THRESHOLD_MIN", 15)))
PANEL_LIMIT = 50
CHILDREN_SHOWN = 8  # a problem's other incidents listed under it; the rest are counted


@dataclass
class PendingJob:
    version: EntityVersion
    waiting: timedelta
    since: datetime
    reason: str

    @property
    def waiting_label(self) -> str:
        return format_age(self.waiting.total_seconds())


@dataclass
class SourceErrors:
    cluster: str
    source: str
    count: int
    last_time: datetime
    last_call: str
    last_error: str


@dataclass
class ProblemRow(TitleLines):
    """A row of the open incidents panel: a problem's most urgent incident and what the page worked out for it.

    The template reads the incident's own fields through the row under the same names (``inc.title``).
    """

    incident: Incident
    impact_gpus: int  # this incident's GPUs lost or blocked
    inference: bool  # an inference workload is hit
    members: int  # incidents of the problem open at t
    problem_gpus: int  # their GPUs, summed
    children: list[Incident]  # the others, at most CHILDREN_SHOWN, most urgent first
    more: int  # the others not listed
    open_total: int  # every incident open at t
    problems_total: int  # every problem open at t
    top_hypothesis: Hypothesis | None
    age: str  # onset → t
    all_clear: bool
    problem: tuple[str, str] | None  # (code, "kind name") of the shared cause, when it has several incidents
    problem_url: str
    resolved_later: datetime | None  # open at t, resolved since: its status now says "resolved", not at t

    pk = Via[int]("incident")
    title = Via[str]("incident")
    status = Via[str]("incident")
    severity = Via[str]("incident")
    cluster = Via[Cluster | None]("incident")
    onset = Via[datetime]("incident")
    owner = Via[str]("incident")
    all_clear_at = Via[datetime | None]("incident")
    diagnosed_at = Via[datetime | None]("incident")
    cause_key = Via[str]("incident")

    def get_absolute_url(self) -> str:
        return self.incident.get_absolute_url()



@dataclass
class BadGpuRow:
    """A faulty or missing GPU at t, with ``label`` ("h100-03 GPU 4": operators think in node and index)."""

    version: EntityVersion
    label: str

    entity = Via[Entity]("version")
    state = Via[dict[str, Any]]("version")
    phase = Via[str]("version")


def open_incidents(t: datetime) -> list[ProblemRow]:
    """The first PANEL_LIMIT problems open at t in the order to work them (incidents.ordering: severity,
    impact, age): each row (ProblemRow) is the most urgent incident of a problem (incidents.problems: incidents whose
    current top cause is one shared fault), with ``members`` (incidents of the problem open at t),
    ``problem_gpus`` (their GPUs lost or blocked, summed), ``children`` (the others, at most
    CHILDREN_SHOWN, most urgent first) and its top hypothesis. ``open_total`` on each counts every incident
    open at t and ``problems_total`` every problem.

    Three queries whatever the number of incidents: the urgency order of every open incident as narrow
    rows, grouped (incidents.open_problems), the rows shown, their hypotheses.
    """
    grouped = group_open(t)
    shown = grouped.problems[:PANEL_LIMIT]
    wanted = [pk for p in shown for pk, _ in p.members[: CHILDREN_SHOWN + 1]]
    # The diagnosis in force at t of each row (the latest describing a moment at or before t, else the onset's):
    # a page at a past cursor shows what was known then, never a later answer.
    rows: dict[int, Any] = {
        inc.pk: inc
        for inc in Incident.objects.filter(pk__in=wanted)
        .select_related("cluster")
        .annotate(run_at_t=causes.run_in_force(t))
    }
    in_force = {inc.run_at_t: inc for inc in rows.values() if inc.run_at_t is not None}
    ranked_of: dict[int, list[Hypothesis]] = {}
    run_titles: dict[int, str] = dict(
        DiagnosisRun.objects.filter(pk__in=in_force).exclude(title="").values_list("pk", "title")
    )
    unrun = [pk for pk, inc in rows.items() if inc.run_at_t is None]  # hypotheses saved without a run
    for h in Hypothesis.objects.filter(
        Q(run_id__in=in_force) | Q(incident_id__in=unrun, run__isnull=True, superseded=False),
        scope="cause",
        status="supported",
    ).order_by("rank", "id"):
        owner = in_force[h.run_id].pk if h.run_id in in_force else h.incident_id
        ranked_of.setdefault(owner, []).append(h)
    for inc in rows.values():
        if inc.run_at_t in run_titles:
            inc.title = run_titles[inc.run_at_t]  # shown, never saved: the title as the run in force tells it
    impact_of = {pk: impact for p in shown for pk, impact in p.members}
    out: list[ProblemRow] = []
    for p in shown:
        members = p.members
        inc = rows.get(members[0][0])
        if inc is None:  # resolved or deleted between the two reads
            continue
        children: list[Incident] = [rows[pk] for pk, _ in members[1 : CHILDREN_SHOWN + 1] if pk in rows]
        ranked = ranked_of.get(inc.pk, [])
        shared = p.shared
        key = p.key  # the cause key in force at t that groups this problem
        query = urlencode({"status": "active", "cause": key})
        out.append(
            ProblemRow(
                incident=inc,
                impact_gpus=impact_of.get(inc.pk, 0),
                inference=inc.pk in grouped.inference,
                members=len(members),
                problem_gpus=p.gpus,
                children=children,
                more=len(members) - 1 - len(children),
                open_total=grouped.open_total,
                problems_total=len(grouped.problems),
                # The top is the best supported cause; none means "no cause found" (a refuted one is never the top).
                top_hypothesis=ranked[0] if ranked else None,
                age=format_age(inc.duration_at(t).total_seconds()),  # onset → t: open at t
                # held, its alerts resolved and subject healthy for the quiet period by t: for its holder to close
                all_clear=inc.all_clear_at is not None and inc.all_clear_at + auto_resolve_after() <= t,
                problem=problems.describe(key) if shared else None,
                problem_url=reverse("incidents:incidents") + "?" + query if shared else "",
                resolved_later=inc.resolved_at
                if inc.resolved_at is not None and inc.resolved_at > t
                else None,
            )
        )
    return out


def loose_alerts(t: datetime) -> list[Alert]:
    """Alerts firing at t that no incident has taken yet (intake has not grouped them, or it failed)."""
    firing_at_t = Q(starts_at__lte=t) & ~(Q(status="resolved") & Q(ends_at__lte=t))
    return list(Alert.objects.filter(firing_at_t, incident__isnull=True).order_by("-starts_at")[:PANEL_LIMIT])


def pending_jobs(t: datetime, threshold: timedelta = PENDING_THRESHOLD) -> list[PendingJob]:
    """GPU jobs pending at t for longer than ``threshold``, longest wait first, with their one-line reason.

    A wait counts from the start of the job's current pending spell, not from its submission: a job that ran
    and was preempted (or whose pods were recreated) waits again from when it stopped running. The spell starts
    where the job's latest version in another phase before t ended (a correlated subquery: no query per job),
    else at its submission.
    """
    not_pending = (
        EntityVersion.objects.filter(entity_id=OuterRef("entity_id"), valid_from__lt=OuterRef("valid_from"))
        .exclude(phase="Pending")
        .order_by("-valid_from")
        .values("valid_to")[:1]
    )
    qs = (
        EntityVersion.objects.as_of(t)
        .filter(kind="job", phase="Pending", gpus__gt=0)
        .annotate(spell_from=Subquery(not_pending))
        .select_related("entity", "entity__cluster")
        .order_by("valid_from")[:2000]
    )
    out: list[PendingJob] = []
    for v in qs:
        submitted = t_or_none(v.state.get("submitted")) or v.entity.first_seen
        spell_from: datetime | None = getattr(v, "spell_from", None)  # the annotation above
        since = max(submitted, spell_from) if spell_from is not None else submitted
        waiting = t - since
        if waiting < threshold:
            continue
        sched: dict[str, Any] = v.state.get("scheduling") or {}
        out.append(PendingJob(v, waiting, since, one_line(sched.get("reason", ""), sched.get("message", ""))))
    out.sort(key=lambda p: p.waiting, reverse=True)
    return out[:PANEL_LIMIT]


def unhealthy_nodes(t: datetime) -> list[EntityVersion]:
    """Nodes not Ready at t, or whose allocatable GPUs fell below capacity (device plugin, lost GPU)."""
    return list(
        EntityVersion.objects.as_of(t)
        .filter(kind="node")
        .filter(Q(ready=False) | Q(phase__in=["NotReady", "Unknown"]) | Q(gpus_allocatable__lt=F("gpus")))
        .select_related("entity", "entity__cluster")
        .order_by("cluster_id", "entity__name")[:PANEL_LIMIT]
    )


def unhealthy_gpus(t: datetime) -> list[BadGpuRow]:
    """Faulty or missing GPUs at t, each with ``label`` ("h100-03 GPU 4": operators think in node and index)."""
    versions = (
        EntityVersion.objects.as_of(t)
        .filter(kind="gpu", phase__in=["faulty", "missing"])
        .select_related("entity", "entity__cluster")
        .order_by("cluster_id", "node", "entity__name")[:PANEL_LIMIT]
    )
    return [BadGpuRow(g, f"{g.node or '?'} GPU {g.state.get('index', '?')}") for g in versions]


def source_errors(cursor: Cursor) -> list[SourceErrors]:
    """Sources whose calls failed inside the window, newest error first, grouped by (cluster, source)."""
    rows = (
        SourceRun.objects.filter(ok=False, time__gte=cursor.start, time__lte=cursor.t)
        .select_related("cluster")
        .order_by("-time")[:500]
    )
    groups: dict[tuple[str, str], SourceErrors] = {}
    for r in rows:
        key = (r.cluster.name, r.source)
        if key in groups:
            groups[key].count += 1
        else:
            # Redacted again on the way out: a row stored before a pattern existed must not show a password.
            error = redact_text(r.error[:2000])[:300]
            groups[key] = SourceErrors(r.cluster.name, r.source, 1, r.time, redact_text(r.call), error)
    return list(groups.values())


def home_context(cursor: Cursor) -> dict[str, Any]:
    t = cursor.t
    bad_nodes, bad_gpus = unhealthy_nodes(t), unhealthy_gpus(t)
    incidents = open_incidents(t)
    return {
        "incidents": incidents,
        # the panel shows at most PANEL_LIMIT rows; the count is of every incident open at t
        "incidents_open": incidents[0].open_total if incidents else 0,
        "problems_open": incidents[0].problems_total if incidents else 0,
        "alerts": loose_alerts(t),
        "pending": pending_jobs(t),
        "pending_threshold": PENDING_THRESHOLD,
        "bad_nodes": bad_nodes,
        "bad_gpus": bad_gpus,
        "unhealthy_count": len(bad_nodes) + len(bad_gpus),
        "source_errors": source_errors(cursor),
    }
