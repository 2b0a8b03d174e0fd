"""A source hanging, through a real Celery worker.

Injects: two clusters swept at once (``collectors.tasks.sweep_inventory`` on a real ``celery -A rcaweb
worker``, two processes): one's Prometheus, the other's Kubernetes API server is a loopback socket that
accepts connections and never answers a byte; the other source of each is the simulator's real HTTP API.
The source timeout is 1 s (RCAWEB_SOURCE_TIMEOUT_S).
Must hold: every call to the silent source gives up after the timeout (its ``SourceRun`` error names it and
lasted about 1 s), each task finishes and schedules its retry, and the cluster's other source is still
collected (with a silent API server, nothing is invented: no inventory rows).
(tests/collectors/test_sweep_faults.py covers the same faults inline on SQLite with a server that answers
late; this is the worker-process variant with a server that never answers.)
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from datetime import timedelta

import pytest

from collectors.models import EntityVersion, SourceRun
from tests.collectors.faultserver import kubeconfig_for
from tests.collectors.simhelpers import register, served, small_world
from tests.faults.services import app_env, database_url, send_task, start_worker, wait_until

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        os.environ.get("RCAWEB_SERVICES_TESTS") != "1",
        reason="real PostgreSQL/Redis/Celery tests run in CI's second pass (.ci/run)",
    ),
]


@pytest.fixture
def silent_url(postgres) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A server that completes the TCP handshake (the kernel's backlog) and then says nothing, ever."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    yield f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()


@pytest.fixture
def sim(postgres):  # type: ignore[no-untyped-def]
    world = small_world("kai")
    with served(world) as server:
        server.advance_to(world.start + timedelta(minutes=30))
        yield server


def test_a_silent_source_bounds_the_sweep_and_the_other_source_is_still_collected(
    sim, silent_url, redis_server, procs, tmp_path
):
    """Two clusters on one worker at once: one whose Prometheus is silent, one whose API server is."""
    clusters = {
        "prometheus": register(sim, name="silent-prometheus", prometheus_url=silent_url),
        "k8s": register(
            sim, name="silent-k8s", kubeconfig=kubeconfig_for(silent_url, str(tmp_path / "kubeconfig"))
        ),
    }
    env = app_env(database=database_url(), redis=redis_server.url, RCAWEB_SOURCE_TIMEOUT_S="1")
    worker = procs.add(start_worker("worker", env, tmp_path, concurrency=2))
    for cluster in clusters.values():
        send_task(redis_server.url, "collectors.tasks.sweep_inventory", cluster.name)
    pattern = re.compile(r"sweep_inventory\[[0-9a-f-]+\] succeeded in ([0-9.]+)s: (.*)")

    def first_runs() -> dict[str, tuple[float, str]] | None:
        """Each cluster's first finished sweep (a retry of the faster one may finish before the slower)."""
        runs: dict[str, tuple[float, str]] = {}
        for took, result in pattern.findall(worker.output()):
            name = re.search(r"'cluster': '([^']+)'", result)[1]
            runs.setdefault(name, (float(took), result))
        return runs if len(runs) == len(clusters) else None

    runs = wait_until(first_runs, 60, "both sweep tasks to finish on the worker")
    for hanging, cluster in clusters.items():
        took, result = runs[cluster.name]
        errors = list(
            SourceRun.objects.filter(cluster=cluster, ok=False).values_list(
                "source", "call", "error", "duration_ms"
            )
        )
        print(f"{hanging}: task took {took:.1f} s; failed calls: {errors}")
        assert errors and {source for source, *_ in errors} == {hanging}, errors
        assert all("did not answer within 1 s" in error for _, _, error, _ in errors), errors
        # Each silent call gave up after the timeout (plus scheduling noise), and so did the whole sweep.
        assert all(900 <= ms < 4000 for *_, ms in errors), errors
        assert took < 40  # generous for loaded CI machines: without timeouts it would never end
        assert re.search(r"'retry_in': [0-9.]+}$", result)  # and the task scheduled its retry
        versions = EntityVersion.objects.filter(entity__cluster=cluster)
        if hanging == "prometheus":
            assert SourceRun.objects.filter(cluster=cluster, ok=True, source="k8s", call="list pods").exists()
            assert versions.filter(kind="node", valid_to__isnull=True).count() == 3
            assert versions.filter(kind="job", valid_to__isnull=True).exists()
        else:
            assert SourceRun.objects.filter(cluster=cluster, ok=True, source="prometheus").exists()
            assert not versions.filter(kind="node").exists()  # nothing invented from silence
