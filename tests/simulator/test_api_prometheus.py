"""The simulator's Prometheus HTTP API: real JSON formats, the PromQL subset, label variants, exporter pages."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta
from typing import Any

import pytest

from simulator import World, load_scenario
from simulator.prometheus.evaluate import evaluate, format_ts, format_value
from simulator.prometheus.promql import parse
from simulator.server import SimServer
from tests.simulator.test_api_kube import SmallWorld
from tests.simulator.test_api_scenario import SCENARIO, run


def get(sim: SimServer, path: str, **params: Any) -> tuple[int, Any]:
    url = f"{sim.prometheus_url}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url) as resp:
            body = resp.read().decode()
            return resp.status, json.loads(body) if path.startswith("/api/") else body
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(
    ("variant", "host_label", "pod_label", "extra"),
    [
        ("classic", "Hostname", "pod", {}),
        ("current", "hostname", "pod", {}),
        ("scraped", "Hostname", "exported_pod", {"namespace": "gpu-operator", "job": "dcgm-exporter"}),
    ],
)
def test_it_answers_query_range_in_the_real_format_for_each_label_variant(
    variant: str, host_label: str, pod_label: str, extra: dict[str, str]
) -> None:
    world = SmallWorld(dcgm_labels=variant)
    with SimServer(world) as sim:
        end = world.now.timestamp()
        status, body = get(
            sim,
            "/api/v1/query_range",
            query=f'DCGM_FI_DEV_GPU_UTIL{{{host_label}="h100-01",gpu="0"}}',
            start=end - 300,
            end=end,
            step="60s",
        )
        assert status == 200 and body["status"] == "success"
        assert body["data"]["resultType"] == "matrix"
        (series,) = body["data"]["result"]
        assert series["metric"][host_label] == "h100-01"
        assert series["metric"][pod_label] == "bert-0"
        assert series["metric"]["UUID"] == "GPU-00000001-0000-0000-0000-000000000000"
        assert series["metric"]["modelName"] == "NVIDIA H100 80GB HBM3"
        for key, value in extra.items():
            assert series["metric"][key] == value
        assert series["values"][-1] == [int(end), "90"]
        assert len(series["values"]) == 6


def test_it_evaluates_aggregations_over_range_functions_and_comparisons() -> None:
    world = SmallWorld()
    with SimServer(world) as sim:
        _, body = get(
            sim, "/api/v1/query", query="avg by (Hostname) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m])) > 0"
        )
        assert body["data"]["resultType"] == "vector"
        assert [(r["metric"], r["value"][1]) for r in body["data"]["result"]] == [
            ({"Hostname": "h100-01"}, "90")
        ]
        _, body = get(sim, "/api/v1/query", query='count by (pod) (DCGM_FI_DEV_GPU_UTIL{pod=~"bert.*"})')
        assert body["data"]["result"][0]["value"][1] == "8"
        # an idle GPU has no pod labels (Prometheus drops empty labels)
        _, body = get(sim, "/api/v1/query", query='DCGM_FI_DEV_GPU_UTIL{Hostname="h100-02",gpu="3"}')
        assert "pod" not in body["data"]["result"][0]["metric"]


def test_it_rejects_promql_outside_the_subset_with_bad_data() -> None:
    with SimServer(SmallWorld()) as sim:
        for query, part in [
            ("irate(DCGM_FI_DEV_GPU_UTIL[5m])", "irate"),
            ("DCGM_FI_DEV_GPU_UTIL @ 1700000000", "@"),
            ("DCGM_FI_DEV_GPU_UTIL + 1", "+"),
            ("DCGM_FI_DEV_GPU_UTIL[5m]", "[5m]"),
            ("sum without (gpu) (DCGM_FI_DEV_GPU_UTIL)", "without"),
        ]:
            status, body = get(sim, "/api/v1/query", query=query)
            assert status == 400 and body["status"] == "error" and body["errorType"] == "bad_data"
            assert part in body["error"]


def test_it_serves_no_series_for_a_disabled_counter_a_vanished_gpu_or_beyond_retention() -> None:
    world = SmallWorld()
    gpu = world.nodes["h100-02"].gpus[5]
    gpu.present, gpu.xid_at = False, world.now - timedelta(minutes=10)
    with SimServer(world, disabled_metrics={"DCGM_FI_PROF_SM_ACTIVE"}, retention_s=3600) as sim:
        _, body = get(sim, "/api/v1/query", query="DCGM_FI_PROF_SM_ACTIVE")
        assert body["data"]["result"] == []
        _, body = get(sim, "/api/v1/query", query='DCGM_FI_DEV_GPU_UTIL{Hostname="h100-02",gpu="5"}')
        assert body["data"]["result"] == []
        old = (world.now - timedelta(hours=2)).timestamp()
        _, body = get(sim, "/api/v1/query", query="DCGM_FI_DEV_GPU_UTIL", time=old)
        assert body["data"]["result"] == []
        _, body = get(sim, "/api/v1/label/__name__/values")
        assert "DCGM_FI_PROF_SM_ACTIVE" not in body["data"] and "DCGM_FI_DEV_GPU_UTIL" in body["data"]


def test_it_serves_series_labels_and_the_exporter_page() -> None:
    with SimServer(SmallWorld()) as sim:
        _, body = get(sim, "/api/v1/series", **{"match[]": 'DCGM_FI_DEV_GPU_TEMP{gpu="2"}'})
        assert sorted(s["Hostname"] for s in body["data"]) == ["h100-01", "h100-02"]
        _, body = get(sim, "/api/v1/labels")
        assert {"UUID", "Hostname", "pod", "__name__"} <= set(body["data"])
        status, text = get(sim, "/nodes/h100-02/metrics")
        assert status == 200
        assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in text
        assert (
            'Hostname="h100-02",DCGM_FI_DRIVER_VERSION="550.127.08",container="",namespace="",pod=""} 0'
            in text
        )


def test_it_accepts_post_form_queries_and_rfc3339_times() -> None:
    world = SmallWorld()
    with SimServer(world) as sim:
        form = urllib.parse.urlencode(
            {
                "query": 'max_over_time(DCGM_FI_DEV_GPU_TEMP{Hostname="h100-02",gpu="7"}[10m])',
                "time": world.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ).encode()
        with urllib.request.urlopen(
            urllib.request.Request(sim.prometheus_url + "/api/v1/query", data=form)
        ) as resp:
            body = json.loads(resp.read())
        (result,) = body["data"]["result"]
        assert "__name__" not in result["metric"]  # functions drop the metric name
        assert result["value"] == [int(world.now.timestamp()), "47"]


def _step_by_step(sim: SimServer, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    """A range query as its definition says: the instant query evaluated at start, start + step, ..."""
    expr = parse(query)
    found: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
    t = start
    with sim.lock:
        while t <= end + 1e-9:
            sim.source.begin()
            try:
                for labels, value in evaluate(sim.source, expr, t):
                    found.setdefault(tuple(sorted(labels.items())), []).append(
                        [format_ts(t), format_value(value)]
                    )
            finally:
                sim.source.end()
            t += step
    return [{"metric": dict(k), "values": v} for k, v in sorted(found.items())]


def test_a_range_of_a_bare_selector_answers_what_each_step_would() -> None:
    """The range path that reads each series once (and answers a selector or a range function series by
    series) answers exactly the step-by-step definition (bare selectors, every range function, aggregations,
    comparisons, a selector without a metric name): pod labels
    that change, a GPU that fell off the bus, offsets, steps finer and coarser than the scrape interval,
    starts off the scrape grid, windows before the world began and beyond the retention."""
    world = World.from_scenario(load_scenario(SCENARIO))
    with SimServer(world, retention_s=2 * 3600) as sim:
        run(world, sim, timedelta(hours=2, minutes=30))
        now = world.now.timestamp()
        queries = [
            "DCGM_FI_DEV_GPU_UTIL",
            'DCGM_FI_DEV_GPU_TEMP{hostname="h100-02"}',
            'DCGM_FI_DEV_FB_USED{pod=~".+"}',
            'DCGM_FI_DEV_XID_ERRORS{gpu=~"3|4"} offset 7m',
            "up",
            "avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m])",
            'max_over_time(DCGM_FI_DEV_GPU_TEMP{hostname="h100-02"}[10m] offset 3m) > 30',
            "sum by (hostname) (DCGM_FI_DEV_FB_USED)",
            "rate(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[10m])",
            "count by (hostname) (last_over_time(up[2m]))",
            'last_over_time(DCGM_FI_DEV_GPU_UTIL{pod=~".+"}[2m])',
            "min_over_time(DCGM_FI_DEV_POWER_USAGE[4m])",
            "count_over_time(DCGM_FI_DEV_SM_CLOCK[3m] offset 1m)",
            "increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[10m])",
            '{__name__=~"DCGM_FI_DEV_GPU_(UTIL|TEMP)", gpu="1"}',
        ]
        windows = [
            (now - 3 * 3600, now, 60.0),  # before the retention and before the world began
            (now - 1800 + 7, now - 11, 17.0),  # off the grid, finer than the scrape interval
            (now - 5400, now + 600, 120.0),  # coarser, and past now
            (now - 40 * 60, now - 20 * 60, 30.0),  # across the Xid at 2 h
        ]
        for query in queries:
            for start, end, step in windows:
                status, body = get(sim, "/api/v1/query_range", query=query, start=start, end=end, step=step)
                assert status == 200, body
                assert body["data"]["result"] == _step_by_step(sim, query, start, end, step), (
                    query,
                    start,
                    step,
                )
                assert body["data"]["result"] or "offset" in query, query
