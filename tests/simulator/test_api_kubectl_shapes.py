"""What kubectl needs from the simulated API server, checked without kubectl (tests/peers runs the real one):
server-side Tables, node Leases, the crash-looping pod's log and container IDs, HTTPS with the CA in the
kubeconfig, and the live clock."""

from __future__ import annotations

import base64
import io
import json
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from simulator.apiserver.tables import wants_table
from simulator.durations import human as human_duration
from simulator.server import SimServer, serve_scenario
from tests.collectors.simhelpers import SMALL, small_world

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    world = small_world("kai")
    with SimServer(world) as server:
        server.advance_to(world.start + timedelta(hours=2))
        yield server


def get(server: SimServer, path: str, accept: str = "application/json") -> Any:
    req = urllib.request.Request(
        server.kube_url + path, headers={"Authorization": f"Bearer {server.kube_token}", "Accept": accept}
    )
    with urllib.request.urlopen(req, context=server.kube_tls.client_context(), timeout=10) as resp:
        body = resp.read()
    return (
        [json.loads(line) for line in body.splitlines() if line.strip()]
        if "watch=" in path
        else json.loads(body)
    )


def test_the_api_is_https_with_the_ca_in_the_kubeconfig(sim: SimServer) -> None:
    assert sim.kube_url.startswith("https://127.0.0.1:")
    kubeconfig = yaml.safe_load(Path(sim.kubeconfig_path).read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    assert cluster["server"] == sim.kube_url
    assert base64.b64decode(cluster["certificate-authority-data"]) == Path(sim.kube_ca_path).read_bytes()
    # the official client verifies the certificate against that CA (no insecure-skip-tls-verify)
    api = config.new_client_from_config(config_file=sim.kubeconfig_path)
    assert api.configuration.verify_ssl is True
    assert len(client.CoreV1Api(api).list_node().items) == 3
    with pytest.raises(urllib.error.URLError) as exc:  # a client that does not trust the CA
        urllib.request.urlopen(sim.kube_url + "/version", context=ssl.create_default_context(), timeout=5)
    assert "CERTIFICATE_VERIFY_FAILED" in str(exc.value)


def test_accept_negotiation_follows_the_header_order() -> None:
    assert wants_table(TABLE) == "v1"
    assert wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json") == "v1beta1"
    assert wants_table("application/json") is None and wants_table(None) is None
    assert wants_table("application/json, application/json;as=Table;v=v1;g=meta.k8s.io") is None
    assert wants_table("application/json;as=Table;v=v2;g=meta.k8s.io,application/json") is None


def test_node_table(sim: SimServer) -> None:
    body = get(sim, "/api/v1/nodes", TABLE)
    assert (body["kind"], body["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    columns = [(c["name"], c["priority"]) for c in body["columnDefinitions"]]
    assert columns == [
        ("Name", 0), ("Status", 0), ("Roles", 0), ("Age", 0), ("Version", 0), ("Internal-IP", 1),
        ("External-IP", 1), ("OS-Image", 1), ("Kernel-Version", 1), ("Container-Runtime", 1),
    ]  # fmt: skip
    assert body["metadata"]["resourceVersion"] == str(sim.store.rv)
    rows = {r["cells"][0]: r for r in body["rows"]}
    assert (
        rows["h100-03"]["cells"][1] == "Ready,SchedulingDisabled" and rows["h100-01"]["cells"][1] == "Ready"
    )
    nodes = {n["metadata"]["name"]: n for n in get(sim, "/api/v1/nodes")["items"]}
    address = next(a["address"] for a in nodes["h100-01"]["status"]["addresses"] if a["type"] == "InternalIP")
    assert rows["h100-01"]["cells"][5] == address and rows["h100-01"]["cells"][6] == "<none>"
    created = datetime.fromisoformat(nodes["h100-01"]["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    assert rows["h100-01"]["cells"][3] == human_duration((sim.world.now - created).total_seconds())
    embedded = rows["h100-01"]["object"]
    assert embedded["kind"] == "PartialObjectMetadata" and embedded["metadata"]["name"] == "h100-01"
    assert "managedFields" not in embedded["metadata"] and embedded["metadata"]["labels"]


def test_table_options_single_get_pages_and_versions(sim: SimServer) -> None:
    none = get(sim, "/api/v1/nodes?includeObject=None", TABLE)
    assert all("object" not in r for r in none["rows"])
    full = get(sim, "/api/v1/nodes?includeObject=Object", TABLE)
    assert full["rows"][0]["object"]["kind"] == "Node" and "status" in full["rows"][0]["object"]
    one = get(sim, "/api/v1/nodes/h100-02", TABLE)
    assert one["kind"] == "Table" and [r["cells"][0] for r in one["rows"]] == ["h100-02"]
    page = get(sim, "/api/v1/nodes?limit=2", TABLE)
    assert len(page["rows"]) == 2 and page["metadata"]["continue"]
    beta = get(sim, "/api/v1/nodes", "application/json;as=Table;v=v1beta1;g=meta.k8s.io")
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1"
    assert beta["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    assert get(sim, "/api/v1/nodes")["kind"] == "NodeList"  # plain JSON when the client does not ask


def test_pod_event_and_job_tables(sim: SimServer) -> None:
    pods = get(sim, "/api/v1/namespaces/nlp/pods", TABLE)
    assert [c["name"] for c in pods["columnDefinitions"]][:5] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
    ]
    crashy = next(r["cells"] for r in pods["rows"] if r["cells"][0].startswith("crashy-"))
    assert crashy[1] == "0/1" and crashy[2] == "CrashLoopBackOff"
    count, _, ago = crashy[3].partition(" ")
    assert int(count) > 0 and ago.startswith("(") and ago.endswith(" ago)")
    assert crashy[6] == "h100-01" or crashy[6].startswith("h100-")
    pending = next(r["cells"] for r in pods["rows"] if r["cells"][0].startswith("big-"))
    assert pending[1:4] == ["0/1", "Pending", "0"] and pending[5:7] == ["<none>", "<none>"]
    events = get(sim, "/api/v1/namespaces/nlp/events", TABLE)
    assert [c["name"] for c in events["columnDefinitions"] if c["priority"] == 0] == [
        "Last Seen", "Type", "Reason", "Object", "Message",
    ]  # fmt: skip
    backoff = next(r["cells"] for r in events["rows"] if r["cells"][2] == "BackOff")
    assert (
        backoff[1] == "Warning"
        and backoff[3].startswith("pod/crashy-")
        and backoff[5].startswith("kubelet, ")
    )
    jobs = {r["cells"][0]: r["cells"] for r in get(sim, "/apis/batch/v1/jobs", TABLE)["rows"]}
    assert jobs["small"][1:3] == ["Complete", "1/1"] and jobs["small"][3] == "30m"
    assert jobs["big"][1:4] == ["Running", "0/2", ""]  # never started: no duration
    assert jobs["small"][7].startswith("batch.kubernetes.io/controller-uid=")


def test_custom_resource_tables_use_the_crds_printer_columns(sim: SimServer) -> None:
    queues = get(sim, "/apis/scheduling.run.ai/v2/queues", TABLE)
    assert [c["name"] for c in queues["columnDefinitions"]] == [
        "Name",
        "Priority",
        "Parent",
        "Children",
        "DisplayName",
    ]
    rows = {r["cells"][0]: r["cells"] for r in queues["rows"]}
    assert rows["vision"][2] == "default-parent-queue" and rows["vision"][4] is None
    assert json.loads(rows["default-parent-queue"][3]) == ["nlp", "vision"]
    groups = get(sim, "/apis/scheduling.run.ai/v2alpha2/namespaces/nlp/podgroups", TABLE)
    assert [c["name"] for c in groups["columnDefinitions"]] == ["Name", "Age"]
    world = small_world("kueue")
    with SimServer(world) as kueue:
        kueue.advance_to(world.start + timedelta(minutes=40))
        workloads = get(kueue, "/apis/kueue.x-k8s.io/v1beta1/workloads", TABLE)
        names = [c["name"] for c in workloads["columnDefinitions"]]
        assert names == ["Name", "Queue", "Reserved in", "Admitted", "Finished", "Age"]
        rows = {r["cells"][0].split("-")[1]: r["cells"] for r in workloads["rows"]}
        assert rows["small"][1:4] == ["vision", "vision", "True"] and rows["big"][2:4] == [None, None]
        cqs = get(kueue, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues", TABLE)
        assert [(c["name"], c["priority"]) for c in cqs["columnDefinitions"]][1:3] == [
            ("Cohort", 0),
            ("Strategy", 1),
        ]


def test_a_watch_streams_single_row_tables(sim: SimServer) -> None:
    events = get(sim, "/api/v1/namespaces/vision/pods?watch=1&timeoutSeconds=1", TABLE)
    assert events and all(e["type"] == "ADDED" and e["object"]["kind"] == "Table" for e in events)
    assert all(len(e["object"]["rows"]) == 1 for e in events)


def test_human_duration_rounds_like_apimachinery() -> None:
    cases = {
        -2: "<invalid>", -1: "0s", 0: "0s", 59: "59s", 119: "119s", 120: "2m", 125: "2m5s", 599: "9m59s",
        600: "10m", 10799: "179m", 10800: "3h", 11100: "3h5m", 28800: "8h", 47 * 3600: "47h", 48 * 3600: "2d",
        50 * 3600: "2d2h", 8 * 86400: "8d", 729 * 86400: "729d", 730 * 86400: "2y", 731 * 86400: "2y1d",
        8 * 365 * 86400: "8y",
    }  # fmt: skip
    assert {s: human_duration(s) for s in cases} == cases


def test_node_leases_for_describe_node(sim: SimServer) -> None:
    api = config.new_client_from_config(config_file=sim.kubeconfig_path)
    leases = client.CoordinationV1Api(api).list_namespaced_lease("kube-node-lease").items
    assert sorted(lease.metadata.name for lease in leases) == ["h100-01", "h100-02", "h100-03"]
    lease = client.CoordinationV1Api(api).read_namespaced_lease("h100-01", "kube-node-lease")
    assert lease.spec.holder_identity == "h100-01" and lease.spec.lease_duration_seconds == 40
    assert sim.world.now - timedelta(seconds=10) < lease.spec.renew_time <= sim.world.now
    assert lease.metadata.owner_references[0].kind == "Node"
    names = [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
    assert "kube-node-lease" in names
    watch = get(
        sim, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=1&timeoutSeconds=1"
    )
    assert [e["type"] for e in watch] == ["ADDED"] * 3


def test_a_crash_looping_pods_log_and_container_ids(sim: SimServer) -> None:
    core = client.CoreV1Api(config.new_client_from_config(config_file=sim.kubeconfig_path))
    pod = next(p for p in core.list_namespaced_pod("nlp").items if p.metadata.name.startswith("crashy-"))
    status = pod.status.container_statuses[0]
    assert status.state.waiting.reason == "CrashLoopBackOff"
    assert status.last_state.terminated.container_id.startswith("containerd://")
    assert status.container_id == status.last_state.terminated.container_id  # the container that died
    current = core.read_namespaced_pod_log(pod.metadata.name, "nlp")
    assert "KeyError: 'lr'" in current
    assert current == core.read_namespaced_pod_log(pod.metadata.name, "nlp", previous=True)
    running = next(p for p in core.list_namespaced_pod("vision").items if p.status.phase == "Running")
    assert running.status.container_statuses[0].container_id.startswith("containerd://")
    assert running.status.container_statuses[0].state.running is not None


def test_a_restarted_container_has_a_new_id_and_the_last_one_in_last_state() -> None:
    world = small_world("kai")
    with SimServer(world) as server:
        core = client.CoreV1Api(config.new_client_from_config(config_file=server.kubeconfig_path))
        seen: dict[str, tuple[str, str | None]] = {}
        t = world.start + timedelta(minutes=6)
        while t < world.start + timedelta(hours=1) and "running" not in seen:
            server.advance_to(t)
            pod = next(
                p for p in core.list_namespaced_pod("nlp").items if p.metadata.name.startswith("crashy-")
            )
            cs = pod.status.container_statuses[0] if pod.status.container_statuses else None
            if cs is not None and cs.restart_count > 0 and cs.state.running is not None:
                seen["running"] = (cs.container_id, cs.last_state.terminated.container_id)
            t += timedelta(seconds=20)
    assert "running" in seen, "the crash loop restarted its container within the hour"
    current, previous = seen["running"]
    assert current and previous and current != previous


def test_realtime_follows_the_anchor() -> None:
    world = small_world("kai")
    with SimServer(world) as server:
        start = world.now
        stop = threading.Event()
        # anchored an hour ago: the world is due at start + 1 h, past `until`, so it goes there at once
        thread = threading.Thread(
            target=server.run_realtime,
            kwargs={
                "speed": 1.0,
                "until": start + timedelta(minutes=30),
                "stop": stop,
                "anchor": datetime.now(UTC) - timedelta(hours=1),
            },
        )
        thread.start()
        thread.join(timeout=60)
        stop.set()
        assert world.now == start + timedelta(minutes=30)


@pytest.mark.parametrize("keep_start", [False, True])
def test_simulate_starts_the_scenario_at_the_wall_clock(tmp_path: Path, keep_start: bool) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL.format(scheduler="kai", labels="classic"))
    out, stop = io.StringIO(), threading.Event()
    stop.set()  # serve, print, return
    before = datetime.now(UTC).replace(microsecond=0)
    serve_scenario(str(path), out=out, stop=stop, keep_start=keep_start)
    text = out.getvalue()
    assert "kube CA:    " in text and "kubernetes: https://127.0.0.1:" in text
    started = datetime.fromisoformat(text.split(" from ", 1)[1].split(" ", 1)[0].replace("Z", "+00:00"))
    if keep_start:
        assert started == datetime(2026, 11, 29, tzinfo=UTC)  # the file's start: a replay
    else:
        assert before <= started <= datetime.now(UTC)
