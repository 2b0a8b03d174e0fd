"""rcaweb's own Prometheus metrics at /metrics (bearer token), computed from the database at scrape time.

Counting from durable rows (not in-process counters) keeps the figures right across gunicorn
workers, Celery workers and restarts.
"""

from __future__ import annotations

import hmac
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Avg, Count, Max, Q
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from collectors.models import SourceRun
from incidents.models import Alert, Incident
from rcaweb import taskstats


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def queue_depth() -> int | None:
    """Messages waiting in the Celery default queue (Redis list ``celery``); None without a broker."""
    if not settings.REDIS_URL:
        return None
    try:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
        return int(client.llen("celery"))
    except Exception:
        return None


def watch_state() -> dict[str, float]:
    """cluster -> seconds since its watch session last applied events or listed (clusters watched at all)."""
    if not settings.REDIS_URL:
        return {}
    from collectors.models import Cluster
    from collectors.sweep.watch_cursors import load_cursors

    now = timezone.now().timestamp()
    out = {}
    for name in Cluster.objects.values_list("name", flat=True):
        state = load_cursors(name)
        times = [float(state[k]) for k in ("applied_at", "listed_at") if k in state]
        if times:
            out[name] = max(0.0, now - max(times))
    return out


def render_metrics() -> str:
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lab = ",".join(f'{k}="{_esc(v)}"' for k, v in sorted(labels.items()))
            lines.append(f"{name}{{{lab}}} {value}" if lab else f"{name} {value}")

    metric("rcaweb_alerts_received_total", "counter", "Alerts stored by the Alertmanager intake.", [({}, Alert.objects.count())])
    metric(
        "rcaweb_alerts_unprocessed",
        "gauge",
        "Alerts stored but not yet grouped (the outbox).",
        [({}, Alert.objects.filter(processed_at__isnull=True).count())],
    )
    by_status = dict(Incident.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    metric("rcaweb_incidents_opened_total", "counter", "Incidents opened.", [({}, sum(by_status.values()))])
    metric(
        "rcaweb_incidents",
        "gauge",
        "Incidents by status.",
        [({"status": s}, by_status.get(s, 0)) for s, _ in Incident.STATUSES],
    )
    since = timezone.now() - timedelta(hours=1)
    rows = list(
        SourceRun.objects.filter(time__gte=since)
        .values("cluster__name", "source")
        .annotate(avg_ms=Avg("duration_ms"), errors=Count("id", filter=Q(ok=False)), calls=Count("id"), last=Max("time"))
    )
    metric(
        "rcaweb_source_call_duration_seconds_avg",
        "gauge",
        "Mean duration of source calls over the last hour.",
        [({"cluster": r["cluster__name"], "source": r["source"]}, round((r["avg_ms"] or 0) / 1000, 3)) for r in rows],
    )
    metric(
        "rcaweb_source_errors_last_hour",
        "gauge",
        "Failed source calls over the last hour.",
        [({"cluster": r["cluster__name"], "source": r["source"]}, r["errors"]) for r in rows],
    )
    depth = queue_depth()
    if depth is not None:
        metric("rcaweb_task_queue_depth", "gauge", "Celery messages waiting in the default queue.", [({}, depth)])
    stats = taskstats.snapshot()
    for what, help_text in (
        ("wait", "Seconds a Celery task waited between being sent and starting, per task."),
        ("run", "Seconds a Celery task ran, per task."),
    ):
        samples = taskstats.histogram_lines(f"rcaweb_task_{what}_seconds", what, stats)
        if samples:
            lines.append(f"# HELP rcaweb_task_{what}_seconds {help_text}")
            lines.append(f"# TYPE rcaweb_task_{what}_seconds histogram")
            lines.extend(samples)
    watches = watch_state()
    if watches:
        metric(
            "rcaweb_watch_last_apply_age_seconds",
            "gauge",
            "Seconds since a cluster's watch session last recorded (or listed), per cluster.",
            [({"cluster": c}, round(age, 1)) for c, age in watches.items()],
        )
    return "\n".join(lines) + "\n"


@login_not_required  # the scraper sends RCAWEB_METRICS_TOKEN, checked here
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if not token:
        return HttpResponse("metrics are disabled: set RCAWEB_METRICS_TOKEN\n", status=404, content_type="text/plain")
    if not given.startswith("Bearer ") or not hmac.compare_digest(given[7:].encode(), token.encode()):
        return HttpResponse("missing or wrong bearer token\n", status=401, content_type="text/plain")
    return HttpResponse(render_metrics(), content_type="text/plain; version=0.0.4; charset=utf-8")
