"""Incident pages: the list, the incident (timeline, evidence, hypotheses, actions inside), its history, alerts.

The incident page renders as of the cursor; without ``t`` it renders as of the
onset and every link carries ``t=onset`` (the default cursor is the incident start).
Query counts are bounded: the timeline and the evidence list are capped/paginated.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db.models import Prefetch, Q
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from collectors.inventory import neighbour_change_times
from collectors.models import Cluster, EntityVersion
from collectors.podstatus import pod_status
from incidents import audit, causes, lifecycle, problems, services
from incidents.diagnosis import codes
from incidents.diagnosis_run import pick_run
from incidents.forms import IncidentFilterForm, OwnerForm, StatusForm
from incidents.listing import RESOLVED_COUNTED, UnresolvedThenResolved, alert_count
from incidents.models import (
    Alert,
    AuditEntry,
    Citation,
    DiagnosisRun,
    Hypothesis,
    Incident,
    IncidentSubject,
    Observation,
)
from incidents.titles import TitleLines
from rcaweb import kinds
from rcaweb.cursor import Cursor
from rcaweb.http import RcaRequest
from rcaweb.roles import can_respond
from rcaweb.via import Via

logger = logging.getLogger(__name__)

TIMELINE_KINDS = (
    "event",
    "change",
    "telemetry_anomaly",
    "job_state",
    "pod_state",
    "node_state",
    "gpu_state",
    "queue_state",
    "project_state",
)
TIMELINE_MAX = 300
TIMELINE_SHOWN = 30  # rows in the first view; the rest are folded under "N more rows"
EVIDENCE_PAGE = 50
RELATED_MAX = 500  # related entities read (one query); the page lists problems and counts the rest
HEALTHY = {k.name: k.healthy_phases for k in kinds.KINDS if k.healthy_phases}  # rcaweb/kinds.py
# Causes a container's own log, YAML and events explain: the answer links the pod's page (its troubleshooter) first.
TROUBLESHOOT_CODES = frozenset(
    {codes.CRASHLOOP_CONFIG_ERROR, codes.OOM_KILLED, codes.GPU_OOM, codes.IMAGE_PULL_ERROR}
)
RUNS_SHOWN = 50
FRAGMENTS = {
    "collection-progress": "progress",
    "evidence": "evidence",
    "status-panel": "status",
    "timeline": "timeline",
}


@dataclass
class Row:
    """One timeline row: an alert or an observation, on the incident's time axis."""

    time: datetime
    kind: str
    source: str
    text: str
    entity: object = None
    url: str = ""
    error: str = ""
    gist: str = ""  # what several simultaneous rows have in common, when they are folded into one
    repeats: int = 1  # the same row seen again later (an event every 5 min): folded into its first
    last: datetime | None = None  # the time of its last repeat


@dataclass
class IncidentListRow(TitleLines):
    """An incident in the list: its duration and whether it is ongoing now, with the fields the list shows
    (``impact_gpus``, ``inference``: incidents.ordering's annotations; ``n_alerts``: the list's)."""

    incident: Incident
    duration: timedelta  # onset → resolution, or → now
    ongoing: bool

    pk = Via[int]("incident")
    title = Via[str]("incident")
    onset = Via[datetime]("incident")
    unresolved_subject = Via[str]("incident")
    severity = Via[str]("incident")
    impact_gpus = Via[int]("incident")
    inference = Via[bool]("incident")
    status = Via[str]("incident")
    auto_resolved = Via[bool]("incident")
    all_clear_at = Via[datetime | None]("incident")
    cluster = Via[Cluster | None]("incident")
    n_alerts = Via[int]("incident")
    owner = Via[str]("incident")
    diagnosed_at = Via[datetime | None]("incident")
    top: DiagnosisRun | None = None  # the diagnosis in force at the cursor (its top_code, top_statement)

    @property
    def top_name(self) -> str:
        """The top hypothesis in force at the cursor, in words ("GPU missing"); "" when none was supported."""
        return causes.name(self.top.top_code) if self.top is not None and self.top.top_code else ""

    def get_absolute_url(self) -> str:
        return self.incident.get_absolute_url()



@require_GET
def incident_list(request: RcaRequest) -> HttpResponse:
    form = IncidentFilterForm(request.GET)
    ctx: dict[str, Any] = {"form": form, "page": None, "cause_names": sorted(causes.NAMES.items())}
    if not form.is_valid():
        return render(request, "incidents/incident_list.html", ctx, status=400)
    qs = form.filter(
        Incident.objects.select_related("cluster").annotate(n_alerts=alert_count()), request.cursor.t
    )
    now = timezone.now()
    # Unresolved first, in the order to work them in (incidents.ordering: severity, impact, age), then the
    # resolved ones newest first: each query bounded by the open incidents or the page, not by history.
    ordered = UnresolvedThenResolved(qs, request.cursor.t)
    page = Paginator(ordered, 50).get_page(form.cleaned_data.get("page") or 1)
    rows = [IncidentListRow(inc, inc.duration_at(now), inc.ended_at(now) is None) for inc in page]
    # The run in force at t of each row (IncidentFilterForm.filter's run_at_t; one query for the page): a past
    # cursor shows what was known then.
    in_force = {row.pk: getattr(row.incident, "run_at_t", None) for row in rows}
    runs = DiagnosisRun.objects.only("at", "top_code", "top_statement", "title").in_bulk(
        [pk for pk in in_force.values() if pk]
    )
    for row in rows:
        row.top = runs.get(in_force[row.pk] or 0)
        if row.top is not None and row.top.title:
            row.incident.title = row.top.title  # shown, never saved: the title as the run in force tells it
    ctx.update(page=page, rows=rows, resolved_counted=RESOLVED_COUNTED)
    return render(request, "incidents/incident_list.html", ctx)


def _get_incident(pk: int) -> Incident:
    return get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def incident_detail(request: RcaRequest, pk: int) -> HttpResponse:
    incident = _get_incident(pk)
    cursor = request.cursor if not request.cursor.live else request.cursor.moved_to(incident.onset)
    if request.method == "POST":
        return _act(request, incident, cursor)
    fragment = FRAGMENTS.get(request.htmx.target or "") if request.htmx else None
    if fragment == "progress" and incident.collection_state in ("done", "failed"):
        resp = render(
            request, "incidents/incident_detail.html#progress", {"incident": incident, "cursor": cursor}
        )
        return HttpResponseStopPolling(resp.content)
    ctx = _detail_context(request, incident, cursor, fragment)
    template = "incidents/incident_detail.html" + (f"#{fragment}" if fragment else "")
    return render(request, template, ctx)


def _act(request: RcaRequest, incident: Incident, cursor: Cursor) -> HttpResponse:
    """The POST branch: one button per transition, acknowledge, owner. PRG; htmx gets the status panel back."""
    if not can_respond(request.user):
        return HttpResponseForbidden("Your role is viewer: changing incidents needs the responder role.\n")
    rid = getattr(request, "request_id", "")
    try:
        if "ack" in request.POST:
            services.acknowledge(incident, request.user, rid)
        elif "status" in request.POST:
            form = StatusForm(request.POST)
            if not form.is_valid():
                return HttpResponseBadRequest(f"status: {form.errors['status'][0]}\n")
            services.set_status(incident, form.cleaned_data["status"], request.user, rid)
        elif "owner" in request.POST:
            owner_form = OwnerForm(request.POST)
            if not owner_form.is_valid():
                return HttpResponseBadRequest(f"owner: {owner_form.errors['owner'][0]}\n")
            services.assign_owner(incident, owner_form.cleaned_data["owner"], request.user, rid)
        else:
            return HttpResponseBadRequest("Nothing to do: send status=<new status>, ack, or owner.\n")
    except services.TransitionError as exc:
        return HttpResponseBadRequest(f"{exc}\n")
    if request.htmx:
        return render(
            request, "incidents/incident_detail.html#status", _status_context(request, incident, cursor)
        )
    return redirect(cursor.link(incident.get_absolute_url()))


def now_at(incident: Incident) -> datetime:
    """Where the cursor bar's "now" goes on an incident's pages: the incident's end once resolved, else the present.

    These pages default to the onset when the URL has no ``t``, so a "now" without ``t`` would land there.
    """
    end = incident.window_end or incident.resolved_at
    return end if end is not None else timezone.now().replace(microsecond=0)


ORDER_OF_STATUS = {s: i for i, (s, _) in enumerate(Incident.STATUSES)}


def status_buttons(status: str) -> list[tuple[str, str]]:
    """(new status, label) of each button the status panel offers: exactly the moves
    ``services.allowed_transitions`` allows from ``status``, named for what they do from there. "Reopen" is for
    a resolved incident only; a held one goes "back to open"; an open one is acknowledged by its own button."""
    out = []
    for new in services.allowed_transitions(status):
        if new == "acknowledged" and status == "open":
            continue  # the Acknowledge button: it also takes the incident (owner)
        if new == "open":
            label = "Reopen" if status == "resolved" else "Back to open"
        elif ORDER_OF_STATUS.get(new, 0) < ORDER_OF_STATUS.get(status, 0):
            label = f"Back to {new}"
        else:
            label = f"Mark {new}"
        out.append((new, label))
    return out


def _status_context(request: RcaRequest, incident: Incident, cursor: Cursor) -> dict[str, Any]:
    # Duration is onset → resolution, or → the present: never → the cursor (which defaults to the onset).
    now = timezone.now()
    return {
        "incident": incident,
        "cursor": cursor,
        "cursor_anchor": ("incident start", incident.onset),
        "cursor_now_at": now_at(incident),
        "status_buttons": status_buttons(incident.status),
        "responder": can_respond(request.user),
        # A resolved incident lasted onset → resolution, whatever the clock says (a scenario's simulated
        # time may run ahead of this server's).
        "duration": incident.duration_at(max(now, incident.resolved_at or now)),
        "ongoing": incident.ended_at(max(now, incident.resolved_at or now)) is None,
        "lifecycle": lifecycle.explain(incident, now),
    }


def _detail_context(
    request: RcaRequest, incident: Incident, cursor: Cursor, fragment: str | None
) -> dict[str, Any]:
    ctx = _status_context(request, incident, cursor)
    # Every run of the incident in one query (bounded); the page shows the one for the cursor.
    runs = list(incident.diagnoses.order_by("at", "id")[:RUNS_SHOWN])
    run = ctx["diagnosis"] = pick_run(runs, cursor.t)
    if fragment in (None, "evidence"):
        page = ctx["evidence"] = _evidence_page(request, incident)
        # Observations the hypotheses cite are pinned above the pages, so every "#obs-N" anchor resolves.
        cited = (
            Q(hypotheses__run=run)
            if run is not None and run is not runs[-1]
            else Q(hypotheses__incident=incident, hypotheses__superseded=False)
        )
        # ... and what could not be collected (a source that failed lowers confidence; a gap says why data
        # is missing): both belong in the first view
        ctx["cited"] = list(
            Observation.objects.filter(
                cited | (Q(incident=incident) & (~Q(error="") | Q(summary__startswith="no data:")))
            )
            .defer("content")
            .distinct()
            .select_related("entity", "entity__cluster")
            .order_by("observed_at", "id")[:200]
        )
        ctx["cited_ids"] = {o.pk for o in ctx["cited"]}
        keep = {k: request.GET[k] for k in ("kind", "errors") if request.GET.get(k)}
        base = incident.get_absolute_url() + "?" + (urlencode(keep) + "&" if keep else "")
        if page.has_previous():
            ctx["evidence_prev_url"] = cursor.link(f"{base}page={page.previous_page_number()}")
        if page.has_next():
            ctx["evidence_next_url"] = cursor.link(f"{base}page={page.next_page_number()}")
    if fragment in (None, "timeline"):
        rows, ctx["timeline_truncated"] = _timeline(incident)
        ctx["timeline"], ctx["timeline_more"] = rows[:TIMELINE_SHOWN], rows[TIMELINE_SHOWN:]
    # The whole evidence list is one click away (htmx swaps it in); the first view carries what is cited.
    ctx["evidence_folded"] = fragment is None and not any(
        request.GET.get(k) for k in ("evidence", "page", "kind", "errors")
    )
    if fragment is None:
        ctx["evidence_all_url"] = cursor.link(incident.get_absolute_url() + "?evidence=all") + "#evidence"
    if fragment is not None:
        return ctx
    links = list(
        IncidentSubject.objects.filter(incident=incident)
        .select_related("entity", "entity__cluster")
        .order_by("role", "entity__kind", "entity__name")
    )
    subjects = [s for s in links if s.role == "subject"]
    related = [s for s in links if s.role != "subject"]
    shown = subjects + related[:RELATED_MAX]
    versions = {
        v.entity_id: v
        for v in EntityVersion.objects.as_of(cursor.t)
        .filter(entity_id__in=[s.entity_id for s in shown])
        .only("entity_id", "phase", "deleted", "valid_from", "gpus", "kind")
    }
    # A pod reads as the pod page and kubectl show it (CrashLoopBackOff, not its phase Running): its
    # containers' state, read for the pods shown only.
    pods = [s.entity_id for s in shown if s.entity.kind == "pod" and s.entity_id in versions]
    if pods:
        for entity_id, state in (
            EntityVersion.objects.as_of(cursor.t).filter(entity_id__in=pods).values_list("entity_id", "state")
        ):
            version = versions[entity_id]
            version.status = pod_status(state or {}, version.phase)
    ids = [s.entity_id for s in subjects] or [s.entity_id for s in shown]
    # The diagnosis the page shows is the one for the cursor (the latest made at or before t); older and
    # newer runs are listed with the moment each describes.
    current = run is None or run is runs[-1]
    mine = incident.hypotheses.current() if current else Hypothesis.objects.filter(run=run)
    hypotheses = list(
        mine.select_related("subject", "subject__cluster").prefetch_related(
            Prefetch("citation_set", queryset=Citation.objects.select_related("observation")), "actions"
        )
    )
    runs = list(incident.diagnoses.order_by("at", "id")[:RUNS_SHOWN])
    top = next((h for h in hypotheses if h.scope != "elsewhere" and h.status == "supported"), None)
    prev_change, next_change = neighbour_change_times(ids, cursor.t) if ids else (None, None)
    ctx.update(
        subjects=[(s, versions.get(s.entity_id)) for s in subjects],
        related_groups=related_groups([(s, versions.get(s.entity_id)) for s in related[:RELATED_MAX]]),
        related_more=max(0, len(related) - RELATED_MAX),
        alerts=_with_telling_labels(list(incident.alerts.order_by("starts_at", "id"))),
        **_related_incidents(list(incident.related.order_by("-onset")[:RELATED_INCIDENTS_READ])),
        hypotheses=[h for h in hypotheses if h.scope != "elsewhere"],
        elsewhere=[h for h in hypotheses if h.scope == "elsewhere"],
        top=top,
        troubleshoot_pod=troubleshoot_pod(top, subjects),
        waiting_job=waiting_job(top, subjects),
        runs=runs,
        onset_run=runs[0] if runs else None,
        cursor_prev_change=prev_change,
        cursor_next_change=next_change,
    )
    return ctx


def troubleshoot_pod(top: Hypothesis | None, subjects: list[IncidentSubject]) -> Any:
    """The pod whose page answers a crash-loop, OOM or image-pull cause (its logs, YAML, events): the cause's own
    subject when it is a pod, else the incident's first pod subject; None for other causes."""
    if top is None or top.code not in TROUBLESHOOT_CODES:
        return None
    if top.subject is not None and top.subject.kind == "pod":
        return top.subject
    return next((s.entity for s in subjects if s.entity.kind == "pod"), None)


def waiting_job(top: Hypothesis | None, subjects: list[IncidentSubject]) -> Any:
    """The job whose place in line the answer links to (its why-pending panel: position, the jobs ahead, the
    what-if page): the incident's first job subject when the answer is about scheduling, a fault that takes
    GPUs away, or no cause found."""
    if top is not None and top.code not in (*codes.SCHEDULING_CODES, *codes.HEALTH_CODES):
        return None
    if top is not None and top.subject is not None and top.subject.kind == "job":
        return top.subject
    return next((s.entity for s in subjects if s.entity.kind == "job" and s.role == "subject"), None)


@dataclass
class RelatedGroup:
    """Related entities of one kind: the ones in trouble at t listed first, the healthy ones only counted."""

    kind: str
    problems: list
    healthy: list

    @property
    def total(self) -> int:
        return len(self.problems) + len(self.healthy)


def related_groups(rows: list) -> list[RelatedGroup]:
    """(link, version) rows grouped by kind; a row is a problem when its phase at t is not a healthy one
    (absent at t counts as a problem: a GPU that vanished, a pod that died)."""
    groups: dict[str, RelatedGroup] = {}
    for link, version in rows:
        kind = link.entity.kind
        g = groups.setdefault(kind, RelatedGroup(kind, [], []))
        ok = HEALTHY.get(kind)
        shown = getattr(version, "status", None) or (version.phase if version is not None else "")
        healthy = version is not None and (ok is None or (shown or "") in ok)
        (g.healthy if healthy else g.problems).append((link, version))
    order = {"node": 0, "gpu": 1, "job": 2, "pod": 3, "queue": 4, "project": 5}
    return sorted(groups.values(), key=lambda g: (not g.problems, order.get(g.kind, 9)))


def _evidence_page(request: RcaRequest, incident: Incident) -> Page[Observation]:
    qs = (
        Observation.objects.filter(incident=incident)
        .defer("content")
        .select_related("entity", "entity__cluster")
        .order_by("observed_at", "id")
    )
    kind = request.GET.get("kind", "")
    if kind:
        qs = qs.filter(kind=kind[:48])
    if request.GET.get("errors") == "1":
        qs = qs.exclude(error="")
    return Paginator(qs, EVIDENCE_PAGE).get_page(request.GET.get("page"))


PLAIN_LABELS = ("alertname", "severity", "cluster")
RELATED_INCIDENTS_READ = 200  # read to fold; at most RELATED_INCIDENTS_SHOWN rows are shown
RELATED_INCIDENTS_SHOWN = 20


@dataclass
class RelatedIncidentRow:
    """A related incident on the incident page, standing for every related incident with its title: the
    newest, ``same`` (how many) and ``first_onset`` (the oldest's onset)."""

    incident: Incident
    same: int
    first_onset: datetime

    # what incident_detail.html reads of the incident itself
    pk = Via[int]("incident")
    title = Via[str]("incident")
    status = Via[str]("incident")
    onset = Via[datetime]("incident")

    def get_absolute_url(self) -> str:
        return self.incident.get_absolute_url()


# Shared causes about policy, not hardware: a related incident whose current top cause is one of these waits
# for its own quota or queue, not for this incident's node or GPU.
POLICY_CAUSE_KINDS = ("project", "queue")


@dataclass
class HeldElsewhere:
    """Related incidents whose own current cause is a quota or a queue (one problem, ``key``)."""

    key: str
    code: str
    what: str
    count: int

    def get_absolute_url(self) -> str:
        return "/incidents/?" + urlencode({"cause": self.key})


def _related_incidents(incidents: list[Incident]) -> dict[str, Any]:
    """The related incidents that may hang on this one, folded by title, and apart, counted by problem, those
    that their own diagnosis says wait for their quota or queue. A pending job relates every node it might
    run on, so a failed node on a busy cluster relates dozens of jobs that its recovery would not start."""
    mine: list[Incident] = []
    held: dict[str, HeldElsewhere] = {}
    for inc in incidents:  # newest first
        code, what = problems.describe(inc.cause_key) if inc.cause_key else ("", "")
        if what.split(" ", 1)[0] in POLICY_CAUSE_KINDS:
            group = held.setdefault(inc.cause_key, HeldElsewhere(inc.cause_key, code, what, 0))
            group.count += 1
        else:
            mine.append(inc)
    return {
        "related_incidents": _fold_same_titles(mine),
        "related_held": sorted(held.values(), key=lambda g: (-g.count, g.key)),
    }


def _fold_same_titles(incidents: list[Incident]) -> list[RelatedIncidentRow]:
    """Related incidents with the same title (25 "GPUJobPendingTooLong" on one node) are one row: the newest,
    with ``same`` (how many) and ``first_onset`` (the oldest's onset)."""
    rows: dict[str, RelatedIncidentRow] = {}
    for inc in incidents:  # newest first
        row = rows.get(inc.title)
        if row is None:
            rows[inc.title] = RelatedIncidentRow(inc, 1, inc.onset)
        else:
            row.same += 1
            row.first_onset = inc.onset
    return list(rows.values())[:RELATED_INCIDENTS_SHOWN]


def _with_telling_labels(alerts: list) -> list:
    """Each alert's ``telling`` labels: those that tell it from the incident's other alerts (the GPU, the
    pod), not the alertname, severity and cluster every row repeats; the full set stays one click away."""
    shared: set[tuple[str, str]] | None = None
    for a in alerts:
        items = {(k, str(v)) for k, v in (a.labels or {}).items()}
        shared = items if shared is None else shared & items
    for a in alerts:
        labels = a.labels or {}
        keep = [
            (k, v)
            for k, v in labels.items()
            if k not in PLAIN_LABELS and (len(alerts) == 1 or (k, str(v)) not in (shared or set()))
        ]
        a.telling = keep
    return alerts


def _timeline(incident: Incident) -> tuple[list[Row], bool]:
    """Alerts and observations interleaved on one axis (bounded; states only when they say something new)."""
    rows: list[Row] = []
    for a in incident.alerts.order_by("starts_at", "id"):
        rows.append(
            Row(
                a.starts_at,
                "alert",
                "alert",
                f"{a.name} fired ({a.severity or 'no severity'})",
                url=a.get_absolute_url(),
            )
        )
        if a.ends_at:
            rows.append(Row(a.ends_at, "alert", "alert", f"{a.name} resolved", url=a.get_absolute_url()))
    obs: list[Observation] = list(
        Observation.objects.filter(incident=incident)
        .filter(Q(kind__in=TIMELINE_KINDS) | ~Q(error=""))
        .only("observed_at", "kind", "source", "summary", "error", "entity", "locator")
        .select_related("entity", "entity__cluster")
        .order_by("observed_at", "id")[: TIMELINE_MAX + 1]
    )
    for o in obs[:TIMELINE_MAX]:
        text = o.summary or o.locator
        rows.append(
            Row(o.observed_at, o.kind, o.source, text, entity=o.entity, error=o.error, gist=_gist(o, text))
        )
    rows.sort(key=lambda r: (r.time, r.kind != "alert", r.kind))
    return _fold_repeats(_collapse(rows)), len(obs) > TIMELINE_MAX


def _fold_repeats(rows: list[Row]) -> list[Row]:
    """A row that says again what an earlier row said (the scheduler's Unschedulable event every 5 min, a
    state recorded unchanged) is folded into the first: one row with the count and the last time."""
    out: list[Row] = []
    first: dict[tuple[str, str, int | None, str], Row] = {}
    for r in rows:
        if r.kind == "alert" or r.error:
            out.append(r)
            continue
        key = (r.kind, r.source, getattr(r.entity, "pk", None), r.text)
        seen = first.get(key)
        if seen is None:
            first[key] = r
            out.append(r)
        else:
            seen.repeats += 1
            seen.last = r.time
    return out


COLLAPSE_OVER = 3


def _gist(o: Observation, text: str) -> str:
    """ "gpu created", "gpu pod", "Ready": the part simultaneous rows share (changes: kind + field; states: the tail)."""
    if o.kind == "change" and o.entity is not None:
        field = text[len(str(o.entity)) :].strip().split(":", 1)[0]
        return f"{o.entity.kind} {field}"
    if o.kind.endswith("_state"):
        return text.rsplit(" · ", 1)[-1] if " · " in text else "recorded"
    return ""


def _collapse(rows: list[Row]) -> list[Row]:
    """Many state versions or changes of one kind at the same instant (a first sweep: 16 GPUs "ok") become one row."""
    out: list[Row] = []
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j].kind == rows[i].kind and rows[j].time == rows[i].time:
            j += 1
        group = rows[i:j]
        foldable = rows[i].kind == "change" or rows[i].kind.endswith("_state")
        if len(group) > COLLAPSE_OVER and foldable and not any(r.error for r in group):
            gists = Counter(r.gist or "other" for r in group)
            what = ", ".join(f"{g} ×{n}" for g, n in gists.most_common(4))
            noun = "changes" if rows[i].kind == "change" else rows[i].kind.replace("_state", "") + " versions"
            out.append(Row(rows[i].time, rows[i].kind, rows[i].source, f"{len(group)} {noun}: {what}"))
        else:
            out.extend(group)
        i = j
    return out


@require_GET
def incident_history(request: RcaRequest, pk: int) -> HttpResponse:
    incident = _get_incident(pk)
    cursor = request.cursor if not request.cursor.live else request.cursor.moved_to(incident.onset)
    handoff_ids = list(incident.handoffs.values_list("id", flat=True))
    entries = AuditEntry.objects.filter(
        Q(target_type="incident", target_id=incident.pk)
        | Q(target_type="handoffnote", target_id__in=handoff_ids)
    ).order_by("-time", "-id")
    page = Paginator(entries, 100).get_page(request.GET.get("page"))
    ctx = {
        "incident": incident,
        "cursor": cursor,
        "cursor_anchor": ("incident start", incident.onset),
        "cursor_now_at": now_at(incident),
        "page": page,
        "rows": [(e, audit.sentence(e)) for e in page],  # each entry as a sentence, not its stored JSON
    }
    return render(request, "incidents/incident_history.html", ctx)


@require_GET
def alert_detail(request: RcaRequest, pk: int) -> HttpResponse:
    alert = get_object_or_404(Alert.objects.select_related("incident"), pk=pk)
    return render(request, "incidents/alert_detail.html", {"alert": alert})
