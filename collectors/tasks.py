"""Celery tasks: thin wrappers over ``collectors.sweep`` (docs/conventions.md §14). Arguments are cluster names.

No exception escapes a task: a sweep records its own source errors, and anything unexpected is logged and
recorded as a ``SourceRun`` of source "sweep". A sweep with errors schedules a retry with exponential
backoff and full jitter (bounded); the next beat tick sweeps again anyway, so retries are few.
In eager mode (no REDIS_URL: demo, tests) the retry is computed and reported but not re-run inline.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celery import shared_task
from django.conf import settings

if TYPE_CHECKING:
    from datetime import datetime

    from collectors.sweep import SweepSummary

logger = logging.getLogger(__name__)

RETRY_BASE_S = 5.0
RETRY_CAP_S = 120.0
MAX_RETRIES = 3
KINDS = ("inventory", "telemetry", "events")


def retry_countdown(
    retries: int, *, base: float = RETRY_BASE_S, cap: float = RETRY_CAP_S, rng: random.Random | None = None
) -> float:
    """Exponential backoff with jitter: uniform in [backoff/2, backoff], backoff = min(cap, base * 2**retries)."""
    backoff = min(cap, base * (2 ** max(0, retries)))
    return (rng or random).uniform(backoff / 2, backoff)


def _run(task: Any, kind: str, cluster: str, at: str | None) -> dict[str, Any]:
    from collectors import sweep
    from collectors.models import Cluster, SourceRun
    from collectors.sources.redact import redact_text
    from rcaweb.timestamps import parse_timestamp

    sweeps: dict[str, Callable[[str, datetime | None], SweepSummary]] = {
        "inventory": sweep.sweep_cluster,
        "telemetry": sweep.sweep_telemetry,
        "events": sweep.sweep_events,
    }
    fn = sweeps[kind]
    try:
        summary = fn(cluster, parse_timestamp(at) if at else None)
    except ValueError as exc:  # unknown cluster, bad time: retrying will not help
        logger.error("%s sweep of %s refused: %s", kind, cluster, exc)
        return {"cluster": cluster, "kind": kind, "errors": [str(exc)], "retry_in": None}
    except Exception as exc:
        logger.exception("%s sweep of %s failed", kind, cluster)
        from django.utils import timezone

        c = Cluster.objects.filter(name=cluster).first()
        if c is not None:
            SourceRun.objects.create(
                cluster=c,
                source="sweep",
                call=f"{kind} sweep",
                time=timezone.now(),
                ok=False,
                error=redact_text(f"{type(exc).__name__}: {exc}")[:4000],
            )
        result: dict[str, Any] = {
            "cluster": cluster,
            "kind": kind,
            "errors": [f"{type(exc).__name__}: {exc}"],
        }
    else:
        result = summary.as_dict()
    result["retry_in"] = None
    if result["errors"] and task.request.retries < MAX_RETRIES:
        countdown = retry_countdown(task.request.retries)
        result["retry_in"] = round(countdown, 1)
        if task.request.is_eager or getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
            logger.info("%s sweep of %s had errors; a worker would retry in %.0f s", kind, cluster, countdown)
        else:
            # throw=False: the retry is queued and this run ends normally (acked), no exception escapes.
            task.retry(countdown=countdown, max_retries=MAX_RETRIES, throw=False)
    return result


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=MAX_RETRIES)
def sweep_inventory(self: Any, cluster: str, at: str | None = None) -> dict[str, Any]:
    return _run(self, "inventory", cluster, at)


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=MAX_RETRIES)
def sweep_telemetry(self: Any, cluster: str, at: str | None = None) -> dict[str, Any]:
    return _run(self, "telemetry", cluster, at)


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=MAX_RETRIES)
def sweep_events(self: Any, cluster: str, at: str | None = None) -> dict[str, Any]:
    return _run(self, "events", cluster, at)


TASKS = {"inventory": sweep_inventory, "telemetry": sweep_telemetry, "events": sweep_events}


@shared_task(acks_late=True, ignore_result=True)
def sweep_all(kind: str = "inventory") -> int:
    """Beat entry point: one sweep task per configured cluster (clusters are rows, so the fan-out is here)."""
    from collectors.models import Cluster

    if kind not in TASKS:
        logger.error("sweep_all: unknown kind %r (expected one of %s)", kind, ", ".join(KINDS))
        return 0
    names = list(Cluster.objects.values_list("name", flat=True))
    for name in names:
        TASKS[kind].delay(name)
    return len(names)


@shared_task(bind=True, acks_late=True, ignore_result=True)
def watch_inventory(self: Any, cluster: str, duration_s: float | None = None) -> dict[str, Any]:
    """One watch session of ``cluster`` (``collectors.sweep.watch``): returns at once when another worker
    holds the cluster's lease, else lists, watches and records for RCAWEB_WATCH_SESSION_S. Nothing escapes:
    the next beat tick starts a session again (after a lost worker, once its lease expired)."""
    from collectors.sweep.watch import watch_cluster

    try:
        stats = watch_cluster(cluster, duration_s)
    except ValueError as exc:
        logger.error("watch of %s refused: %s", cluster, exc)
        return {"cluster": cluster, "errors": [str(exc)]}
    except Exception as exc:
        logger.exception("watch of %s failed", cluster)
        return {"cluster": cluster, "errors": [f"{type(exc).__name__}: {exc}"]}
    return {
        "cluster": cluster,
        "events": stats.events,
        "bookmarks": stats.bookmarks,
        "gone": stats.gone,
        "relists": stats.relists,
        "applies": stats.applies,
        "rows_written": stats.rows_written,
        "errors": stats.errors[-20:],
    }


@shared_task(acks_late=True, ignore_result=True)
def watch_all() -> int:
    """Beat entry point with RCAWEB_WATCH: one watch task per configured cluster; a cluster whose session
    still runs (its lease is held) costs the receiving worker one failed lock attempt."""
    from collectors.models import Cluster

    names = list(Cluster.objects.values_list("name", flat=True))
    for name in names:
        watch_inventory.delay(name)
    return len(names)


def beat_schedule() -> dict[str, dict[str, Any]]:
    """CELERY beat entries: inventory every RCAWEB_SWEEP_INVENTORY_S (30 s), telemetry every ..._TELEMETRY_S (60 s),
    events every ..._EVENTS_S (15 s); each fans out per configured cluster. With RCAWEB_WATCH the inventory
    and the events are watched instead: ``watch_all`` every RCAWEB_WATCH_CHECK_S (the sessions relist on their
    own interval)."""
    every = {
        "inventory": settings.RCAWEB_SWEEP_INVENTORY_S,
        "telemetry": settings.RCAWEB_SWEEP_TELEMETRY_S,
        "events": settings.RCAWEB_SWEEP_EVENTS_S,
    }
    if settings.RCAWEB_WATCH:  # a watch session lists and watches the Events as well
        del every["inventory"], every["events"]
    schedule = {
        f"collectors-sweep-{kind}": {
            "task": "collectors.tasks.sweep_all",
            "schedule": float(seconds),
            "kwargs": {"kind": kind},
            "options": {"expires": float(seconds)},  # a backlog of stale sweeps is worthless
        }
        for kind, seconds in every.items()
    }
    if settings.RCAWEB_WATCH:
        check = float(settings.RCAWEB_WATCH_CHECK_S)
        schedule["collectors-watch-inventory"] = {
            "task": "collectors.tasks.watch_all",
            "schedule": check,
            "options": {"expires": check},
        }
    return schedule
