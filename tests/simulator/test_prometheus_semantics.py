"""The simulator's Prometheus answers as Prometheus does: rate/increase, offset, time(), the metric name of
last_over_time, staleness of vanished series, a down node's exporter, kube-state-metrics, the scrape config."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from simulator.engine.world import World
from simulator.prometheus.evaluate import extrapolated_rate
from simulator.prometheus.promql import PromQLError, parse
from simulator.scenario import load_scenario
from simulator.server import SimServer
from tests.simulator.test_api_kube import SmallWorld
from tests.simulator.test_api_prometheus import get

SCENARIOS = Path(__file__).resolve().parents[2] / "simulator" / "scenarios"


class CounterWorld(SmallWorld):
    """SmallWorld whose single-bit ECC counter counts one per 30 s from T0, reset to 0 every ``reset_s``."""

    def __init__(self, reset_s: int | None = None) -> None:
        super().__init__()
        self.reset_s = reset_s

    def gpu_metric(self, node: str, index: int, metric: str, t: datetime) -> float | None:
        if metric != "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL":
            return super().gpu_metric(node, index, metric, t)
        if t > self.now:
            return None
        elapsed = int((t - datetime(2026, 11, 29, tzinfo=UTC)).total_seconds())
        if self.reset_s:
            elapsed %= self.reset_s
        return float(elapsed // 30)


def query(sim: SimServer, promql: str, **params: object) -> list[dict]:
    status, body = get(sim, "/api/v1/query", query=promql, **params)
    assert status == 200, body
    return body["data"]["result"]


def test_rate_and_increase_extrapolate_to_the_window_as_prometheus_does() -> None:
    with SimServer(CounterWorld()) as sim:
        sel = 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{Hostname="h100-01",gpu="0"}'
        # 10 samples in (t-5m, t], one count apart: 9 counted, extrapolated over the 30 s before the first
        (r,) = query(sim, f"rate({sel}[5m])")
        assert float(r["value"][1]) == pytest.approx(1 / 30)
        assert "__name__" not in r["metric"]
        (i,) = query(sim, f"increase({sel}[5m])")
        assert float(i["value"][1]) == pytest.approx(10.0)


def test_a_counter_reset_is_counted_not_negative() -> None:
    # samples 0,1,2,3 | reset | 0,1,2,... : without reset handling the increase would be negative
    points = [
        (float(t), float(v)) for t, v in zip(range(30, 330, 30), [6, 7, 8, 9, 0, 1, 2, 3, 4, 5], strict=True)
    ]
    value = extrapolated_rate(points, 0.0, 300.0, is_rate=False)
    # 3 counted before the reset, 0 at it (the new value 0), 5 after: 8 over 270 s, extrapolated to 300 s
    assert value == pytest.approx(8 * 300 / 270)
    assert extrapolated_rate(points[:1], 0.0, 300.0, is_rate=True) is None  # one sample: no rate


def test_offset_reads_the_past_and_time_is_the_evaluation_time() -> None:
    world = SmallWorld()
    with SimServer(world) as sim:
        now = int(world.now.timestamp())
        sel = 'DCGM_FI_DEV_GPU_UTIL{Hostname="h100-01",gpu="0"}'
        (cur,) = query(sim, sel)
        assert cur["value"] == [now, "90"]
        (past,) = query(sim, f"{sel} offset 10m")
        assert past["value"][0] == now and past["value"][1] == "90"
        before_node = (world.nodes["h100-01"].created_at - world.now).total_seconds()
        assert query(sim, f"{sel} offset {int(-before_node) + 600}s") == []  # before the node existed
        status, body = get(sim, "/api/v1/query", query="time()")
        assert body["data"] == {"resultType": "scalar", "result": [now, str(now)]}
        assert query(sim, f"{sel} > time()") == []
        assert len(query(sim, f"last_over_time({sel}[5m] offset 1h)")) == 1


def test_last_over_time_keeps_the_metric_name_other_functions_drop_it() -> None:
    with SimServer(SmallWorld()) as sim:
        (last,) = query(sim, 'last_over_time(DCGM_FI_DEV_GPU_TEMP{Hostname="h100-01",gpu="3"}[2m])')
        assert last["metric"]["__name__"] == "DCGM_FI_DEV_GPU_TEMP"
        (avg,) = query(sim, 'avg_over_time(DCGM_FI_DEV_GPU_TEMP{Hostname="h100-01",gpu="3"}[2m])')
        assert "__name__" not in avg["metric"]
        (kept,) = query(sim, 'DCGM_FI_DEV_GPU_TEMP{Hostname="h100-01",gpu="3"} > 1')
        assert kept["metric"]["__name__"] == "DCGM_FI_DEV_GPU_TEMP"  # a filter keeps it


def test_a_vanished_series_is_stale_at_the_next_scrape_but_still_in_range_functions() -> None:
    world = SmallWorld()
    gpu = world.nodes["h100-02"].gpus[5]
    # the GPU fell off the bus 45 s ago: one scrape (30 s interval) happened since without it
    gpu.present, gpu.xid_at = False, world.now - timedelta(seconds=45)
    with SimServer(world) as sim:
        sel = 'DCGM_FI_DEV_GPU_UTIL{Hostname="h100-02",gpu="5"}'
        assert query(sim, sel) == []
        assert len(query(sim, f"last_over_time({sel}[2m])")) == 1
        # 50 s before now the last scrape (now - 60 s) still had it; 20 s before now (scrape at now - 30 s) not
        assert len(query(sim, sel, time=world.now.timestamp() - 50)) == 1
        assert query(sim, sel, time=world.now.timestamp() - 20) == []


def test_a_pod_label_change_leaves_one_series_per_gpu_at_the_instant() -> None:
    world = SmallWorld()
    gpu = world.nodes["h100-02"].gpus[0]
    held_since = world.now - timedelta(seconds=40)

    def pod_at(node: str, index: int, t: datetime) -> str | None:
        if (node, index) == ("h100-02", 0):
            return "vision/bert-0" if t >= held_since else None
        return SmallWorld.gpu_pod_at(world, node, index, t)

    world.gpu_pod_at = pod_at  # type: ignore[method-assign]
    with SimServer(world) as sim:
        found = query(sim, 'DCGM_FI_DEV_GPU_UTIL{Hostname="h100-02",gpu="0"}')
        assert [r["metric"].get("pod") for r in found] == ["bert-0"]  # the idle label set went stale
        assert gpu.index == 0


def _world_at(name: str, minutes: int, *, scraped: bool = True) -> World:
    text = (SCENARIOS / name).read_text()
    if scraped:
        text = text.replace(
            "cluster:\n  name: gpu-prod\n", "cluster:\n  name: gpu-prod\n  dcgm_labels: scraped\n"
        )
        assert "dcgm_labels: scraped" in text
    world = World.from_scenario(load_scenario(text))
    world.advance_to(world.start + timedelta(minutes=minutes))
    return world


def test_a_not_ready_nodes_exporter_is_down_up_is_0_and_its_series_vanish() -> None:
    world = _world_at("node-not-ready.yaml", 50)  # h100-02 NotReady since 40m
    with SimServer(world) as sim:
        with pytest.raises(urllib.error.HTTPError) as down:
            urllib.request.urlopen(sim.prometheus_url + "/nodes/h100-02/metrics")
        assert down.value.code == 503 and "down" in down.value.read().decode()
        status, _ = get(sim, "/nodes/h100-01/metrics")
        assert status == 200
        up = {r["metric"]["pod"]: r["value"][1] for r in query(sim, 'up{job="dcgm-exporter"}')}
        assert sorted(up.values()) == ["0", "1"] and len(up) == 2
        assert {r["metric"]["Hostname"] for r in query(sim, "DCGM_FI_DEV_GPU_TEMP")} == {"h100-01"}
        before = (world.start + timedelta(minutes=30)).timestamp()
        up_before = query(sim, 'up{job="dcgm-exporter"}', time=before)
        assert [r["value"][1] for r in up_before] == ["1", "1"]


def test_kube_state_metrics_exposition_follows_the_api_objects() -> None:
    world = _world_at("node-not-ready.yaml", 50)
    with SimServer(world) as sim:
        status, text = get(sim, "/kube-state-metrics/metrics")
        assert status == 200
        assert "# TYPE kube_node_status_capacity gauge" in text
        assert 'kube_node_status_capacity{node="h100-02",resource="nvidia_com_gpu",unit="integer"} 8' in text
        assert 'kube_node_status_condition{node="h100-02",condition="Ready",status="unknown"} 1' in text
        assert 'kube_node_status_condition{node="h100-01",condition="Ready",status="true"} 1' in text
        pending = [
            line
            for line in text.splitlines()
            if line.startswith("kube_pod_status_phase{") and 'phase="Pending"} 1' in line
        ]
        assert pending and all('namespace="vision"' in line for line in pending)
        assert 'resource="nvidia_com_gpu",unit="integer"} 8' in text  # the gang's GPU requests


def test_the_scrape_config_scrapes_every_exporter_as_a_service_monitor_would() -> None:
    world = _world_at("node-not-ready.yaml", 5, scraped=False)
    with SimServer(world) as sim:
        config = yaml.safe_load(Path(sim.scrape_config_path).read_text())
        dcgm, ksm, kubelet = config["scrape_configs"]
        assert (
            dcgm["honor_labels"] is False and ksm["honor_labels"] is True and kubelet["honor_labels"] is True
        )
        (kubelet_file,) = kubelet["file_sd_configs"][0]["files"]
        kubelets = json.loads(Path(kubelet_file).read_text())
        assert [g["labels"]["__metrics_path__"] for g in kubelets] == [
            "/nodes/h100-01/metrics/cadvisor",
            "/nodes/h100-02/metrics/cadvisor",
        ]
        assert all(
            g["labels"]["node"] in g["labels"]["__metrics_path__"]
            and g["labels"]["instance"].endswith(":10250")
            for g in kubelets
        )
        (targets_file,) = dcgm["file_sd_configs"][0]["files"]
        groups = json.loads(Path(targets_file).read_text())
        assert [g["labels"]["__metrics_path__"] for g in groups] == [
            "/nodes/h100-01/metrics",
            "/nodes/h100-02/metrics",
        ]
        for g in groups:
            assert g["targets"] == [sim.prometheus_url.removeprefix("http://")]
            assert g["labels"]["namespace"] == "gpu-operator" and g["labels"]["pod"].startswith(
                "nvidia-dcgm-exporter-"
            )
            assert {"container", "service", "endpoint", "instance", "job"} <= set(g["labels"])
            with urllib.request.urlopen(sim.prometheus_url + g["labels"]["__metrics_path__"]) as resp:
                assert resp.status == 200


def test_added_nodes_become_scrape_targets() -> None:
    text = (
        (SCENARIOS / "node-not-ready.yaml")
        .read_text()
        .replace("events:\n", "events:\n  - {at: 10m, add_nodes: {nodepool: h100, count: 1}}\n")
    )
    world = World.from_scenario(load_scenario(text))
    with SimServer(world) as sim:
        config = yaml.safe_load(Path(sim.scrape_config_path).read_text())
        targets_file = config["scrape_configs"][0]["file_sd_configs"][0]["files"][0]
        assert len(json.loads(Path(targets_file).read_text())) == 2
        sim.advance_to(world.start + timedelta(minutes=11))
        assert len(json.loads(Path(targets_file).read_text())) == 3
        kubelet_file = config["scrape_configs"][2]["file_sd_configs"][0]["files"][0]
        assert len(json.loads(Path(kubelet_file).read_text())) == 3


def test_the_simulate_command_prints_the_scrape_config(tmp_path: Path) -> None:
    import io
    import threading

    from simulator.server import serve_scenario

    out, stop = io.StringIO(), threading.Event()
    stop.set()  # serve, print, and return at once
    serve_scenario(str(SCENARIOS / "node-not-ready.yaml"), out=out, stop=stop)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("prometheus scrape config: "))
    assert line.endswith("prometheus.yml")


@pytest.mark.parametrize(
    ("promql", "part"),
    [
        ("rate(DCGM_FI_DEV_GPU_UTIL[5m] offset -5m)", "negative offset"),
        ("DCGM_FI_DEV_GPU_UTIL offset", "end of input"),
        ("time() > 5", "two scalars"),
        ("5 < DCGM_FI_DEV_GPU_UTIL", "scalar on the left"),
    ],
)
def test_bad_modifiers_and_scalar_comparisons_are_named(promql: str, part: str) -> None:
    with pytest.raises(PromQLError, match=part):
        parse(promql)


def test_an_unknown_node_page_is_404() -> None:
    with SimServer(SmallWorld()) as sim:
        try:
            urllib.request.urlopen(sim.prometheus_url + "/nodes/nope/metrics")
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
        else:
            raise AssertionError("expected 404")


@pytest.mark.parametrize(
    "name,minutes",
    [("busy-gpu-neighbours-kai.yaml", 95), ("xid79-gpu-missing.yaml", 70), ("node-not-ready.yaml", 44)],
)
def test_last_over_time_answers_each_series_last_sample_of_the_window(name: str, minutes: int) -> None:
    """``last_over_time`` gives, for every series the window holds, its last sample: at every scrape of an
    hour of pod churn, a GPU falling off the bus and a node going NotReady."""
    from simulator.prometheus.evaluate import evaluate
    from simulator.prometheus.series import DcgmSource

    world = _world_at(name, minutes, scraped=False)
    source = DcgmSource(world)
    checked = 0
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_USED"):
        expr = parse(f"last_over_time({metric}[2m])")
        for back in range(0, 3600, 90):
            t = world.now.timestamp() - back
            source.begin()
            fast = sorted((sorted(labels.items()), v) for labels, v in evaluate(source, expr, t))
            source.end()
            source.begin()
            full = source.select(expr.selector, t - 120, t)  # every sample of the window
            source.end()
            want = sorted((sorted(k), pts[-1][1]) for k, pts in full.items() if pts)
            assert fast == want, (metric, back)
            checked += len(want)
    assert checked > 100
