"""Health probes and the admin audit log (the console home lives in web.console.views)."""

from __future__ import annotations

import hmac
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import Max
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from collectors.models import SourceRun
from incidents.models import AuditEntry
from rcaweb.http import RcaRequest
from rcaweb.roles import admin_required


@login_not_required  # probes carry no session
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """The process is up (no dependencies checked: liveness)."""
    return HttpResponse("ok\n", content_type="text/plain")


def _broker_status() -> str:
    if not settings.REDIS_URL:
        return "inline (no REDIS_URL)"
    try:
        import redis

        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1).ping()
        return "ok"
    except Exception as exc:
        return f"error: {exc.__class__.__name__}"


@login_not_required
@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    """Readiness: database, broker, and the age of the last successful sweep per cluster and source."""
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
    except Exception as exc:  # the database is the one thing we cannot serve without
        resp = JsonResponse({"ready": False, "database": f"error: {exc.__class__.__name__}"}, status=503)
        resp["Retry-After"] = "5"  # as every answer to a database failure (server_error)
        return resp
    now = timezone.now()
    last_ok = (
        SourceRun.objects.filter(ok=True, time__gte=now - timedelta(days=7))
        .values("cluster__name", "source")
        .annotate(last=Max("time"))
        .order_by("cluster__name", "source")
    )
    sweeps = [
        {
            "cluster": r["cluster__name"],
            "source": r["source"],
            "last_success": r["last"].isoformat().replace("+00:00", "Z"),
            "age_s": int((now - r["last"]).total_seconds()),
        }
        for r in last_ok
    ]
    broker = _broker_status()
    ready = not broker.startswith("error")
    body: dict = {"ready": ready, "database": "ok", "broker": broker}
    if _may_see_details(request):  # cluster and source names are for operators, not for any prober
        body["sweeps"] = sweeps
    return JsonResponse(body, status=200 if ready else 503)


def _may_see_details(request: HttpRequest) -> bool:
    if request.user.is_authenticated:
        return True
    given = request.headers.get("Authorization", "")
    token = settings.METRICS_TOKEN
    return (
        bool(token)
        and given.startswith("Bearer ")
        and hmac.compare_digest(given[7:].encode(), token.encode())
    )


@require_GET
@admin_required
def audit_log(request: RcaRequest) -> HttpResponse:
    """Every write by a person (who, what, when), newest first; admins only."""
    page = Paginator(AuditEntry.objects.select_related("user").order_by("-time", "-id"), 100).get_page(
        request.GET.get("page")
    )
    return render(request, "audit_log.html", {"page": page})


def is_database_failure(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the database's failure, whatever driver path raised it: Django's wrapped errors
    (``django.db.Error`` and subclasses) and psycopg's own, which code on psycopg's cursors raises outside
    Django's wrapper (the intake's fast path, ``incidents.intake._insert_postgresql``); also when one of them
    is the cause or context of what was raised. The chain is followed a few links deep only (it can loop)."""
    import psycopg
    from django.db import Error as DjangoDbError

    for _ in range(8):
        if exc is None:
            return False
        if isinstance(exc, DjangoDbError | psycopg.Error):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: a database failure is a 503 with Retry-After (clients retry), anything else a 500.

    Django calls this inside its ``except`` block, so the exception is still in ``sys.exc_info()``.
    """
    import sys

    if is_database_failure(sys.exc_info()[1]):
        body = "rcaweb: the database is not answering right now; retry in a few seconds.\n"
        if request.path.startswith("/api/"):
            resp: HttpResponse = JsonResponse({"error": body.strip()}, status=503)
        else:
            resp = HttpResponse(body, status=503, content_type="text/plain; charset=utf-8")
        resp["Retry-After"] = "5"
        return resp
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "internal error"}, status=500)
    return HttpResponse("rcaweb: internal error.\n", status=500, content_type="text/plain; charset=utf-8")
