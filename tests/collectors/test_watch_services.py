"""The watch's lease, cursors and the task latencies on a real Redis (a private redis-server).

Run with ``RCAWEB_SERVICES_TESTS=1 pytest -m services tests/collectors/test_watch_services.py``."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection

from collectors.models import Change, SourceRun
from collectors.sweep.watch import WatchSession
from collectors.sweep.watch_cursors import load_cursors
from collectors.sweep.watch_lease import Lease
from rcaweb import taskstats
from tests.collectors.simhelpers import register, served, small_world
from tests.faults.services import RedisServer, app_env, database_url, send_task, start_worker, wait_until
from web import metrics

pytestmark = [pytest.mark.services, pytest.mark.django_db]
TASK = "collectors.tasks.watch_inventory"


@pytest.fixture
def redis_url(tmp_path, settings):
    server = RedisServer(tmp_path).start()
    settings.REDIS_URL = server.url
    try:
        yield server.url
    finally:
        server.stop()


def test_a_lease_expires_when_its_holder_stops_renewing_and_the_holder_then_knows(redis_url) -> None:
    a, b = Lease("gpu-prod", 1), Lease("gpu-prod", 1)
    try:
        assert a.acquire() and not b.acquire()
        time.sleep(1.5)  # a's heartbeat renews it past its TTL
        assert not b.acquire()
        a.stop_renewing()  # a "died"
        time.sleep(1.3)
        assert b.acquire()
        assert not a.renew()  # the old holder learns it lost the cluster, and must stop
    finally:
        a.release()
        b.release()


def test_two_workers_never_watch_one_cluster_and_the_cursors_are_shared(redis_url) -> None:
    world = small_world("kai")
    with served(world) as sim:
        sim.advance_to(world.start + timedelta(minutes=25))
        register(sim)
        kw = {"clock": lambda: sim.world.now, "apply_every_s": 0, "watch_timeout_s": 5}
        first = WatchSession("gpu-prod", lease_s=1, **kw)
        second = WatchSession("gpu-prod", lease_s=30, **kw)
        try:
            assert first.start()  # its relist takes longer than the lease: the heartbeat kept it
            time.sleep(1.5)
            assert not second.start() and first.step(timeout=0)
            saved = load_cursors("gpu-prod")
            assert saved["rv:list pods"] == first.kept.rv["list pods"] and "listed_at" in saved
            assert "gpu-prod" in metrics.watch_state()
            first.lease.stop_renewing()  # first "dies": no heartbeat, the lease expires
            time.sleep(1.5)
            assert second.start()  # another worker takes the cluster over (and relists)
            assert not first.step(timeout=0)  # and the old holder, were it alive, stops
        finally:
            first.stop()
            second.stop()


def test_task_latencies_are_histograms_on_metrics(redis_url) -> None:
    taskstats.record("collectors.tasks.watch_inventory", wait_s=0.3, run_s=42.0)
    taskstats.record("collectors.tasks.watch_inventory", wait_s=None, run_s=0.05)
    text = metrics.render_metrics()
    task = 'task="collectors.tasks.watch_inventory"'
    assert f'rcaweb_task_wait_seconds_bucket{{le="0.5",{task}}} 1' in text
    assert f"rcaweb_task_wait_seconds_count{{{task}}} 1" in text
    assert f'rcaweb_task_run_seconds_bucket{{le="0.1",{task}}} 1' in text
    assert f'rcaweb_task_run_seconds_bucket{{le="30",{task}}} 1' in text
    assert f'rcaweb_task_run_seconds_bucket{{le="+Inf",{task}}} 2' in text
    assert f"rcaweb_task_run_seconds_sum{{{task}}} 42.05" in text
    assert "# TYPE rcaweb_task_run_seconds histogram" in text


def test_a_real_worker_watches_the_cluster_and_reports_the_task_latency(transactional_db, tmp_path, settings):
    if connection.vendor != "postgresql":
        pytest.skip("the worker must see the test database: needs PostgreSQL (DATABASE_URL=postgres://…)")
    redis = RedisServer(tmp_path).start()
    settings.REDIS_URL = redis.url
    world = small_world("kai")
    worker = None
    try:
        with served(world) as sim:
            sim.advance_to(world.start + timedelta(minutes=25))
            cluster = register(sim)
            env = app_env(database=database_url(), redis=redis.url, RCAWEB_WATCH_APPLY_S="0")
            worker = start_worker("collectors-worker", env, tmp_path)
            send_task(redis.url, "collectors.tasks.watch_inventory", cluster.name, 25)
            wait_until(lambda: "rv:list pods" in load_cursors(cluster.name), 60, "the worker's first listing")
            changes = Change.objects.filter(cluster=cluster).count()
            sim.advance_to(sim.world.now + timedelta(minutes=40))  # jobs start and end: the watch sees it
            wait_until(
                lambda: (
                    "applied_at" in load_cursors(cluster.name)
                    and Change.objects.filter(cluster=cluster).count() > changes
                ),
                30,
                "the worker's watch to record what changed",
            )
            wait_until(lambda: taskstats.snapshot().get(TASK, {}).get("run_count"), 60, "the session's end")
            log = worker.output()
        assert "collectors.tasks.watch_inventory" in log and "succeeded" in log, log[-3000:]
        stats = taskstats.snapshot()[TASK]
        assert (
            stats["run_count"] == 1 and stats["wait_count"] == 1
        )  # the publisher's stamp reached the worker
        assert 20 <= stats["run_sum"] < 60 and 0 <= stats["wait_sum"] < 30
        assert (
            'rcaweb_task_run_seconds_count{task="collectors.tasks.watch_inventory"} 1'
            in metrics.render_metrics()
        )
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
