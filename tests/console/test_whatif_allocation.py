"""The what-if page's allocation table (/c/<cluster>/whatif/, web.console.whatif): GPUs, and CPU and memory with
their KAI quota and limit when some queue sets or holds them, before and after the edits."""

from __future__ import annotations

from datetime import timedelta

from collectors import inventory
from tests.collectors.factories import PageTestCase, job_obs, pod_obs, queue_obs

PATH = "/c/gpu-prod/whatif/"
GI = 2**30


def _section(html: str) -> str:
    return html.split("<h2>Allocation by queue and department</h2>", 1)[1].split("</section>", 1)[0]


class WhatIfAllocationTest(PageTestCase):
    def cpu_bound(self):
        """vision's queue gets a 40-core CPU limit; resnet-train's two pods request 16 cores and 64 GiB each and
        vit-large's pod 16 cores: with a node added, its GPUs fit and its CPU (32 + 16 of 40) does not."""
        t = self.times["end"] + timedelta(minutes=1)
        q = queue_obs("vision", project="vision", quota=12, limit=24)
        q.state["limit_cpu_cores"] = 40.0
        pods = [
            pod_obs(
                "vision",
                f"resnet-train-{i}",
                job="resnet-train",
                queue="vision",
                gpus=8,
                phase="Running",
                node=n,
                created=self.times["resnet_start"],
            )
            for i, n in enumerate(("h100-01", "h100-02"))
        ]
        for p in pods:
            p.state["requests"] = {"cpu": "16", "memory": str(64 * GI)}
        vit = job_obs(
            "vision",
            "vit-large",
            queue="vision",
            phase="Pending",
            pods=1,
            gpus_per_pod=8,
            submitted=self.times["vit_pending"],
        )
        vit.state["requests_per_pod"] = {"cpu": "16"}
        inventory.record_states(self.cluster, [q, *pods, vit], t)
        return t

    def test_a_gpu_only_cluster_shows_gpu_columns_only(self):
        r = self.get(PATH + "?add=h100-01:1", self.times["end"])
        assert r.status_code == 200
        assert r.context["alloc"].resources == ["gpu"]
        table = _section(r.content.decode())
        assert (
            '<th colspan="3">GPUs</th>' in table
            and "CPU (cores)" not in table
            and "memory (GiB)" not in table
        )
        assert "GPUs only" in table
        # vision: quota 12, limit 24; 16 held; vit-large starts on the added node: 16 → 24
        assert '<td class="num">12 / 24</td><td class="num">16</td>' in table
        assert "16 → <strong>24</strong> (+8)" in table

    def test_raising_the_cpu_limit_shows_the_queues_cpu_rise_by_the_jobs_request(self):
        t = self.cpu_bound()
        held = self.get(PATH + "?add=h100-01:1", t)
        assert held.status_code == 200
        first = held.context["order"][0]
        assert (
            first.name == "vit-large" and "CPU limit" in first.after
        )  # its CPU limit holds it, not its GPUs
        vision = next(a for a in held.context["wi"].allocations if a.name == "vision")
        assert (vision.cpu.before, vision.cpu.after, vision.after) == (32.0, 32.0, 16.0)

        r = self.get(PATH + "?add=h100-01:1&cpu_limit=vision:48", t)
        assert r.status_code == 200
        assert [(row.name, row.change) for row in r.context["changed"]] == [("vit-large", "starts")]
        assert r.context["alloc"].heads == ["GPUs", "CPU (cores)", "memory (GiB)"]
        table = _section(r.content.decode())
        assert '<th colspan="3">CPU (cores)</th>' in table and '<th colspan="3">memory (GiB)</th>' in table
        row = table.split(">vision</a></td>", 1)[1].split("</tr>", 1)[0]
        cells = [c.split("</td>", 1)[0] for c in row.split('<td class="num">')[1:]]
        assert cells == [
            "12 / 24",
            "16",
            "16 → <strong>24</strong> (+8)",  # GPUs
            "∞ / 48",
            "32",
            "32 → <strong>48</strong> (+16)",  # CPU: vit-large's 16 cores
            '<span class="muted" title="no quota or limit set">—</span>',
            "128",
            "128",  # memory: vit-large asks none
        ]
