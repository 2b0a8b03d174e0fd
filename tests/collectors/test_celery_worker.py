"""A real ``celery -A rcaweb worker`` on Redis runs the collectors' sweeps end to end (CI's second pass).

The worker is a subprocess pointed at the test database (PostgreSQL, committed through ``transactional_db``)
and at a private Redis; the simulator serves the cluster on loopback from this process. Run with
``RCAWEB_SERVICES_TESTS=1 DATABASE_URL=postgres://… pytest -m services``.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.db import connection

from collectors.models import EntityVersion, KubeEvent, SourceRun
from tests.collectors.simhelpers import register, served, small_world
from tests.faults.services import RedisServer, app_env, database_url, send_task, start_worker, wait_until

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        os.environ.get("RCAWEB_SERVICES_TESTS") != "1",
        reason="real PostgreSQL/Redis/Celery tests run in CI's second pass (.ci/run)",
    ),
]


def test_a_real_worker_sweeps_the_simulated_cluster(transactional_db, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("the worker must see the test database: needs PostgreSQL (DATABASE_URL=postgres://…)")
    redis = RedisServer(tmp_path).start()
    world = small_world("kai")
    worker = None
    try:
        with served(world) as sim:
            sim.advance_to(world.start + timedelta(minutes=30))
            cluster = register(sim)
            worker = start_worker(
                "collectors-worker", app_env(database=database_url(), redis=redis.url), tmp_path
            )
            at = world.now.strftime("%Y-%m-%dT%H:%M:%SZ")
            send_task(redis.url, "collectors.tasks.sweep_inventory", cluster.name, at)
            send_task(redis.url, "collectors.tasks.sweep_events", cluster.name, at)
            wait_until(
                lambda: SourceRun.objects.filter(cluster=cluster, call="list pods", ok=True).exists(),
                60,
                "the worker's inventory sweep",
            )
            wait_until(
                lambda: KubeEvent.objects.filter(cluster=cluster).exists(), 30, "the worker's events sweep"
            )
            log = worker.output()
        assert "collectors.tasks.sweep_inventory" in log and "succeeded" in log, log[-3000:]
        open_versions = EntityVersion.objects.filter(cluster=cluster, valid_to__isnull=True)
        assert open_versions.filter(kind="node").count() == 3
        assert open_versions.filter(kind="gpu").count() == 24
        assert set(open_versions.filter(kind="project").values_list("entity__name", flat=True)) == {
            "vision",
            "nlp",
        }
        assert (
            not SourceRun.objects.filter(cluster=cluster, ok=False)
            .exclude(error__startswith="no data")
            .exists()
        )
    finally:
        if worker is not None:
            worker.kill()
            print(worker.output()[-3000:])
        redis.stop()
