"""Plotly figures (pure) and the chart endpoints: valid figure JSON, the cursor line at t, "no data" states."""

from __future__ import annotations

import html as htmlmod
import json
import re
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
from django.test import SimpleTestCase

from collectors.models import Change, SourceRun
from incidents.models import Alert
from tests.base import T0, BaseTestCase
from tests.collectors.factories import gpu_uuid
from tests.console.factories import build_fleet, node_name
from web.console import charts, figures

T = T0 + timedelta(hours=3)  # 06:00Z
Q = "t=2026-11-29T06:00:00Z&w=2h"
HX = {"HX-Request": "true"}


def figure_of(body: str) -> dict:
    m = re.search(r'<script id="(fig-[^"]+)" type="application/json">(.*?)</script>', body, re.S)
    assert m, body[:500]
    assert f'data-figure="{m.group(1)}"' in body
    return json.loads(htmlmod.unescape(m.group(2)))


def cursor_x(fig: dict) -> str:
    shapes = [s for s in fig["layout"]["shapes"] if s.get("name") == "cursor"]
    assert len(shapes) == 1
    assert shapes[0]["x0"] == shapes[0]["x1"] and shapes[0]["yref"] == "paper"
    return shapes[0]["x0"]


class FigureTest(SimpleTestCase):
    def test_a_line_figure_is_valid_plotly_with_the_cursor_line_and_markers(self) -> None:
        t = datetime(2026, 11, 29, 3, 12, tzinfo=UTC)
        pts = [(t - timedelta(minutes=5 * i), 0.1 * i) for i in range(6)]
        fig = charts.line_figure(
            "x",
            [charts.Series("a", pts), charts.Series("b", pts, step=True)],
            start=t - timedelta(hours=1),
            end=t,
            cursor_t=t,
            markers=[
                charts.Marker(t - timedelta(minutes=3), "change", "quota 16 → 8"),
                charts.Marker(t, "alert", "GPUJobPendingTooLong"),
            ],
        )
        go.Figure(fig)  # raises on any invalid property
        assert cursor_x(fig) == "2026-11-29 03:12:00"
        marker_traces = [d for d in fig["data"] if d.get("yaxis") == "y2"]
        assert {d["name"] for d in marker_traces} == {"changes", "alerts"}
        assert json.loads(json.dumps(fig)) == fig  # plain JSON, nothing Python-only

    def test_gpu_metric_figures_mark_xid_and_ecc_events(self) -> None:
        t = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
        series = {
            "": {
                "DCGM_FI_DEV_GPU_TEMP": [(t, 60.0)],
                "DCGM_FI_DEV_XID_ERRORS": [(t, 0.0), (t + timedelta(minutes=5), 79.0)],
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": [(t, 0.0), (t + timedelta(minutes=10), 2.0)],
            }
        }
        fig = charts.gpu_metric_figure("temperature", series, start=t, end=t + timedelta(hours=1), cursor_t=t)
        go.Figure(fig)
        texts = [x for d in fig["data"] for x in d.get("text", [])]
        assert "Xid 79" in texts and "ECC double-bit errors: 2" in texts

    def test_step_series_counts_intervals_at_each_point(self) -> None:
        t = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
        grid = [t + timedelta(minutes=m) for m in (0, 10, 20, 30)]
        iv = [(t, t + timedelta(minutes=20), 8), (t + timedelta(minutes=10), None, 4)]
        assert [v for _g, v in charts.step_series(iv, grid)] == [8, 12, 4, 4]

    def test_the_histogram_is_valid_plotly(self) -> None:
        go.Figure(charts.histogram_figure([("0–5m", 3), ("5–15m", 1)], target_label="30m"))


class ChartEndpointTest(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.spec = build_fleet(self.cluster, range(4), T)

    def get(self, path: str, **kw):
        return self.client.get(f"{path}?{Q}", headers=HX, **kw)

    def test_a_gpu_chart_is_valid_plotly_json_with_the_cursor_at_t(self) -> None:
        r = self.get(f"/charts/gpu-prod/gpu/{gpu_uuid(node_name(0), 0)}/utilization/")
        assert r.status_code == 200 and "<html" not in r.content.decode()
        fig = figure_of(r.content.decode())
        go.Figure(fig)
        assert cursor_x(fig) == "2026-11-29 06:00:00"
        sm = next(d for d in fig["data"] if d["name"] == "SM active")
        assert set(sm["y"]) == {80.0} and len(sm["y"]) == 24

    def test_node_job_project_queue_and_fleet_charts_answer(self) -> None:
        Change.objects.create(
            cluster=self.cluster,
            entity=None,
            kind="",
            time=T - timedelta(minutes=30),
            field="x",
            source="external",
            summary="deploy v2",
        )
        paths = [
            f"/charts/gpu-prod/node/{node_name(0)}/temperature/",
            f"/charts/gpu-prod/node/{node_name(0)}/utilization/",
            "/charts/gpu-prod/job/team0/job-0/utilization/",
            "/charts/gpu-prod/project/team0/allocation/",
            "/charts/gpu-prod/queue/team0/queue_length/",
            "/charts/gpu-prod/fleet/all/allocation/",
            "/charts/gpu-prod/fleet/all/utilization/",
        ]
        for p in paths:
            r = self.get(p)
            assert r.status_code == 200, p
            body = r.content.decode()
            if "no data:" in body:
                assert p.endswith(("temperature/", "queue_length/")), (
                    p,
                    body,
                )  # no samples / nothing pending here
                continue
            fig = figure_of(body)
            go.Figure(fig)
            assert cursor_x(fig) == "2026-11-29 06:00:00", p
        fleet = figure_of(self.get("/charts/gpu-prod/fleet/all/allocation/").content.decode())
        allocated = next(d for d in fleet["data"] if d["name"] == "GPUs allocated")
        at_t = dict(zip(allocated["x"], allocated["y"], strict=True))["2026-11-29 06:00:00"]
        assert at_t == sum(6 for _ in range(4))  # every node runs a 4-GPU and a 2-GPU pod
        assert any(d["name"] == "changes" and "deploy v2" in d["text"] for d in fleet["data"])

    def test_alerts_naming_the_node_show_as_markers(self) -> None:
        now = T
        Alert.objects.create(
            fingerprint="f",
            name="NodeNotReady",
            labels={"node": node_name(3)},
            cluster_name="gpu-prod",
            starts_at=T - timedelta(minutes=20),
            received_at=now,
            updated_at=now,
        )
        fig = figure_of(self.get(f"/charts/gpu-prod/node/{node_name(3)}/utilization/").content.decode())
        alerts = next(d for d in fig["data"] if d["name"] == "alerts")
        assert alerts["text"] == ["NodeNotReady (alert)"] and alerts["x"] == ["2026-11-29 05:40:00"]
        other = figure_of(self.get(f"/charts/gpu-prod/node/{node_name(0)}/utilization/").content.decode())
        assert not any(d["name"] == "alerts" for d in other["data"])

    def test_a_failed_source_gives_the_no_data_state_not_an_error_page(self) -> None:
        SourceRun.objects.create(
            cluster=self.cluster,
            source="prometheus",
            call="GET /api/v1/query_range DCGM_FI_DEV_POWER_USAGE",
            time=T - timedelta(minutes=15),
            ok=False,
            error="connection refused",
        )
        r = self.get(f"/charts/gpu-prod/gpu/{gpu_uuid(node_name(0), 0)}/power/")
        body = r.content.decode()
        assert r.status_code == 200
        assert "no data: prometheus failed at 2026-11-29T05:45:00Z" in body and "connection refused" in body
        assert "application/json" not in body

    def test_no_samples_and_no_failure_says_so(self) -> None:
        body = self.get(f"/charts/gpu-prod/gpu/{gpu_uuid(node_name(0), 0)}/memory/").content.decode()
        assert "no data: no memory used samples for this GPU between 2026-11-29T04:00:00Z" in body

    def test_a_job_that_held_no_gpu_says_so(self) -> None:
        from collectors import inventory
        from tests.collectors.factories import job_obs

        inventory.record_states(
            self.cluster,
            [
                job_obs(
                    "team0",
                    "waiting",
                    queue="team0",
                    phase="Pending",
                    pods=1,
                    gpus_per_pod=8,
                    submitted=T - timedelta(hours=1),
                )
            ],
            T - timedelta(hours=1),
        )
        body = self.get("/charts/gpu-prod/job/team0/waiting/utilization/").content.decode()
        assert "no data: this job held no GPU between 2026-11-29T04:00:00Z" in body

    def test_unknown_things_are_404(self) -> None:
        assert self.get("/charts/gpu-prod/gpu/GPU-nope/utilization/").status_code == 404
        assert self.get("/charts/gpu-prod/node/gpu-000/allocation/").status_code == 404
        assert self.get("/charts/nope/fleet/all/allocation/").status_code == 404

    def test_without_htmx_the_chart_is_a_page_and_anonymous_is_redirected(self) -> None:
        r = self.client.get(f"/charts/gpu-prod/fleet/all/allocation/?{Q}")
        assert "<html" in r.content.decode() and "fig-fleet-allocation" in r.content.decode()
        assert self.anon.get(f"/charts/gpu-prod/fleet/all/allocation/?{Q}").status_code == 302

    def test_entity_pages_lazy_load_their_charts_with_a_loading_state(self) -> None:
        html = self.client.get(f"/c/gpu-prod/nodes/{node_name(0)}/?{Q}").content.decode()
        loaders = re.findall(
            r'<a class="chart-loading" href="([^"]+)" hx-get="([^"]+)" hx-trigger="load"', html
        )
        assert len(loaders) == 4 and all(a == b and "t=2026-11-29T06%3A00%3A00Z" in a for a, b in loaders)
        assert "Loading GPU utilization" in html

    def test_each_entity_kind_loads_its_own_charts(self) -> None:
        pages = {
            "/c/gpu-prod/projects/team0/": {"allocation", "queue_length"},
            "/c/gpu-prod/queues/team0/": {"allocation", "queue_length"},
            "/c/gpu-prod/jobs/team0/job-0/": {"utilization", "memory"},
            f"/c/gpu-prod/gpus/{gpu_uuid(node_name(0), 0)}/": {
                "utilization",
                "memory",
                "power",
                "temperature",
            },
        }
        for path, names in pages.items():
            html = self.client.get(f"{path}?{Q}").content.decode()
            got = set(re.findall(r'hx-get="/charts/gpu-prod/\w+/[^"]*/(\w+)/\?t=', html))
            assert got == names, (path, got)


class HonestAxesTest(SimpleTestCase):
    """Charts that do not lie: zero-based counts, a minimum span for metrics, every GPU told apart,
    nothing outside the window pinned to its edge."""

    t = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)

    def pts(self, values: list[float]) -> list[tuple[datetime, float]]:
        return [(self.t + timedelta(minutes=5 * i), v) for i, v in enumerate(values)]

    def test_allocation_and_queue_axes_start_at_zero(self) -> None:
        alloc = charts.allocation_figure(
            self.pts([7, 8, 8]),
            self.pts([8, 8, 8]),
            start=self.t,
            end=self.t + timedelta(hours=1),
            cursor_t=self.t,
        )
        assert alloc["layout"]["yaxis"]["rangemode"] == "tozero"
        queue = charts.queue_length_figure(
            self.pts([3, 4]),
            self.pts([24, 32]),
            start=self.t,
            end=self.t + timedelta(hours=1),
            cursor_t=self.t,
        )
        assert (
            queue["layout"]["yaxis"]["rangemode"] == "tozero"
            and queue["layout"]["yaxis3"]["rangemode"] == "tozero"
        )

    def test_a_metric_wobbling_by_noise_stays_a_flat_line(self) -> None:
        temp = {"": {"DCGM_FI_DEV_GPU_TEMP": self.pts([61.0, 61.02, 60.99, 61.01])}}
        fig = charts.gpu_metric_figure(
            "temperature", temp, start=self.t, end=self.t + timedelta(hours=1), cursor_t=self.t
        )
        lo, hi = fig["layout"]["yaxis"]["range"]
        assert hi - lo >= 19.99 and lo < 61 < hi
        power = {"": {"DCGM_FI_DEV_POWER_USAGE": self.pts([301.0, 301.2, 300.9])}}
        fig = charts.gpu_metric_figure(
            "power", power, start=self.t, end=self.t + timedelta(hours=1), cursor_t=self.t
        )
        lo, hi = fig["layout"]["yaxis"]["range"]
        assert lo == 0 and hi > 301
        # a real swing keeps its own range
        swing = {"": {"DCGM_FI_DEV_GPU_TEMP": self.pts([40.0, 85.0])}}
        fig = charts.gpu_metric_figure(
            "temperature", swing, start=self.t, end=self.t + timedelta(hours=1), cursor_t=self.t
        )
        lo, hi = fig["layout"]["yaxis"]["range"]
        assert lo < 40 and hi > 85 and hi - lo < 60

    def test_a_nodes_eight_gpus_each_have_a_colour_and_a_legend_entry(self) -> None:
        per_gpu = {
            f"GPU {i}": {
                "DCGM_FI_DEV_GPU_UTIL": self.pts([50, 60]),
                "DCGM_FI_PROF_SM_ACTIVE": self.pts([0.4, 0.5]),
            }
            for i in range(8)
        }
        fig = charts.gpu_metric_figure(
            "utilization", per_gpu, start=self.t, end=self.t + timedelta(hours=1), cursor_t=self.t
        )
        go.Figure(fig)
        lines = [d for d in fig["data"] if d.get("mode") == "lines"]
        legend = [d["name"] for d in lines if d.get("showlegend", True)]
        assert legend == [f"GPU {i}" for i in range(8)]
        colours = {d["legendgroup"]: d["line"]["color"] for d in lines}
        assert len(set(colours.values())) == 8 and figures.CURSOR_COLOR not in colours.values()
        assert "dotted: GPU util" in fig["layout"]["title"]["text"]
        assert fig["layout"]["height"] > 270  # room for the whole legend

    def test_markers_outside_the_window_are_not_drawn(self) -> None:
        start, end = self.t, self.t + timedelta(hours=1)
        fig = charts.line_figure(
            "x",
            [charts.Series("a", self.pts([1, 2]))],
            start=start,
            end=end,
            cursor_t=start + timedelta(minutes=30),
            markers=[
                charts.Marker(start - timedelta(hours=3), "change", "long before"),
                charts.Marker(start + timedelta(minutes=10), "change", "inside"),
                charts.Marker(end + timedelta(hours=2), "alert", "long after"),
            ],
        )
        texts = [x for d in fig["data"] for x in d.get("text", [])]
        assert texts == ["inside"]
