"""Request vs usage: the fleet's "allocated but barely used" page and the workload fragment, read from the
simulator's Prometheus over HTTP after the real collectors swept it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar
from unittest import mock

from django.test import override_settings

from collectors import usage
from collectors.sweep import sweep_cluster, sweep_telemetry
from simulator.engine.world import World
from simulator.scenario import load_scenario
from simulator.server import SimServer
from tests.base import BaseTestCase
from tests.collectors.simhelpers import register
from tests.console.test_fleet_sim import SCENARIO
from web.console import usage as usage_page

Q = "t=2026-11-29T01:00:00Z&w=30m"


class UsageTestCase(BaseTestCase):
    world: ClassVar[World]
    sim: ClassVar[SimServer]

    @classmethod
    def setUpClass(cls) -> None:
        cls.world = World.from_scenario(load_scenario(SCENARIO))
        cls.sim = SimServer(cls.world)
        cls.sim.start()
        cls.sim.advance_to(cls.world.start + timedelta(minutes=60))
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls.sim.stop()

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.cluster = register(cls.sim)
        sweep_cluster(cls.cluster.name, cls.world.now)
        sweep_telemetry(cls.cluster.name, cls.world.now)

    def setUp(self) -> None:
        super().setUp()
        self.client.force_login(self.alice)

    def pod_of(self, job: str) -> Any:
        return next(p for p in self.world.pods.values() if p.job == job)


class FleetUsageTest(UsageTestCase):
    def test_it_needs_login(self) -> None:
        self.client.logout()
        r = self.client.get(f"/c/gpu-prod/usage/?{Q}")
        assert r.status_code == 302 and r["Location"].startswith("/accounts/login/")

    def test_it_ranks_the_idle_notebook_and_leaves_busy_jobs_out(self) -> None:
        r = self.client.get(f"/c/gpu-prod/usage/?{Q}")
        assert r.status_code == 200
        rows = r.context["rows"]
        assert [row.job for row in rows] == ["notebook"]
        notebook = rows[0]
        # two GPUs held all of the 30 minutes at ~2 % SM activity: about an hour wasted
        assert notebook.gpus == 2 and 0.9 < notebook.gpu_hours <= 1.0 and notebook.activity < 0.05
        assert abs(notebook.wasted_hours - notebook.gpu_hours * (1 - notebook.activity)) < 1e-9
        body = r.content.decode()
        assert 'href="/c/gpu-prod/jobs/nlp/notebook/?t=2026-11-29T01%3A00%3A00Z&amp;w=30m"' in body or (
            "/c/gpu-prod/jobs/nlp/notebook/?t=" in body
        )
        assert "RCAWEB_GPU_HOUR_PRICE" in body and "Cost" not in body

    def test_it_ranks_the_workloads_by_cpu_cores_asked_and_not_used(self) -> None:
        r = self.client.get(f"/c/gpu-prod/usage/?{Q}")
        over = r.context["over"]
        assert {row.job for row in over} <= {"busy", "middling", "notebook", "a100-job"} and over
        assert [row.unused_cores for row in over] == sorted((row.unused_cores for row in over), reverse=True)
        pods = {p.name: p for p in self.world.pods.values()}
        for row in over:
            assert row.cpu_requested == sum(pods[name].cpu_millis / 1000 for name in row.pods)
            assert 0 < row.cpu_used < row.cpu_requested and 0 < row.memory_used < row.memory_requested
        assert 'id="cpu-memory"' in r.content.decode()

    @override_settings(RCAWEB_GPU_HOUR_PRICE=2.5)
    def test_it_prices_the_wasted_gpu_hours_when_a_price_is_set(self) -> None:
        r = self.client.get(f"/c/gpu-prod/usage/?{Q}")
        row = r.context["rows"][0]
        assert row.cost() == row.wasted_hours * 2.5
        assert f"{row.cost():.2f}" in r.content.decode()

    def test_it_keeps_the_cursor_in_every_link(self) -> None:
        import re

        body = self.client.get(f"/c/gpu-prod/usage/?{Q}").content.decode()
        links = [
            h for h in re.findall(r'<a href="([^"]+)"', body) if h.startswith("/c/") or h.startswith("/fleet")
        ]
        assert links and all("t=2026-11-29T01" in h and "w=30m" in h for h in links), links

    def test_it_rejects_a_bad_page_and_an_unknown_cluster(self) -> None:
        r = self.client.get(f"/c/gpu-prod/usage/?{Q}&page=zero")
        assert r.status_code == 400 and b"page" in r.content
        assert self.client.get(f"/c/gpu-prod/usage/?{Q}&page=0").status_code == 400
        assert self.client.get(f"/c/nope/usage/?{Q}").status_code == 404
        assert self.client.get("/c/gpu-prod/usage/?t=yesterday").status_code == 400

    def test_the_htmx_request_gets_the_page_fragment(self) -> None:
        r = self.client.get(f"/c/gpu-prod/usage/?{Q}", headers={"HX-Request": "true"})
        body = r.content.decode()
        assert r.status_code == 200 and "<html" not in body and "barely used" in body

    def test_the_fleet_page_links_here_with_the_cursor(self) -> None:
        body = self.client.get(f"/fleet/?{Q}").content.decode()
        assert (
            "/c/gpu-prod/usage/?t=2026-11-29T01%3A00%3A00Z&amp;w=30m" in body
            or "/c/gpu-prod/usage/?t=" in body
        )

    def test_its_queries_do_not_grow_with_the_workloads(self) -> None:
        def holdings(n: int) -> usage.FleetRead:
            read = usage.FleetRead(holdings=[], metric=usage.SM, step=timedelta(minutes=5))
            for i in range(n):
                h = usage.Holding(
                    "nlp", f"idle-{i}-abcde", gpu_hours=1 + i, active_hours=0.01, gpus={f"GPU-{i}"}
                )
                read.holdings.append(h)
            return read

        def pod_uses(n: int) -> usage.PodUses:
            return usage.PodUses(
                pods=[usage.PodUse("nlp", f"busy-{i}-abcde", 8.0, 1.0, 2.0**36, 2.0**35) for i in range(n)]
            )

        counts = []
        for n in (3, 3 * usage_page.PAGE_SIZE):
            with (
                mock.patch.object(usage_page.usage, "read_holdings", return_value=holdings(n)),
                mock.patch.object(usage_page.usage, "read_pod_uses", return_value=pod_uses(n)),
            ):
                with self.assertNumQueries(4) as ctx:  # session, user, cluster, the pods' jobs
                    r = self.client.get(f"/c/gpu-prod/usage/?{Q}")
            assert r.status_code == 200 and len(r.context["rows"]) == min(n, usage_page.PAGE_SIZE)
            assert len(r.context["over"]) == min(n, usage_page.PAGE_SIZE) and r.context["over_total"] == n
            counts.append(len(ctx.captured_queries))
        assert counts[0] == counts[1]


class WorkloadUsageTest(UsageTestCase):
    def test_it_compares_the_jobs_requests_with_its_use(self) -> None:
        r = self.client.get(f"/c/gpu-prod/usage/job/nlp/notebook/?{Q}")
        assert r.status_code == 200
        u = r.context["usage"]
        pod = self.pod_of("notebook")
        assert u.cpu.requested == pod.cpu_millis / 1000 and u.memory.requested == pod.memory_bytes
        assert 0 < u.cpu.used < u.cpu.requested and 0 < u.memory.used <= u.memory.peak < u.memory.requested
        assert u.gpus == 2 and u.gpu_activity is not None and u.gpu_activity < 0.05
        assert not u.missing and not u.error
        assert "Series missing" not in r.content.decode()

    def test_the_pod_and_the_project_have_their_fragments(self) -> None:
        pod = self.pod_of("busy")
        r = self.client.get(f"/c/gpu-prod/usage/pod/vision/{pod.name}/?{Q}", headers={"HX-Request": "true"})
        body = r.content.decode()
        assert r.status_code == 200 and "<html" not in body and 'id="usage"' in body
        assert "% SM active" in body
        assert (
            self.client.get(f"/c/gpu-prod/usage/pod/vision/{pod.name}/?{Q}").context["usage"].gpu_activity
            > 0.5
        )
        r = self.client.get(f"/c/gpu-prod/usage/project/vision/?{Q}")
        assert r.status_code == 200 and r.context["usage"].gpus == 12  # busy's 8 and middling's 4

    def test_it_names_the_missing_series_instead_of_showing_zeros(self) -> None:
        with SimServer(
            self.world, disabled_metrics={"container_cpu_usage_seconds_total", "DCGM_FI_PROF_SM_ACTIVE"}
        ) as bare:
            self.cluster.prometheus_url = bare.prometheus_url
            self.cluster.save()
            r = self.client.get(f"/c/gpu-prod/usage/job/nlp/notebook/?{Q}")
        u = r.context["usage"]
        assert [m.series for m in u.missing] == [
            "container_cpu_usage_seconds_total",
            "DCGM_FI_PROF_SM_ACTIVE",
        ]
        assert u.cpu.used is None and u.cpu.requested is not None
        assert u.gpu_metric == "DCGM_FI_DEV_GPU_UTIL" and u.gpu_activity is not None
        body = r.content.decode()
        assert "<code>container_cpu_usage_seconds_total</code>" in body and "0.00 cores" not in body

    def test_an_unreachable_prometheus_is_said_in_words(self) -> None:
        self.cluster.prometheus_url = "http://127.0.0.1:9"
        self.cluster.save()
        r = self.client.get(f"/c/gpu-prod/usage/job/nlp/notebook/?{Q}")
        assert r.status_code == 200 and "Prometheus did not answer" in r.content.decode()

    def test_it_404s_an_unknown_workload_or_kind(self) -> None:
        assert self.client.get(f"/c/gpu-prod/usage/job/nlp/nope/?{Q}").status_code == 404
        assert self.client.get(f"/c/gpu-prod/usage/node/x/h100-01/?{Q}").status_code == 404

    def test_the_job_page_loads_the_fragment_with_the_cursor(self) -> None:
        body = self.client.get(f"/c/gpu-prod/jobs/nlp/notebook/?{Q}").content.decode()
        assert 'hx-get="/c/gpu-prod/usage/job/nlp/notebook/?t=2026-11-29T01%3A00%3A00Z&amp;w=30m"' in body

    def test_its_queries_do_not_grow_with_the_pods(self) -> None:
        with self.assertNumQueries(4):  # session, user, the job, its pods in the window
            self.client.get(f"/c/gpu-prod/usage/job/nlp/notebook/?{Q}")


def test_the_price_setting_refuses_what_is_not_a_price() -> None:
    import os
    import subprocess
    import sys

    def start(price: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "RCAWEB_GPU_HOUR_PRICE": price, "RCAWEB_DEBUG": "true"}
        code = "import django; django.setup(); from django.conf import settings; print(settings.RCAWEB_GPU_HOUR_PRICE)"
        return subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )

    good = start("2.50")
    assert good.returncode == 0 and good.stdout.strip() == "2.5"
    for bad in ("€2", "-1", "nan", "inf"):
        done = start(bad)
        assert done.returncode != 0 and "RCAWEB_GPU_HOUR_PRICE" in done.stderr, bad


class PartialWindowTest(UsageTestCase):
    def test_a_job_that_ran_part_of_the_window_is_measured_while_it_ran(self) -> None:
        # the jobs started 5-8 minutes in: a 2-hour window to 01:00 holds under an hour of their run
        short = self.client.get("/c/gpu-prod/usage/job/vision/busy/?t=2026-11-29T01:00:00Z&w=30m").context[
            "usage"
        ]
        long = self.client.get("/c/gpu-prod/usage/job/vision/busy/?t=2026-11-29T01:00:00Z&w=2h").context[
            "usage"
        ]
        assert short.cpu.used and long.cpu.used and short.memory.used and long.memory.used
        assert abs(long.cpu.used / short.cpu.used - 1) < 0.25  # not diluted to about half by the idle hour
        assert long.memory.used <= long.memory.peak <= short.memory.requested


class SharedGpuUsageTest(BaseTestCase):
    """A KAI share's GPU reports under the reservation pod: the sharers' panel says so, not "missing"."""

    def test_a_sharing_job_is_told_where_its_gpus_activity_is(self) -> None:
        from unittest import mock

        from collectors.inventory import Observed, record_states
        from collectors.models import Entity
        from collectors.usage import SM, UTIL, Missing, Usage
        from tests.base import T0

        share = {"fraction": 0.5}
        record_states(
            self.cluster,
            [
                Observed("job", "nb", {"phase": "Running", "gpu_share": share}, "vision", hot={"phase": "Running"}),
                Observed(
                    "pod", "nb-0", {"phase": "Running", "gpu_share": share, "node": "l40s-01"}, "vision",
                    hot={"phase": "Running", "job": "nb", "node": "l40s-01"},
                ),
            ],
            T0,
        )
        assert Entity.objects.filter(kind="job", name="nb").exists()
        bare = Usage(at=T0, window=timedelta(hours=1))
        bare.missing = [Missing(f"{SM}, {UTIL}", "none reported")]
        with mock.patch("web.console.usage.usage.read_usage", return_value=bare):
            r = self.client.get(f"/c/{self.cluster.name}/usage/job/vision/nb/?t=2026-11-29T03:30:00Z&w=1h")
        body = r.content.decode()
        assert r.status_code == 200, body[:300]
        assert "1 of these pods held a GPU share" in body and "reservation pod" in body
        assert r.context["usage"].missing == []
