"""The simulator's container series: kube-state-metrics' requests and cAdvisor's CPU and memory use."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta
from typing import Any

from simulator.engine.world import World
from simulator.server import SimServer
from tests.collectors.simhelpers import small_world


def get(sim: SimServer, path: str, **params: Any) -> tuple[int, Any]:
    url = f"{sim.prometheus_url}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url) as resp:
            body = resp.read().decode()
            return resp.status, json.loads(body) if path.startswith("/api/") else body
    except urllib.error.HTTPError as exc:
        body = exc.read().decode()
        return exc.code, json.loads(body) if path.startswith("/api/") else body


def query(sim: SimServer, promql: str, **params: Any) -> list[dict[str, Any]]:
    status, body = get(sim, "/api/v1/query", query=promql, **params)
    assert status == 200, body
    return body["data"]["result"]


def world_at(hours: float) -> World:
    world = small_world()
    world.advance_to(world.start + timedelta(hours=hours))
    return world


def test_it_serves_requests_for_every_pod_the_api_holds_with_a_node_once_bound() -> None:
    world = world_at(2)
    with SimServer(world) as sim:
        result = query(sim, 'kube_pod_container_resource_requests{resource="cpu"}')
    by_pod = {r["metric"]["pod"]: r for r in result}
    assert set(by_pod) == {p.name for p in world.pods.values()}
    for pod in world.pods.values():
        series = by_pod[pod.name]
        assert series["metric"]["unit"] == "core" and series["metric"]["job"] == "kube-state-metrics"
        assert float(series["value"][1]) == pod.cpu_millis / 1000
        assert series["metric"].get("node") == pod.node  # a pending pod has no node label at all


def test_it_serves_usage_only_while_a_container_runs_and_never_for_a_pending_pod() -> None:
    world = world_at(2)
    running = {
        p.name for p in world.pods.values() if p.phase == "Running" and "waiting" not in p.container_state
    }
    assert running and any(p.phase == "Pending" for p in world.pods.values())
    with SimServer(world) as sim:
        cpu = query(sim, 'rate(container_cpu_usage_seconds_total{container!=""}[10m])')
        memory = query(sim, 'container_memory_working_set_bytes{container="main"}')
        cgroups = query(sim, 'container_memory_working_set_bytes{container=""}')
    assert {r["metric"]["pod"] for r in cpu} == running
    assert {r["metric"]["pod"] for r in memory} == running
    assert {r["metric"]["pod"] for r in cgroups} == running  # the pod-level cgroup, without a container label
    for r in cpu:
        assert r["metric"]["job"] == "kubelet" and r["metric"]["metrics_path"] == "/metrics/cadvisor"
        pod = next(p for p in world.pods.values() if p.name == r["metric"]["pod"])
        assert r["metric"]["node"] == pod.node
        assert 0 < float(r["value"][1]) < pod.cpu_millis / 1000 * 1.2


def test_usage_differs_by_workload_and_some_use_little_of_what_they_ask() -> None:
    from simulator.prometheus.containers import profile

    world = world_at(1)
    fractions = {profile(seed, world.jobs["big"])[0] for seed in range(40)}
    assert len(fractions) == 40  # a job's CPU use depends on the world's seed, not a constant
    low = [seed for seed in range(200) if profile(seed, world.jobs["big"])[0] < 0.15]
    assert 20 < len(low) < 100  # about one job in four over-asks for CPU


def test_the_cpu_counter_only_grows_and_its_rate_matches_its_level() -> None:
    world = world_at(2)
    pod = next(p for p in world.pods.values() if p.job == "resnet-train")
    with SimServer(world) as sim:
        status, body = get(
            sim,
            "/api/v1/query_range",
            query=f'container_cpu_usage_seconds_total{{pod="{pod.name}",container="main"}}',
            start=(world.now - timedelta(hours=1)).timestamp(),
            end=world.now.timestamp(),
            step=60,
        )
    values = [float(v) for _, v in body["data"]["result"][0]["values"]]
    assert len(values) == 61 and all(b > a for a, b in zip(values, values[1:], strict=False))


def test_a_disabled_exporter_serves_no_series() -> None:
    world = world_at(1)
    with SimServer(world, disabled_metrics={"container_cpu_usage_seconds_total"}) as sim:
        assert query(sim, "container_cpu_usage_seconds_total") == []
        assert query(sim, "container_memory_working_set_bytes")
        _, names = get(sim, "/api/v1/label/__name__/values")
    assert "container_cpu_usage_seconds_total" not in names["data"]
    assert "kube_pod_container_resource_requests" in names["data"]


def test_the_kubelet_page_lists_running_containers_and_a_missing_node_is_404() -> None:
    world = world_at(2)
    pod = next(p for p in world.pods.values() if p.job == "resnet-train")
    with SimServer(world) as sim:
        status, text = get(sim, f"/nodes/{pod.node}/metrics/cadvisor")
        missing, _ = get(sim, "/nodes/nope/metrics/cadvisor")
    assert status == 200 and missing == 404
    assert "# TYPE container_cpu_usage_seconds_total counter" in text
    assert 'container="main",id="/kubepods.slice/' in text and f'pod="{pod.name}"' in text


def test_a_range_query_answers_what_instant_queries_at_its_steps_do() -> None:
    world = world_at(2)
    end = world.now.timestamp()
    with SimServer(world) as sim:
        for promql in (
            'rate(container_cpu_usage_seconds_total{container="main"}[10m])',
            "kube_pod_container_resource_requests",
            'max_over_time(container_memory_working_set_bytes{namespace="vision"}[15m])',
        ):
            _, body = get(sim, "/api/v1/query_range", query=promql, start=end - 3600, end=end, step=600)
            ranged = {
                (tuple(sorted(r["metric"].items())), ts): v
                for r in body["data"]["result"]
                for ts, v in r["values"]
            }
            instant = {
                (tuple(sorted(r["metric"].items())), r["value"][0]): r["value"][1]
                for step in range(7)
                for r in query(sim, promql, time=end - 3600 + step * 600)
            }
            assert ranged and ranged == instant, promql
