"""Redis stopped while alerts arrive.

Injects: the broker (a private redis-server the app under gunicorn uses) is killed; Alertmanager
notifications keep arriving, and are resent as Alertmanager does; Redis comes back empty (no
persistence: whatever was queued before is gone too).
Must hold: every notification is answered 200 and every alert stored (the outbox: nothing is lost);
resends write nothing; once Redis is back, new notifications flow through the queue again, and two
concurrent outbox sweeps on a real worker process every stored alert exactly once: ``processed_at`` set on
all, one incident per job (never two for one job, never an alert in two), evidence collected for each.
"""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import pytest
import requests
from django.conf import settings
from django.db.models import Count, F
from django.utils import timezone

from incidents.models import Alert, Incident
from tests.faults.services import (
    app_env,
    broker_idle,
    database_url,
    send_task,
    start_gunicorn,
    start_worker,
    wait_until,
)
from tests.incidents.fixtures.alertmanager import alert, payload

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        os.environ.get("RCAWEB_SERVICES_TESTS") != "1",
        reason="real PostgreSQL/Redis/Celery tests run in CI's second pass (.ci/run)",
    ),
]

URL = "/api/v1/alerts/alertmanager"
JOBS = [f"train-{i}" for i in range(6)]
RULES = ["GPUJobPendingTooLong", "GPUJobLowUtilization", "GPUJobRestarting"]


def notification(rule: str, t0: datetime) -> dict:
    """What Alertmanager sends when it groups by alertname: one rule, firing for every job."""
    return payload([alert(rule, {"namespace": "vision", "job_name": job}, t0) for job in JOBS])


def test_it_stores_every_alert_while_redis_is_down_and_processes_each_once_when_it_is_back(
    redis_server, procs, tmp_path
):
    env = app_env(database=database_url(), redis=redis_server.url, RCAWEB_BROKER_VISIBILITY_TIMEOUT_S="30")
    web, base = start_gunicorn(env, tmp_path, workers=1, threads=2)
    procs.add(web)
    auth = {"Authorization": f"Bearer {settings.WEBHOOK_TOKENS[0]}"}
    t0 = timezone.now().replace(microsecond=0) - timedelta(minutes=20)

    redis_server.stop()  # the outage
    answers, slowest = [], 0.0
    for attempt in range(2):  # Alertmanager resends each group at every group_interval
        for rule in RULES:
            started = time.monotonic()
            r = requests.post(base + URL, json=notification(rule, t0), headers=auth, timeout=20)
            slowest = max(slowest, time.monotonic() - started)
            answers.append((attempt, r.status_code, r.json()))
    assert [status for _, status, _ in answers] == [200] * 6, answers
    assert [body["created"] for _, _, body in answers] == [6, 6, 6, 0, 0, 0]
    assert [body["unchanged"] for _, _, body in answers] == [0, 0, 0, 6, 6, 6]
    assert slowest < 10, f"a notification took {slowest:.1f} s with the broker down"
    ready = requests.get(base + "/readyz", timeout=10)  # the app itself sees the broker gone
    assert ready.status_code == 503 and ready.json()["broker"].startswith("error"), ready.text
    stored = len(JOBS) * len(RULES)
    assert Alert.objects.count() == stored
    assert Alert.objects.filter(processed_at__isnull=True).count() == stored
    assert not Incident.objects.exists()

    redis_server.start()  # back on the same port, empty
    # The outage outlasted the sweeper's grace period (it leaves fresh rows to the task enqueued on commit).
    Alert.objects.update(received_at=F("received_at") - timedelta(minutes=1))
    worker = procs.add(start_worker("worker", env, tmp_path, concurrency=2))
    # The normal path works again: this notification is enqueued on commit and processed from the queue.
    late = payload([alert("GPUJobStuck", {"namespace": "vision", "job_name": "late-job"}, t0)])
    r = requests.post(base + URL, json=late, headers=auth, timeout=20)
    assert r.status_code == 200 and r.json()["created"] == 1
    late_alert = Alert.objects.get(name="GPUJobStuck")
    wait_until(
        lambda: Alert.objects.filter(pk=late_alert.pk, processed_at__isnull=False).exists(),
        20,
        "the late alert to be processed from the queue",
    )
    # Beat's outbox sweep, twice at once (two beat ticks, or two beats by mistake): they race for whatever
    # the queue did not deliver (the web app may still publish what it could not hand over during the outage).
    send_task(redis_server.url, "incidents.tasks.sweep_outbox")
    send_task(redis_server.url, "incidents.tasks.sweep_outbox")
    wait_until(
        lambda: not Alert.objects.filter(processed_at__isnull=True).exists(), 30, "the outbox to drain"
    )
    # Each alert that joined an incident queued its evidence collection again: wait until all have run.
    wait_until(
        lambda: (
            broker_idle(redis_server.url)
            and not Incident.objects.exclude(collection_state__in=("done", "failed")).exists()
        ),
        30,
        "evidence collection of every incident",
    )
    assert worker.alive()
    # Exactly once: every task that groups alerts returns how many rows it claimed; over all that ran
    # (messages published once the broker was back, the late notification, both sweeps), each row once.
    claims = re.findall(
        r"incidents\.tasks\.(process_alerts|sweep_outbox)\[[0-9a-f-]+\] succeeded in [0-9.]+s: (\d+)",
        worker.output(),
    )
    assert [name for name, _ in claims].count("sweep_outbox") == 2
    assert sum(int(n) for _, n in claims) == stored + 1, claims

    alerts = Alert.objects.filter(name__in=RULES)
    assert alerts.count() == stored and not alerts.filter(incident__isnull=True).exists()
    per_job = {
        job: set(alerts.filter(labels__job_name=job).values_list("incident_id", flat=True)) for job in JOBS
    }
    assert all(len(ids) == 1 for ids in per_job.values()), per_job  # one incident per job, never two
    assert len({next(iter(ids)) for ids in per_job.values()}) == len(JOBS)  # and never shared by two jobs
    counts = dict(Incident.objects.annotate(n=Count("alerts")).values_list("pk", "n"))
    assert sorted(counts.values()) == [1] + [len(RULES)] * len(JOBS)  # + the late job's incident
    assert Incident.objects.count() == len(JOBS) + 1
    assert set(Incident.objects.values_list("collection_state", flat=True)) == {"done"}


def test_it_opens_one_incident_per_job_when_a_worker_groups_notifications_concurrently(
    redis_server, procs, tmp_path
):
    """The companion without an outage: Alertmanager sends one notification per rule (group_by alertname),
    all after the same group_wait, so a worker with several processes groups them at the same moment.
    Must hold: alerts naming the same job still end in one incident."""
    env = app_env(database=database_url(), redis=redis_server.url)
    worker = procs.add(start_worker("worker", env, tmp_path, concurrency=2))
    web, base = start_gunicorn(env, tmp_path, workers=1, threads=4)
    procs.add(web)
    auth = {"Authorization": f"Bearer {settings.WEBHOOK_TOKENS[0]}"}
    t0 = timezone.now().replace(microsecond=0) - timedelta(minutes=20)
    with ThreadPoolExecutor(len(RULES)) as pool:
        answers = list(
            pool.map(
                lambda rule: requests.post(base + URL, json=notification(rule, t0), headers=auth, timeout=20),
                RULES,
            )
        )
    assert [r.status_code for r in answers] == [200] * len(RULES)
    wait_until(
        lambda: (
            broker_idle(redis_server.url) and not Alert.objects.filter(processed_at__isnull=True).exists()
        ),
        30,
        "every alert to be grouped",
    )
    assert worker.alive()
    per_job = {
        job: set(Alert.objects.filter(labels__job_name=job).values_list("incident_id", flat=True))
        for job in JOBS
    }
    assert all(len(ids) == 1 for ids in per_job.values()), per_job
    assert Incident.objects.count() == len(JOBS)
