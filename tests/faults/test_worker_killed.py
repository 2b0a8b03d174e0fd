"""A Celery worker killed in the middle of evidence collection.

Injects: ``collect_evidence`` runs on a real ``celery -A rcaweb worker`` (prefork); a Prometheus on loopback
answers the first DCGM query and holds the second one open, so the task is provably in flight; then the
worker's whole process group gets SIGKILL (no warm shutdown, no ack, no requeue by the dying process, as an
OOM kill or a lost node). A new worker starts.
Must hold: the broker redelivers the unacked task (acks_late + a short ``visibility_timeout``), the new
worker reruns it to the end, and the incident ends with exactly the observations an uninterrupted run
writes: same facts, same contents, none twice.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock
from urllib.parse import parse_qs, urlparse

import pytest
from django.utils import timezone

from collectors.models import Cluster
from incidents import evidence
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, Incident, Observation
from tests.faults.services import app_env, broker_idle, database_url, send_task, start_worker, wait_until
from tests.incidents.fixtures.alertmanager import alert, gpu_uuid, payload, small_world

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        os.environ.get("RCAWEB_SERVICES_TESTS") != "1",
        reason="real PostgreSQL/Redis/Celery tests run in CI's second pass (.ci/run)",
    ),
]

SLOW_METRIC = "DCGM_FI_DEV_GPU_TEMP"  # the second of incidents.telemetry.METRICS: one query already answered


class Prometheus:
    """``/api/v1/query_range`` with fixed points for every GPU UUID in the selector; the first query for
    ``SLOW_METRIC`` is held open until ``release`` (the worker is killed meanwhile)."""

    def __init__(self, t0_epoch: float) -> None:
        self.calls: Counter[str] = Counter()
        self.held = threading.Event()
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query).get("query", [""])[0]
                metric = query.split("{", 1)[0]
                server.calls[metric] += 1
                if metric == SLOW_METRIC and server.calls[metric] == 1:
                    server.held.set()
                    server.release.wait(60)
                uuids = re.findall(r"GPU-[0-9a-f-]+", query)
                result = [
                    {
                        "metric": {"__name__": metric, "UUID": u, "Hostname": "h100-01", "gpu": str(i)},
                        "values": [[t0_epoch + 60 * m, str(70 + i + m % 5)] for m in range(-10, 10)],
                    }
                    for i, u in enumerate(uuids)
                ]
                body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body.encode())
                except OSError:  # the worker that asked is dead
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def prometheus(postgres) -> Iterator[Prometheus]:  # type: ignore[no-untyped-def]
    server = Prometheus((timezone.now() - timedelta(minutes=30)).timestamp() // 60 * 60)
    yield server
    server.stop()


def facts(incident: Incident) -> list[tuple]:
    """What an operator sees of each observation (not when it was collected)."""
    return sorted(
        Observation.objects.filter(incident=incident).values_list(
            "dedup_key", "kind", "source", "locator", "entity_id", "content", "error", "summary"
        ),
        key=lambda row: row[0],
    )


def test_it_reruns_evidence_collection_killed_mid_way_and_writes_each_fact_once(
    redis_server, procs, prometheus, tmp_path
):
    t0 = timezone.now().replace(microsecond=0) - timedelta(minutes=30)
    cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai", prometheus_url=prometheus.url)
    small_world(cluster, t0)
    uuid = gpu_uuid("h100-01", 3)
    body = alert("GPUXidError", {"cluster": "gpu-prod", "UUID": uuid, "Hostname": "h100-01", "xid": "79"}, t0)
    # Grouped here, inline; only the evidence collection goes to the worker.
    with mock.patch("incidents.intake.enqueue_processing"):
        ingest_alertmanager(payload([body]))
    incident = group_alert(Alert.objects.get())
    Alert.objects.update(processed_at=timezone.now())
    Incident.objects.filter(pk=incident.pk).update(collection_state="pending")

    env = app_env(database=database_url(), redis=redis_server.url, RCAWEB_BROKER_VISIBILITY_TIMEOUT_S="3")
    first = procs.add(start_worker("worker-1", env, tmp_path))
    send_task(redis_server.url, "incidents.tasks.collect_evidence", incident.pk)
    assert prometheus.held.wait(30), "the worker never queried Prometheus"
    assert Incident.objects.get(pk=incident.pk).collection_state == "running"  # in flight
    first.kill()
    prometheus.release.set()
    assert not first.alive()
    assert not Observation.objects.filter(incident=incident).exists()  # the killed run saved nothing

    second = procs.add(start_worker("worker-2", env, tmp_path))
    wait_until(
        lambda: (
            broker_idle(redis_server.url)
            and Incident.objects.filter(
                pk=incident.pk, collection_state="done", diagnosed_at__isnull=False
            ).exists()
        ),
        30,
        "the redelivered collection (and its diagnosis) to finish on the new worker",
    )
    assert prometheus.calls[SLOW_METRIC] >= 2  # asked again: the task reran from the start
    assert "collect_evidence" in second.output().split(" ready.", 1)[1]
    after_rerun = facts(incident)
    keys = [row[0] for row in after_rerun]
    assert len(keys) == len(set(keys))
    kinds = Counter(row[1] for row in after_rerun)
    assert kinds["dcgm_series"] >= 7 and kinds["alert"] == 1 and kinds["gpu_state"] >= 1, kinds
    assert not [row for row in after_rerun if row[6]], "no source errors in either run"
    second.stop()

    # The reference: the same incident collected from scratch without interruption (in this process).
    Observation.objects.filter(incident=incident).delete()
    evidence.collect_evidence(incident.pk)
    assert facts(incident) == after_rerun
