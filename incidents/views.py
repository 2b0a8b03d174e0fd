"""Incident pages (foundation version: list and detail; the incident page grows its panels)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from incidents.models import Alert, Incident
from rcaweb.http import RcaRequest


@require_GET
def incident_list(request: RcaRequest) -> HttpResponse:
    incidents = Incident.objects.select_related("cluster").order_by("-onset")[:200]
    return render(request, "incidents/incident_list.html", {"incidents": incidents})


@require_GET
def incident_detail(request: RcaRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
    return render(request, "incidents/incident_detail.html", {"incident": incident})


@require_GET
def alert_detail(request: RcaRequest, pk: int) -> HttpResponse:
    alert = get_object_or_404(Alert, pk=pk)
    return render(request, "incidents/alert_detail.html", {"alert": alert})
