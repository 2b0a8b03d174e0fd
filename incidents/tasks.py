"""Thin Celery wrappers (docs/conventions.md §14): each calls a plain function that tests call directly.

Arguments are primitives. ``sweep_outbox`` runs on beat: it processes alerts the
broker never delivered and re-queues evidence collections that were never started.
``settle_incidents`` runs on beat too: incidents whose alerts all resolved a quiet period ago
resolve (or are flagged all clear for whoever holds them), see incidents.lifecycle.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from incidents import evidence, lifecycle, outbox
from incidents.models import Incident

logger = logging.getLogger(__name__)

STALE_COLLECTION = timedelta(
    minutes=10
)  # "pending"/"running" this long: the task was lost or its worker died


@shared_task(ignore_result=True)
def process_alerts(alert_ids: list[int]) -> int:
    return outbox.process_alerts([int(i) for i in alert_ids])


@shared_task(ignore_result=True)
def process_alert(alert_id: int) -> int | None:
    return outbox.process_alert(int(alert_id))


@shared_task(bind=True, ignore_result=True, autoretry_for=(Exception,), max_retries=3, retry_backoff=True)
def collect_evidence(self, incident_id: int) -> int:
    """Reruns are safe (dedup keys): a worker killed mid-way, or a database hiccup, simply retries."""
    return evidence.collect_evidence(int(incident_id))


@shared_task(ignore_result=True)
def sweep_outbox() -> int:
    processed = outbox.sweep_outbox()
    stale = timezone.now() - STALE_COLLECTION
    lost = list(
        Incident.objects.filter(collection_state__in=("pending", "running"), created__lte=stale)
        .exclude(collected_at__gt=stale)
        .values_list("id", flat=True)[:50]
    )
    for incident_id in lost:
        outbox.enqueue_evidence(incident_id)
    return processed


@shared_task(ignore_result=True)
def settle_incidents() -> dict[str, int]:
    return lifecycle.settle(timezone.now())


SETTLE_EVERY_S = 60.0  # the quiet period is minutes long: a minute late is well within it


def beat_schedule() -> dict:
    """Entries for CELERY_BEAT_SCHEDULE (rcaweb wires every app's schedule)."""
    return {
        "incidents-sweep-outbox": {"task": "incidents.tasks.sweep_outbox", "schedule": 30.0},
        "incidents-settle": {"task": "incidents.tasks.settle_incidents", "schedule": SETTLE_EVERY_S},
    }
