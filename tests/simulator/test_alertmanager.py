"""The Alertmanager sender: grouping, group_wait/group_interval/repeat_interval, resolve, retries, payload shape."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from simulator.alertmanager import AlertSender, fingerprint
from simulator.server import SimServer
from tests.simulator.test_api_kube import SmallWorld

T = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


def alert(name: str, node: str, starts: datetime = T, **extra: str) -> dict[str, Any]:
    return {
        "labels": {"alertname": name, "cluster": "gpu-prod", "severity": "critical", "node": node, **extra},
        "annotations": {"summary": f"{name} on {node}", "description": "x"},
        "startsAt": starts,
        "status": "firing",
    }


def run(
    sender: AlertSender, timeline: list[tuple[int, list[dict[str, Any]]]]
) -> list[tuple[int, dict[str, Any]]]:
    for minute, alerts in timeline:
        sender.tick(T + timedelta(minutes=minute), alerts)
    return [(int((at - T).total_seconds()), p) for at, p in sender.sent]


def test_it_groups_by_alertname_and_cluster_after_group_wait() -> None:
    got: list[dict[str, Any]] = []
    sender = AlertSender(sink=got.append)
    sent = run(
        sender,
        [
            (
                0,
                [
                    alert("NodeNotReady", "h100-01"),
                    alert("NodeNotReady", "h100-02"),
                    alert("GPUXidError", "h100-03"),
                ],
            ),
            (
                1,
                [
                    alert("NodeNotReady", "h100-01"),
                    alert("NodeNotReady", "h100-02"),
                    alert("GPUXidError", "h100-03"),
                ],
            ),
        ],
    )
    assert [s for s, _ in sent] == [30, 30]
    xid, nodes = (p for _, p in sent)
    assert nodes["groupKey"] == '{}:{alertname="NodeNotReady", cluster="gpu-prod"}'
    assert nodes["groupLabels"] == {"alertname": "NodeNotReady", "cluster": "gpu-prod"}
    assert [a["labels"]["node"] for a in nodes["alerts"]] == ["h100-01", "h100-02"]
    assert nodes["commonLabels"] == {
        "alertname": "NodeNotReady",
        "cluster": "gpu-prod",
        "severity": "critical",
    }
    assert nodes["commonAnnotations"] == {"description": "x"}
    assert (nodes["version"], nodes["status"], nodes["truncatedAlerts"], nodes["receiver"]) == (
        "4",
        "firing",
        0,
        "rcaweb",
    )
    first = nodes["alerts"][0]
    assert first["startsAt"] == "2026-11-29T03:00:00Z" and first["endsAt"] == "0001-01-01T00:00:00Z"
    assert first["fingerprint"] == fingerprint(first["labels"]) and len(first["fingerprint"]) == 16
    assert xid["alerts"][0]["labels"]["alertname"] == "GPUXidError"
    assert got == [p for _, p in sent]


def test_it_sends_new_alerts_at_group_interval_resolves_and_repeats() -> None:
    sender = AlertSender(sink=lambda p: None)
    a, b = alert("NodeNotReady", "h100-01"), alert("NodeNotReady", "h100-02", starts=T + timedelta(minutes=2))
    sent = run(
        sender,
        [
            (0, [a]),
            (1, [a]),
            (2, [a, b]),
            (4, [a, b]),
            (6, [a, b]),
            (8, [a]),
            (11, [a]),
            (300, [a]),
            (301, []),
        ],
    )
    times = [s for s, _ in sent]
    # 30 s group_wait; b joins -> next group_interval (330 s); b resolves -> 630 s; nothing new -> silent
    # until repeat_interval (4 h after 630 s); a clears -> resolved at the next interval
    assert times[:3] == [30, 330, 630]
    assert [a_["labels"]["node"] for a_ in sent[1][1]["alerts"]] == ["h100-01", "h100-02"]
    resolved = [x for x in sent[2][1]["alerts"] if x["status"] == "resolved"]
    assert [x["labels"]["node"] for x in resolved] == ["h100-02"] and resolved[0][
        "endsAt"
    ] != "0001-01-01T00:00:00Z"
    assert sent[2][1]["status"] == "firing"  # the group still has a firing alert
    assert times[3] == 630 + 4 * 3600  # repeat_interval
    assert sent[4][1]["status"] == "resolved" and sent[4][1]["alerts"][0]["status"] == "resolved"
    assert not sender.groups


def test_it_posts_with_the_bearer_token_and_retries_on_5xx() -> None:
    received: list[tuple[str, dict[str, Any]]] = []
    answers = [503, 200]

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append((self.headers["Authorization"], body))
            self.send_response(answers.pop(0))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        sender = AlertSender(
            f"http://127.0.0.1:{httpd.server_address[1]}/api/v1/alerts/alertmanager", "s3cret", backoff_s=0.01
        )
        run(sender, [(0, [alert("GPUXidError", "h100-01")]), (1, [alert("GPUXidError", "h100-01")])])
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert [auth for auth, _ in received] == ["Bearer s3cret", "Bearer s3cret"]
    assert received[0][1] == received[1][1] and not sender.failures


def test_it_runs_after_each_advance_of_the_sim_server() -> None:
    world = SmallWorld()
    got: list[dict[str, Any]] = []
    world.alert_list = [alert("GPUJobPendingTooLong", "h100-01", starts=world.now, job_name="resnet-train")]
    with SimServer(world, alert_sink=got.append) as sim:
        assert sim.advance_to(world.now + timedelta(seconds=10)) == []
        sim.advance_to(world.now + timedelta(minutes=1))
    assert [p["alerts"][0]["labels"]["job_name"] for p in got] == ["resnet-train"]
    assert got[0]["alerts"][0]["generatorURL"].startswith(
        "http://prometheus.gpu-prod.sim:9090/graph?g0.expr="
    )
    assert got[0]["externalURL"] == "http://alertmanager.gpu-prod.sim:9093"
