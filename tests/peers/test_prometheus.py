"""A real Prometheus (Debian's /usr/bin/prometheus) scrapes the simulator with the scrape config
`manage.py simulate` prints; its answers equal the simulator's own Prometheus API, and rcaweb's
collectors record the same GPUs through either.

The world stands still while Prometheus scrapes (every second): the exposition is the world at
``world.now``, so a real instant query at wall-clock time and the simulator's at ``world.now`` read
the same samples, and range functions whose window holds one simulated scrape (30 s) agree too.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from collectors import inventory
from collectors.models import Cluster
from collectors.sources import promql
from collectors.sources.prometheus import PrometheusSource
from collectors.sweep import sweep_cluster
from simulator.engine.world import World
from simulator.scenario import load_scenario
from simulator.server import SimServer
from tests.peers.promtools import get_json, need, prometheus

pytestmark = pytest.mark.peers

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "simulator" / "scenarios" / "node-not-ready.yaml"
RULES = ROOT / "deploy" / "prometheusrules.yaml"
SCRAPE_S = 1


def _world() -> World:
    """node-not-ready, scraped as by a ServiceMonitor, plus a GPU that fell off the bus: at 50 min h100-02 is
    NotReady (its exporter down) and h100-01's GPU 3 has vanished (Xid 79)."""
    text = SCENARIO.read_text()
    text = text.replace(
        "cluster:\n  name: gpu-prod\n", "cluster:\n  name: gpu-prod\n  dcgm_labels: scraped\n"
    )
    text = text.replace("events:\n", "events:\n  - {at: 30m, xid: {node: h100-01, gpu: 3, code: 79}}\n")
    # a workload on h100-01, so that GPUs carry exported_pod (the gang then waits all along: it does not matter here)
    text = text.replace(
        "jobs:\n",
        "jobs:\n  - {name: notebook, project: vision, submit: 1m, pods: 1, gpus_per_pod: 4, sm_activity: 0.05}\n",
    )
    assert "dcgm_labels: scraped" in text and "code: 79" in text and "name: notebook" in text
    world = World.from_scenario(load_scenario(text))
    world.advance_to(world.start + timedelta(minutes=50))
    return world


class Scraped:
    def __init__(self, world: World, sim: SimServer, url: str) -> None:
        self.world, self.sim, self.url = world, sim, url

    def real(self, query: str) -> dict[str, Any]:
        return get_json(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': query})}")["data"]

    def simulated(self, query: str) -> dict[str, Any]:
        params = urllib.parse.urlencode({"query": query, "time": self.world.now.timestamp()})
        return get_json(f"{self.sim.prometheus_url}/api/v1/query?{params}")["data"]


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    need("prometheus")
    world = _world()
    work = tmp_path_factory.mktemp("prometheus")
    with SimServer(world) as sim:
        config = Path(sim.write_scrape_config(str(work / "prometheus.yml"), scrape_interval_s=SCRAPE_S))
        # and the shipped rules, evaluated every second over what the real scrapes store
        crd = yaml.safe_load(RULES.read_text())
        (work / "rcaweb-gpu.rules.yaml").write_text(yaml.safe_dump({"groups": crd["spec"]["groups"]}))
        loaded = yaml.safe_load(config.read_text())
        loaded["rule_files"] = [str(work / "rcaweb-gpu.rules.yaml")]
        config.write_text(yaml.safe_dump(loaded, sort_keys=False))
        with prometheus(config, work) as peer:
            targets = 1 + 2 * len(world.nodes)  # every node's exporter and kubelet, and kube-state-metrics
            query = urllib.parse.quote("count_over_time(up[1m]) >= 3")

            def scraped_three_times() -> bool:
                return len(get_json(f"{peer.url}/api/v1/query?query={query}")["data"]["result"]) == targets

            peer.wait("every target scraped three times", scraped_three_times)
            seen: set[str] = set()

            def rules_evaluated_twice_since() -> bool:
                (group,) = get_json(f"{peer.url}/api/v1/rules")["data"]["groups"]
                assert all(r["health"] == "ok" for r in group["rules"]), group["rules"]
                seen.add(group["lastEvaluation"])
                return len(seen) >= 3

            peer.wait("the shipped rules evaluated over the scraped series", rules_evaluated_twice_since)
            yield Scraped(world, sim, peer.url)


def _normal(data: dict[str, Any]) -> list[tuple[tuple[tuple[str, str], ...], float]]:
    assert data["resultType"] == "vector", data
    return sorted((tuple(sorted(r["metric"].items())), float(r["value"][1])) for r in data["result"])


def _same(real: list, simulated: list) -> bool:
    if [labels for labels, _ in real] != [labels for labels, _ in simulated]:
        return False
    return all(
        math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        for (_, a), (_, b) in zip(real, simulated, strict=True)
    )


QUERIES = [
    "DCGM_FI_DEV_GPU_UTIL",
    'DCGM_FI_DEV_GPU_TEMP{Hostname="h100-01"}',
    'DCGM_FI_PROF_SM_ACTIVE{exported_pod!=""}',
    "last_over_time(DCGM_FI_DEV_FB_USED[2m])",
    "avg_over_time(DCGM_FI_DEV_POWER_USAGE[30s])",
    "max_over_time(DCGM_FI_DEV_GPU_TEMP[30s])",
    "rate(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[1m])",
    "max by (Hostname) (DCGM_FI_DEV_POWER_USAGE)",
    "count by (Hostname, exported_namespace) (DCGM_FI_DEV_GPU_TEMP)",
    "sum(DCGM_FI_DEV_FB_USED)",
    "DCGM_FI_DEV_GPU_TEMP >= 30",
    "DCGM_FI_DEV_XID_ERRORS",
    'up{job="dcgm-exporter"}',
    # cAdvisor through the kubelets and kube-state-metrics' requests (collectors/usage.py reads them)
    'up{job="kubelet"}',
    "container_cpu_usage_seconds_total",
    'container_memory_working_set_bytes{container!=""}',
    'kube_pod_container_resource_requests{resource=~"cpu|memory"}',
    'sum by (namespace, pod) (container_memory_working_set_bytes{container!=""})',
    *(q for q in promql.all_queries().values() if q.startswith("last_over_time(")),
]
# rcaweb's other queries average windows longer than one simulated scrape: the simulator has a history the
# frozen world's real scrapes do not, so only the series (their label sets) must agree.
SERIES_ONLY = [q for q in promql.all_queries().values() if not q.startswith("last_over_time(")]


@pytest.mark.parametrize("query", QUERIES)
def test_real_prometheus_answers_as_the_simulator_does(scraped: Scraped, query: str) -> None:
    real, simulated = _normal(scraped.real(query)), _normal(scraped.simulated(query))
    assert simulated or query.startswith("DCGM_FI_DEV_XID_ERRORS"), f"{query}: the simulator answered nothing"
    assert _same(real, simulated), f"{query}\nreal:      {real}\nsimulated: {simulated}"


@pytest.mark.parametrize("query", SERIES_ONLY)
def test_real_prometheus_has_the_series_the_simulator_has(scraped: Scraped, query: str) -> None:
    real, simulated = _normal(scraped.real(query)), _normal(scraped.simulated(query))
    assert simulated, f"{query}: the simulator answered nothing"
    assert [labels for labels, _ in real] == [labels for labels, _ in simulated], query


def test_the_not_ready_nodes_exporter_is_down_and_the_vanished_gpu_absent(scraped: Scraped) -> None:
    targets = get_json(f"{scraped.url}/api/v1/targets")["data"]["activeTargets"]
    by_path = {t["discoveredLabels"]["__metrics_path__"]: t for t in targets}
    down = by_path["/nodes/h100-02/metrics"]
    assert down["health"] == "down" and "503" in down["lastError"]
    assert by_path["/nodes/h100-01/metrics"]["health"] == "up"
    assert by_path["/kube-state-metrics/metrics"]["health"] == "up"
    gpus = {
        dict(labels)["gpu"] for labels, _ in _normal(scraped.real('DCGM_FI_DEV_GPU_TEMP{Hostname="h100-01"}'))
    }
    assert gpus == {"0", "1", "2", "4", "5", "6", "7"}
    assert _normal(scraped.real('DCGM_FI_DEV_GPU_TEMP{Hostname="h100-02"}')) == []


def test_scraped_labels_name_the_exporter_pod_and_the_workload_apart(scraped: Scraped) -> None:
    series = scraped.real('DCGM_FI_DEV_GPU_UTIL{Hostname="h100-01"}')["result"]
    assert series
    for s in series:
        labels = s["metric"]
        assert labels["namespace"] == "gpu-operator" and labels["pod"].startswith("nvidia-dcgm-exporter-")
        assert labels["container"] == "nvidia-dcgm-exporter" and labels["job"] == "dcgm-exporter"
        assert "pod" not in {k for k in labels if k.startswith("exported_") and not labels[k]}
    held = [s["metric"] for s in scraped.real('DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}')["result"]]
    want = {
        f"{p.namespace}/{p.name}"
        for p in scraped.world.pods.values()
        if p.node == "h100-01" and p.phase == "Running"
    }
    assert {f"{m['exported_namespace']}/{m['exported_pod']}" for m in held} == want


def test_kube_state_metrics_series_arrive_for_the_rules(scraped: Scraped) -> None:
    cap = _normal(scraped.real('kube_node_status_capacity{resource="nvidia_com_gpu"}'))
    assert {dict(labels)["node"]: v for labels, v in cap} == {
        n.name: float(n.capacity_gpus) for n in scraped.world.nodes.values()
    }
    ready = _normal(scraped.real('kube_node_status_condition{condition="Ready",status="true"} == 0'))
    assert [dict(labels)["node"] for labels, _ in ready] == ["h100-02"]


def test_the_shipped_rules_on_real_scrapes_flag_the_workloads_gpus_not_the_exporters(
    scraped: Scraped,
) -> None:
    """The flood of issue 16: on a ServiceMonitor scrape every series has the exporter's pod label. The shipped
    GPUIdleAllocated must be pending for exactly the GPUs an idle workload holds, naming the workload."""
    world = scraped.world
    idle = set()
    for node in world.nodes.values():
        for gpu in node.gpus:
            sm = world.gpu_metric(node.name, gpu.index, "DCGM_FI_PROF_SM_ACTIVE")
            if node.ready and gpu.present and gpu.pod and sm is not None and sm < 0.1:
                idle.add((gpu.uuid, gpu.pod))
    assert len(idle) == 3  # the notebook holds four GPUs; one of them fell off the bus

    def alerts(name: str) -> list[dict[str, str]]:
        return [r["metric"] for r in scraped.real(f'ALERTS{{alertname="{name}"}}')["result"]]

    got = {(m["UUID"], f"{m['exported_namespace']}/{m['exported_pod']}") for m in alerts("GPUIdleAllocated")}
    assert got == idle
    for m in alerts("GPUIdleAllocated"):
        assert "pod" not in m and "namespace" not in m and m["alertstate"] == "pending"
    assert [m["node"] for m in alerts("NodeNotReady")] == ["h100-02"]
    assert [(m["namespace"], m["job_name"]) for m in alerts("GPUJobPendingTooLong")] == [
        ("vision", "vit-train")
    ]
    # a down node's GPUs are not "missing"; nothing vanished while this Prometheus watched
    assert alerts("GPUMissing") == [] and alerts("GPUXidError") == [] and alerts("PodCrashLooping") == []


@pytest.mark.django_db
def test_rcaweb_records_the_same_gpus_through_real_prometheus(scraped: Scraped) -> None:
    sim, world = scraped.sim, scraped.world
    base = {"scheduler": world.scenario.cluster.scheduler, "kubeconfig": sim.kubeconfig_path}
    via_sim = Cluster.objects.create(name="via-sim", prometheus_url=sim.prometheus_url, **base)
    via_real = Cluster.objects.create(name="via-real", prometheus_url=scraped.url, **base)
    t_sim = world.now
    t_real = datetime.now(UTC).replace(microsecond=0)  # what the real Prometheus holds is now, by its clock
    for cluster, t in ((via_sim, t_sim), (via_real, t_real)):
        summary = sweep_cluster(cluster.name, t)
        assert summary.errors == [] and summary.skipped_kinds == [], (cluster.name, summary.errors)

    def gpus(cluster: Cluster, t: datetime) -> dict[str, dict[str, Any]]:
        return {v.entity.name: dict(v.state) for v in inventory.as_of(cluster, "gpu", t)}

    got_sim, got_real = gpus(via_sim, t_sim), gpus(via_real, t_real)
    assert len(got_sim) == 7  # h100-01's GPUs but the one that fell off the bus; h100-02's exporter is down
    assert got_real == got_sim
    # and the raw collector calls agree label for label
    for query in promql.all_queries().values():
        real = PrometheusSource(scraped.url).query(query, t_real)
        simulated = PrometheusSource(sim.prometheus_url).query(query, t_sim)
        assert sorted(sorted(s.labels.items()) for s in real) == sorted(
            sorted(s.labels.items()) for s in simulated
        )
