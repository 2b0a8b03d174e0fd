"""Handoff pages: the incident's handoff panel (GET/POST), ``/handoffs/`` and the Markdown exports."""

from __future__ import annotations

import logging

from django.http import HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from incidents.handoffs import board, markdown, services
from incidents.handoffs.links import export_links
from incidents.models import HandoffNote, Incident
from rcaweb.http import RcaRequest
from rcaweb.roles import can_respond

logger = logging.getLogger(__name__)


def _panel_ctx(request: RcaRequest, incident: Incident, form: services.HandoffForm | None = None) -> dict:
    notes = list(incident.handoffs.order_by("-created", "-id")[:20])
    latest = notes[0] if notes else None
    if form is None:
        initial = (
            services.snapshot(latest) | {"note": latest.pk}
            if latest
            else services.prefill(incident, request.user)
        )
        form = services.HandoffForm(initial=initial)
    edits = services.history(notes)
    return {
        "incident": incident,
        "latest": latest,
        "latest_edits": edits.get(latest.pk, []) if latest else [],
        "older": [(n, edits.get(n.pk, [])) for n in notes[1:]],
        "form": form,
        "prefill_from_incident": latest is None,
        "incident_link": services.incident_cursor(incident).link(incident.get_absolute_url()),
    }


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def incident_handoff(request: RcaRequest, pk: int) -> HttpResponse:
    """GET: the handoff panel (fragment for htmx, a page otherwise). POST: save a new note or an edit."""
    incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
    if request.method == "POST":
        if not can_respond(request.user):
            return HttpResponseForbidden("Your role is viewer: writing handoffs needs the responder role.\n")
        form = services.HandoffForm(request.POST)
        if not form.is_valid():
            ctx = _panel_ctx(request, incident, form)
            template = "incidents/handoff_body.html" if request.htmx else "incidents/handoff_page.html"
            return render(request, template, ctx, status=400)
        data = form.cleaned_data
        note_id = data.get("note")
        if note_id and "new" not in request.POST:
            note = get_object_or_404(HandoffNote, pk=note_id, incident=incident)
            services.edit_handoff(note, request.user, data, request_id=request.request_id)
        else:
            services.create_handoff(incident, request.user, data, request_id=request.request_id)
        if request.htmx:
            return render(request, "incidents/handoff_body.html", _panel_ctx(request, incident))
        return redirect(request.cursor.link(incident.get_absolute_url()) + "#handoff")
    template = "incidents/handoff_body.html" if request.htmx else "incidents/handoff_page.html"
    return render(request, template, _panel_ctx(request, incident))


@require_GET
def handoff_list(request: RcaRequest) -> HttpResponse:
    """Every problem open at t, its most urgent incident first with its latest handoff, then the incidents that
    share its cause: one printable page for the next shift."""
    ctx = {
        "board": board.open_problems_with_notes(request.cursor.t),
        # asked once here: the context processor's callable would ask the database once per incident row
        "can_respond": can_respond(request.user),
    }
    return render(request, "incidents/handoff_list.html", ctx)


@require_GET
def handoff_list_markdown(request: RcaRequest) -> HttpResponse:
    links = export_links(request)  # its cursor is the moment the export describes (frozen when live)
    text = markdown.page_markdown(board.open_problems_with_notes(links.cursor.t), links.cursor.t, links)
    return _markdown_response(text, "handoffs.md")


@require_GET
def incident_handoff_markdown(request: RcaRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
    latest = incident.handoffs.order_by("-created", "-id").first()
    edits = services.history([latest]).get(latest.pk, []) if latest else []
    links = export_links(request)
    lead = board.leads([incident.pk], links.cursor.t)[incident.pk]
    return _markdown_response(
        markdown.incident_markdown(incident, latest, edits, links.cursor.t, links, lead),
        f"incident-{incident.pk}-handoff.md",
    )


def _markdown_response(text: str, filename: str) -> HttpResponse:
    resp = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{filename}"'  # an export: save it, paste it
    return resp
