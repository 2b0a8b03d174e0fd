"""Incident pages: the list, the incident (timeline, evidence, hypotheses, actions inside), its history, alerts.

The incident page renders as of the cursor; without ``t`` it renders as of the
onset and every link carries ``t=onset`` (the default cursor is the incident start).
Query counts are bounded: the timeline and the evidence list are capped/paginated.

The incident page's parts each have a module beside this one: its status panel (status_panel), evidence,
timeline, subjects and related entities (subjects), diagnosis (hypotheses) and related incidents.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from collectors.inventory import neighbour_change_times
from collectors.models import Cluster
from incidents import audit, causes, services
from incidents.diagnosis_run import pick_run
from incidents.models import Alert, AuditEntry, DiagnosisRun, Incident
from incidents.titles import TitleLines
from rcaweb.cursor import Cursor
from rcaweb.http import RcaRequest
from rcaweb.roles import can_respond
from rcaweb.row_attribute import Via
from web.incidents.evidence import evidence_context, evidence_folding
from web.incidents.forms import IncidentFilterForm, OwnerForm, StatusForm
from web.incidents.hypotheses import hypotheses_context
from web.incidents.listing import RESOLVED_COUNTED, UnresolvedThenResolved, alert_count
from web.incidents.related_incidents import related_incidents
from web.incidents.status_panel import now_at, status_context
from web.incidents.subjects import subjects_at
from web.incidents.timeline import TIMELINE_SHOWN, timeline

logger = logging.getLogger(__name__)

RUNS_SHOWN = 50
FRAGMENTS = {
    "collection-progress": "progress",
    "evidence": "evidence",
    "status-panel": "status",
    "timeline": "timeline",
}


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
            request, "incidents/incident_detail.html#status", status_context(request, incident, cursor)
        )
    return redirect(cursor.link(incident.get_absolute_url()))


def _detail_context(
    request: RcaRequest, incident: Incident, cursor: Cursor, fragment: str | None
) -> dict[str, Any]:
    """The page's context, or a fragment's: only what the fragment shows is read."""
    ctx = status_context(request, incident, cursor)
    # Every run of the incident in one query (bounded); the page shows the one for the cursor.
    runs = list(incident.diagnoses.order_by("at", "id")[:RUNS_SHOWN])
    run = ctx["diagnosis"] = pick_run(runs, cursor.t)
    if fragment in (None, "evidence"):
        ctx.update(evidence_context(request, incident, cursor, run, runs))
    if fragment in (None, "timeline"):
        rows, ctx["timeline_truncated"] = timeline(incident)
        ctx["timeline"], ctx["timeline_more"] = rows[:TIMELINE_SHOWN], rows[TIMELINE_SHOWN:]
    ctx.update(evidence_folding(request, incident, cursor, fragment))
    if fragment is None:
        ctx.update(_whole_page_context(incident, cursor, run, runs))
    return ctx


def _whole_page_context(
    incident: Incident, cursor: Cursor, run: DiagnosisRun | None, runs: list[DiagnosisRun]
) -> dict[str, Any]:
    """What no fragment shows: subjects and related entities at t, the diagnosis, alerts, related incidents,
    the runs, and the changes before and after t for the cursor bar."""
    shown = subjects_at(incident, cursor.t)
    ids = shown.change_ids
    prev_change, next_change = neighbour_change_times(ids, cursor.t) if ids else (None, None)
    return {
        **shown.context(),
        **hypotheses_context(incident, run, runs, shown.subjects),
        "alerts": _with_telling_labels(list(incident.alerts.order_by("starts_at", "id"))),
        **related_incidents(incident),
        "runs": runs,
        "onset_run": runs[0] if runs else None,
        "cursor_prev_change": prev_change,
        "cursor_next_change": next_change,
    }


PLAIN_LABELS = ("alertname", "severity", "cluster")


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
