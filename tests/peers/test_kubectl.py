"""The real kubectl against the simulated cluster, with the kubeconfig the simulator prints.

kubectl (client-go) sends the bearer token only over TLS, asks for server-side Tables, reads the node's
Lease for ``describe node``, reads the last terminated container's log of a crash-looping pod, and its
writes must be refused with a real 403 Status. Nothing here parses what the simulator means to say: only
what kubectl prints.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import IO

import pytest

from simulator.server import SimServer
from tests.collectors.simhelpers import small_world
from tests.peers.conftest import require_tool

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def kubectl_path() -> str:
    return require_tool("kubectl", "kubernetes-client")


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    world = small_world("kai")
    with SimServer(world) as server:
        server.advance_to(world.start + timedelta(hours=2))
        yield server


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kubectl-home")  # kubectl's discovery cache goes here, not in ~/.kube


def kubectl(
    path: str, sim: SimServer, home: Path, *args: str, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [path, "--kubeconfig", sim.kubeconfig_path, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    if check:
        assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {proc.stderr}"
    return proc


def table(text: str) -> tuple[list[str], list[list[str]]]:
    """kubectl's columns split at the header's column starts (cells may contain single spaces)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    header = lines[0]
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 2 : i] == "  ")]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    rows = [[ln[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)] for ln in lines[1:]]
    return names, rows


def crashing_pod(path: str, sim: SimServer, home: Path) -> str:
    pods = json.loads(kubectl(path, sim, home, "get", "pods", "-n", "nlp", "-o", "json").stdout)["items"]
    return next(p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith("crashy-"))


def test_get_nodes_wide_has_kubectls_columns(kubectl_path: str, sim: SimServer, home: Path) -> None:
    names, rows = table(kubectl(kubectl_path, sim, home, "get", "nodes", "-o", "wide").stdout)
    assert names == [
        "NAME", "STATUS", "ROLES", "AGE", "VERSION",
        "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME",
    ]  # fmt: skip
    by_name = {r[0]: dict(zip(names, r, strict=True)) for r in rows}
    assert sorted(by_name) == ["h100-01", "h100-02", "h100-03"]
    assert by_name["h100-03"]["STATUS"] == "Ready,SchedulingDisabled"  # cordoned at 1h30m
    assert by_name["h100-01"]["STATUS"] == "Ready"
    node = json.loads(kubectl(kubectl_path, sim, home, "get", "node", "h100-01", "-o", "json").stdout)
    internal = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    assert by_name["h100-01"]["INTERNAL-IP"] == internal
    assert by_name["h100-01"]["VERSION"] == node["status"]["nodeInfo"]["kubeletVersion"]
    assert by_name["h100-01"]["AGE"].endswith("d")  # nodes exist for days before the scenario starts
    names, _ = table(kubectl(kubectl_path, sim, home, "get", "nodes").stdout)
    assert names == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]


def test_get_pods_all_namespaces(kubectl_path: str, sim: SimServer, home: Path) -> None:
    names, rows = table(kubectl(kubectl_path, sim, home, "get", "pods", "-A").stdout)
    assert names == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    pods = {r[1]: dict(zip(names, r, strict=True)) for r in rows}
    crashy = next(p for name, p in pods.items() if name.startswith("crashy-"))
    assert (
        crashy["NAMESPACE"] == "nlp" and crashy["STATUS"] == "CrashLoopBackOff" and crashy["READY"] == "0/1"
    )
    assert crashy["RESTARTS"].split(" ")[0].isdigit() and crashy["RESTARTS"].endswith(" ago)")
    running = next(p for name, p in pods.items() if name.startswith("resnet-train-"))
    assert (running["STATUS"], running["READY"], running["RESTARTS"]) == ("Running", "1/1", "0")
    assert any(p["STATUS"] == "Pending" for p in pods.values())  # the gang that cannot fit
    names, rows = table(kubectl(kubectl_path, sim, home, "get", "pods", "-n", "vision", "-o", "wide").stdout)
    assert names == [
        "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES",
    ]  # fmt: skip
    assert all(r[6].startswith("h100-") for r in rows)


def test_get_jobs_and_the_scheduler_objects(kubectl_path: str, sim: SimServer, home: Path) -> None:
    names, rows = table(kubectl(kubectl_path, sim, home, "get", "jobs", "-A").stdout)
    assert names == ["NAMESPACE", "NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    jobs = {r[1]: r for r in rows}
    assert jobs["small"][2:4] == ["Complete", "1/1"] and jobs["resnet-train"][2] == "Running"
    names, rows = table(kubectl(kubectl_path, sim, home, "get", "queues.scheduling.run.ai").stdout)
    assert names == ["NAME", "PRIORITY", "PARENT", "CHILDREN", "DISPLAYNAME"]
    assert {r[0]: r[2] for r in rows}["vision"] == "default-parent-queue"
    names, rows = table(kubectl(kubectl_path, sim, home, "get", "podgroups", "-n", "nlp").stdout)
    assert names == ["NAME", "AGE"] and any(r[0].startswith("pg-crashy-") for r in rows)


def test_describe_node_reads_its_lease_and_pods(kubectl_path: str, sim: SimServer, home: Path) -> None:
    text = kubectl(kubectl_path, sim, home, "describe", "node", "h100-01").stdout
    assert "Lease:" in text and "HolderIdentity:  h100-01" in text and "RenewTime:" in text
    assert "Conditions:" in text and "KubeletReady" in text
    assert "Non-terminated Pods:" in text and crashing_pod(kubectl_path, sim, home) in text
    assert "nvidia.com/gpu" in text.split("Allocated resources:")[1]


def test_describe_pod_shows_the_crash_loop(kubectl_path: str, sim: SimServer, home: Path) -> None:
    name = crashing_pod(kubectl_path, sim, home)
    text = kubectl(kubectl_path, sim, home, "describe", "pod", "-n", "nlp", name).stdout
    assert "Controlled By:  Job/crashy" in text
    assert "Container ID:  containerd://" in text
    state = text.split("State:", 1)[1]
    assert (
        state.split("\n", 1)[0].strip() == "Waiting" and "CrashLoopBackOff" in state.split("Last State:")[0]
    )
    last = text.split("Last State:", 1)[1]
    assert last.split("\n", 1)[0].strip() == "Terminated" and "Exit Code:    1" in last
    assert "BackOff" in text.split("Events:", 1)[1]


def test_logs_of_a_crash_looping_pod_are_the_last_terminated_containers(
    kubectl_path: str, sim: SimServer, home: Path
) -> None:
    name = crashing_pod(kubectl_path, sim, home)
    current = kubectl(kubectl_path, sim, home, "logs", "-n", "nlp", name).stdout
    previous = kubectl(kubectl_path, sim, home, "logs", "-n", "nlp", name, "--previous").stdout
    assert "KeyError: 'lr'" in current and "KeyError: 'lr'" in previous
    tail = kubectl(kubectl_path, sim, home, "logs", "-n", "nlp", name, "--tail=1").stdout
    assert tail.count("\n") == 1
    pending = next(
        r[1]
        for r in table(kubectl(kubectl_path, sim, home, "get", "pods", "-A").stdout)[1]
        if r[3] == "Pending"
    )
    refused = kubectl(kubectl_path, sim, home, "logs", "-n", "nlp", pending, check=False)
    assert refused.returncode != 0 and "does not have a host assigned" in refused.stderr


def test_get_events(kubectl_path: str, sim: SimServer, home: Path) -> None:
    names, rows = table(kubectl(kubectl_path, sim, home, "get", "events", "-n", "nlp").stdout)
    assert names == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    backoff = [r for r in rows if r[2] == "BackOff"]
    assert backoff and backoff[0][1] == "Warning" and backoff[0][3].startswith("pod/crashy-")


def test_watch_sees_an_update(kubectl_path: str, sim: SimServer, home: Path) -> None:
    proc = subprocess.Popen(
        [kubectl_path, "--kubeconfig", sim.kubeconfig_path, "get", "pods", "-n", "nlp", "--watch",
         "--request-timeout=8s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        first = proc.stdout.readline()  # the header: the list arrived, the watch is open
        assert first.split()[:2] == ["NAME", "READY"], first
        initial = [proc.stdout.readline() for _ in range(3)]  # big-0, big-1, crashy-0
        crashy_before = next(ln for ln in initial if ln.startswith("crashy-")).split()
        time.sleep(1.0)
        sim.advance_to(sim.world.now + timedelta(minutes=20))  # the crash loop goes on: restarts, new states
        # Read until the update that shows the restart, not until kubectl's 8 s request timeout ends the watch
        # (without that update the stream ends there, and the assertions below fail on what arrived).
        out = "".join(
            read_lines_until(
                proc.stdout, lambda ln: ln.startswith("crashy-") and ln.split()[3] != crashy_before[3]
            )
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    err = proc.stderr.read()
    updates = [ln for ln in out.splitlines() if ln.strip()]
    assert any(ln.startswith("crashy-") for ln in updates), (initial, out, err)
    crashy_after = [ln.split() for ln in updates if ln.startswith("crashy-")][-1]
    assert crashy_after[3] != crashy_before[3], "the restart count moved on"


def read_lines_until(stream: IO[str], done: Callable[[str], bool], timeout_s: float = 30) -> list[str]:
    """Lines of ``stream`` up to and including the first that ``done`` accepts, or all of them until it ends
    (or ``timeout_s`` passes); a reader thread, so a stream that stays silent cannot block past the timeout."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, name="kubectl-watch", daemon=True).start()
    out: list[str] = []
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        out.append(line)
        if done(line):
            break
    return out


def test_writes_are_forbidden(kubectl_path: str, sim: SimServer, home: Path) -> None:
    name = crashing_pod(kubectl_path, sim, home)
    deleted = kubectl(kubectl_path, sim, home, "delete", "pod", "-n", "nlp", name, check=False)
    assert deleted.returncode != 0
    assert deleted.stderr.startswith("Error from server (Forbidden): ")
    assert f'pods "{name}" is forbidden: User "sim-reader" cannot delete resource "pods"' in deleted.stderr
    cordon = kubectl(kubectl_path, sim, home, "cordon", "h100-01", check=False)  # kubectl 1.32 exits 0 here
    assert 'nodes "h100-01" is forbidden' in cordon.stderr and "cannot patch" in cordon.stderr
    still = json.loads(kubectl(kubectl_path, sim, home, "get", "node", "h100-01", "-o", "json").stdout)
    assert not still["spec"].get("unschedulable")


def test_kueue_objects(kubectl_path: str, home: Path) -> None:
    world = small_world("kueue")
    with SimServer(world) as sim:
        sim.advance_to(world.start + timedelta(minutes=40))
        names, rows = table(kubectl(kubectl_path, sim, home, "get", "clusterqueues", "-o", "wide").stdout)
        assert names == ["NAME", "COHORT", "STRATEGY", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]
        assert {r[0] for r in rows} == {"vision", "nlp"} and all(r[2] == "BestEffortFIFO" for r in rows)
        names, _ = table(kubectl(kubectl_path, sim, home, "get", "localqueues", "-A").stdout)
        assert names == ["NAMESPACE", "NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]
        names, rows = table(kubectl(kubectl_path, sim, home, "get", "workloads", "-A").stdout)
        assert names == ["NAMESPACE", "NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"]
        assert any(r[4] == "True" for r in rows)
