"""A real Alertmanager (Debian's prometheus-alertmanager) delivers to rcaweb's intake: an alert posted to its
API (/api/v2/alerts, as Prometheus does) reaches the live webhook with the bearer token and opens an incident."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db.utils import OperationalError

from collectors.models import Cluster
from incidents.models import Alert, DiagnosisRun, IncidentSubject
from tests.incidents.fixtures.alertmanager import TOKEN, gpu_uuid, small_world
from tests.peers.promtools import Peer, free_port, get_json, need, running

pytestmark = [pytest.mark.peers, pytest.mark.django_db(transaction=True)]
DELIVERY_S = 60.0  # how long delivery may take before the test fails (not a speed assert)


def _config(tmp: Path, webhook: str, token_file: Path) -> Path:
    config = {
        "route": {
            "receiver": "rcaweb",
            "group_by": ["alertname", "cluster"],
            "group_wait": "1s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [
            {
                "name": "rcaweb",
                "webhook_configs": [
                    {
                        "url": webhook,
                        "send_resolved": True,
                        "max_alerts": 0,
                        # as deploy/alertmanager-receiver.yaml: the token from a file, sent as Bearer
                        "http_config": {
                            "authorization": {"type": "Bearer", "credentials_file": str(token_file)}
                        },
                    }
                ],
            }
        ],
    }
    path = tmp / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _post(url: str, alerts: list[dict[str, Any]]) -> int:
    req = urllib.request.Request(
        f"{url}/api/v2/alerts",
        data=json.dumps(alerts).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status


def _until(what: str, check: Any, peer: Peer) -> Any:
    """Poll ``check`` (a database read) until it returns something; the live server writes meanwhile, and
    SQLite's shared in-memory test database answers "table is locked" to a read during a write: retried."""
    deadline = time.monotonic() + DELIVERY_S
    while time.monotonic() < deadline:
        if peer.proc.poll() is not None:
            pytest.fail(f"alertmanager exited: {peer.log.read_text()[-3000:]}")
        try:
            found = check()
        except OperationalError as exc:
            if "locked" not in str(exc):
                raise
            found = None
        if found:
            return found
        time.sleep(0.25)
    pytest.fail(f"{what} within {DELIVERY_S:.0f} s; alertmanager log:\n{peer.log.read_text()[-3000:]}")


def test_an_alert_posted_to_real_alertmanager_opens_an_incident(live_server: Any, tmp_path: Path) -> None:
    binary = need("prometheus-alertmanager")
    cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai")
    now = datetime.now(UTC).replace(microsecond=0)
    small_world(cluster, now)
    token_file = tmp_path / "rcaweb-webhook-token"
    token_file.write_text(TOKEN)
    config = _config(tmp_path, f"{live_server.url}/api/v1/alerts/alertmanager", token_file)
    check = amtool_check(config)
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",  # no HA gossip: one instance
    ]
    log = tmp_path / "alertmanager.log"
    with running(argv, log) as proc:
        peer = Peer(url, proc, log)
        peer.wait(
            "alertmanager ready", lambda: urllib.request.urlopen(f"{url}/-/ready", timeout=2).status == 200
        )
        uuid = gpu_uuid("h100-02", 3)
        # The labels the shipped GPUXidError rule gives (deploy/prometheusrules.yaml), with Prometheus' external label.
        labels = {
            "alertname": "GPUXidError",
            "severity": "critical",
            "cluster": "gpu-prod",
            "Hostname": "h100-02",
            "gpu": "3",
            "UUID": uuid,
            "modelName": "NVIDIA H100 80GB HBM3",
            "xid": "79",
        }
        starts = now - timedelta(minutes=2)
        status = _post(
            url,
            [
                {
                    "labels": labels,
                    "annotations": {
                        "summary": "GPU Xid error",
                        "description": f"GPU 3 ({uuid}) on h100-02 reported Xid 79.",
                    },
                    "startsAt": starts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "generatorURL": "http://prometheus.gpu-prod:9090/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS",
                }
            ],
        )
        assert status == 200
        listed = get_json(f"{url}/api/v2/alerts")
        assert [a["labels"]["alertname"] for a in listed] == ["GPUXidError"]

        _until("the alert reached rcaweb", lambda: Alert.objects.filter(name="GPUXidError").exists(), peer)
        alert = _until(
            "the alert was grouped into an incident",
            lambda: (
                Alert.objects.filter(name="GPUXidError", incident__isnull=False)
                .select_related("incident")
                .first()
            ),
            peer,
        )
        incident = alert.incident
        # the live server goes on with evidence and diagnosis: wait for its end before reading more (and before
        # the test database is flushed under it)
        _until(
            "the incident was diagnosed",
            lambda: DiagnosisRun.objects.filter(incident=incident).exists(),
            peer,
        )
        assert alert.labels == labels  # Alertmanager adds nothing to the labels
        assert alert.receiver == "rcaweb"
        assert alert.group_key == '{}:{alertname="GPUXidError", cluster="gpu-prod"}'
        assert alert.starts_at == starts and alert.status == "firing"
        assert incident.cluster == cluster
        subjects = {
            str(s.entity)
            for s in IncidentSubject.objects.filter(incident=incident, role="subject").select_related(
                "entity"
            )
        }
        assert subjects == {f"gpu {uuid}", "node h100-02"}
        assert "GPU 3" in incident.title or "Xid" in incident.title
        log_text = log.read_text()
        # a refused delivery (wrong token: "unexpected status code 401") is logged as a failed notify
        assert "Notify for alerts failed" not in log_text and "level=error" not in log_text, log_text[-2000:]


def amtool_check(config: Path) -> subprocess.CompletedProcess:
    """amtool check-config, the same parser Alertmanager uses (fails on a config it would refuse)."""
    return subprocess.run(
        [need("amtool"), "check-config", str(config)], capture_output=True, text=True, timeout=60
    )
