"""The on-call console home, and health probes."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from collectors.models import Cluster
from incidents.models import Incident
from rcaweb.http import RcaRequest


@require_GET
def home(request: RcaRequest) -> HttpResponse:
    ctx = {
        "clusters": Cluster.objects.all(),
        "incidents": Incident.objects.exclude(status="resolved").select_related("cluster").order_by("-onset")[:50],
    }
    return render(request, "home.html", ctx)


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok\n", content_type="text/plain")


@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
    except Exception as exc:  # the database is the one thing we cannot serve without
        return JsonResponse({"ready": False, "database": f"error: {exc.__class__.__name__}"}, status=503)
    return JsonResponse({"ready": True, "database": "ok"})
