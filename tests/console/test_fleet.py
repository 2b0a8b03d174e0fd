from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors import inventory
from collectors.models import Cluster
from rcaweb.cursor import Cursor
from tests.base import T0, BaseTestCase
from tests.collectors.factories import gpu_obs, gpu_uuid
from tests.console.factories import build_fleet, node_name
from web.console import fleet, funnel

T = T0 + timedelta(hours=3)
Q = "t=2026-11-29T06:00:00Z&w=2h"


class FleetTest(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.spec = build_fleet(self.cluster, range(12), T)

    def test_it_counts_the_funnel_like_the_fleet_itself(self) -> None:
        got = fleet.compute(Cursor(at=T, window=timedelta(hours=2)))
        want = self.spec.funnel()
        assert {s: getattr(got.funnel, s) for s in funnel.STAGES} == want
        # Sanity of the scenario itself: every stage is populated and strictly narrower.
        assert want["total"] > want["healthy"] > want["allocated"] > want["active"] > want["well_used"] > 0

    def test_it_counts_each_nodepool_and_model(self) -> None:
        got = fleet.compute(Cursor(at=T, window=timedelta(hours=2)))
        for pool in ("h100", "a100"):
            assert {s: getattr(got.by_pool[pool], s) for s in funnel.STAGES} == self.spec.funnel(pool)
        assert sum(f.total for f in got.by_model.values()) == len(self.spec.gpus)
        assert set(got.by_model) == {g.model for g in self.spec.gpus}

    def test_it_ranks_idle_allocations_by_waste_with_project_and_job(self) -> None:
        got = fleet.compute(Cursor(at=T, window=timedelta(hours=2)))
        truth_idle = [
            g for g in self.spec.gpus if g.healthy and g.allocated and g.sm is not None and g.sm < 0.1
        ]
        assert len(got.idle) == len(truth_idle)
        top = got.idle[0]
        assert top.idle_hours == 24 * 5 / 60  # idle in every 5-minute point of the 2 h window
        assert top.job and top.project.startswith("team")
        over = {u.job for u in got.over_requesting}
        healthy_nodes = {g.node for g in self.spec.gpus if g.healthy and g.index < 4}
        assert over == {f"job-{int(n.split('-')[1])}" for n in healthy_nodes}

    def test_it_colours_every_gpu_and_links_it_to_its_page_at_t(self) -> None:
        r = self.client.get(f"/fleet/?{Q}")
        assert r.status_code == 200
        html = r.content.decode()
        cells = re.findall(r'<a class="gcell gcell-(\w+)" href="([^"]+)"', html)
        assert len(cells) == len(self.spec.gpus)
        assert {c[0] for c in cells} == {"free", "allocated", "idle", "faulty", "missing"}
        assert all(
            href.startswith("/c/gpu-prod/gpus/GPU-") and "t=2026-11-29T06%3A00%3A00Z" in href
            for _s, href in cells
        )

    def test_every_link_keeps_the_cursor(self) -> None:
        html = self.client.get(f"/fleet/?{Q}").content.decode()
        html = re.sub(
            r'<nav class="cursor-bar".*?</nav>', "", html, flags=re.S
        )  # its own links move t on purpose
        for href in re.findall(r'href="(/[^"]*)"', html):
            if href.startswith("/static/"):
                continue
            assert "t=2026-11-29T06%3A00%3A00Z" in href and "w=2h" in href, href

    def test_it_costs_the_same_queries_for_4_nodes_and_60(self) -> None:
        other = Cluster.objects.create(name="big")
        build_fleet(other, range(4), T, window=timedelta(minutes=15))
        with CaptureQueriesContext(connection) as small:
            assert self.client.get(f"/fleet/?cluster=big&{Q}").status_code == 200
        build_fleet(other, range(4, 60), T, window=timedelta(minutes=15))
        with CaptureQueriesContext(connection) as big:
            r = self.client.get(f"/fleet/?cluster=big&{Q}")
        assert r.status_code == 200 and r.content.decode().count("gcell gcell-") == 60 * 8 + 5
        assert len(small) == len(big) <= 12, [q["sql"][:120] for q in big.captured_queries]

    def test_it_rejects_an_unknown_cluster(self) -> None:
        r = self.client.get(f"/fleet/?cluster=nope&{Q}")
        assert r.status_code == 400 and b"unknown cluster" in r.content

    def test_anonymous_is_redirected_and_bob_may_read(self) -> None:
        assert self.anon.get("/fleet/").status_code == 302
        assert self.login_as(self.bob).get(f"/fleet/?{Q}").status_code == 200

    def test_an_htmx_panel_request_gets_only_the_fragment(self) -> None:
        r = self.client.get(f"/fleet/?{Q}", headers={"HX-Request": "true", "HX-Target": "fleet-body"})
        body = r.content.decode()
        assert (
            r.status_code == 200 and body.lstrip().startswith('<div id="fleet-body">') and "<html" not in body
        )
        # The cursor bar's swap targets #page and gets the whole page (it selects #page from it).
        r = self.client.get(f"/fleet/?{Q}", headers={"HX-Request": "true", "HX-Target": "page"})
        assert 'id="page"' in r.content.decode()


class FleetIdleWhileAllocatedTest(BaseTestCase):
    def test_it_counts_idle_hours_only_while_the_gpu_was_allocated(self) -> None:
        build_fleet(self.cluster, range(1), T)
        # GPU 6 of gpu-000 sat free and idle (SM 0.0) the whole 2 h window; a pod took it 12 minutes before t.
        inventory.record_states(
            self.cluster, [gpu_obs(node_name(0), 6, pod="team0/idle-0-0")], T - timedelta(minutes=12)
        )
        got = fleet.compute(Cursor(at=T, window=timedelta(hours=2)))
        cell = next(c for c in got.idle if c.version.entity.name == gpu_uuid(node_name(0), 6))
        assert 0 < cell.idle_hours <= 0.2
        # The GPUs held for the whole window still count every point.
        held = next(c for c in got.idle if c.version.entity.name == gpu_uuid(node_name(0), 4))
        assert held.idle_hours == 24 * 5 / 60
