"""The why-pending panel's "what would start it" and "when will it start" (/c/<cluster>/jobs/<ns>/<name>/why/):
the smallest edits, each linked to the what-if page prefilled with it, and the start estimate with its basis."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.inventory import record_states
from tests.collectors.factories import PENDING_MSG, T0, PageTestCase, iso, job_obs

WHY = "/c/gpu-prod/jobs/nlp/bert-eval/why/"


class WhyStartTest(PageTestCase):
    def test_it_lists_the_edits_that_start_it_each_linked_to_the_what_if_page_with_it(self):
        # the job's template tolerates the GPU taint its pods tolerate (the what-if page reads jobs' specs)
        t = self.times["end"] + timedelta(minutes=1)
        bert = job_obs(
            "nlp", "bert-eval", queue="nlp", phase="Pending", pods=1, gpus_per_pod=8,
            submitted=T0 + timedelta(minutes=30), message=PENDING_MSG,
        )  # fmt: skip
        bert.state["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        record_states(self.cluster, [bert], t)
        r = self.get(WHY, t)
        html = r.content.decode()
        assert '<h3 id="what-would-start-it">What would start it</h3>' in html
        # h100-03 has 4 GPUs free: its earlier request, 1 × 4, fits there
        link = re.search(
            r'<a href="(/c/gpu-prod/whatif/[^"]+)">shrink to 1 pod\(s\) × 4 GPUs \(from 1 × 8\)</a>', html
        )
        assert link is not None, html[html.find("What would start it") :][:600]
        assert "→ starts now on h100-03, GPUs 4–7;\n  nothing evicted" in html
        url = link.group(1).replace("&amp;", "&")
        assert (
            "request=nlp%2Fbert-eval%3A1x4" in url
            and f"t={iso(t).replace(':', '%3A')}" in url
            and "w=2h" in url
        )
        page = self.client.get(url)
        assert page.status_code == 200
        assert ("bert-eval", "starts") in {(row.name, row.change) for row in page.context["changed"]}

    def test_without_a_runtime_limit_or_finished_jobs_the_start_is_unknown_and_says_why(self):
        html = self.get(WHY, self.times["end"]).content.decode()
        assert "Unknown: none of the 2 running job(s) has a runtime limit, nor finished jobs" in html

    def test_a_running_jobs_runtime_limit_gives_the_start(self):
        t = self.times["end"] + timedelta(minutes=1)
        resnet = job_obs(
            "vision", "resnet-train", queue="vision", phase="Running", pods=2, gpus_per_pod=8,
            submitted=T0 + timedelta(minutes=5), active=2,
        )  # fmt: skip
        resnet.state.update(started=iso(T0 + timedelta(minutes=10)), active_deadline_seconds=6 * 3600)
        record_states(self.cluster, [resnet], t)
        html = self.get(WHY, t + timedelta(minutes=1)).content.decode()
        # resnet-train's two nodes free at 06:10, its limit: bert-eval starts on one of them then
        assert "Likely 06:10: 1 running job(s) end by then (1 by its runtime limit)" in html, html[
            html.find("When will it start") :
        ][:400]
        assert '<a href="/c/gpu-prod/jobs/vision/resnet-train/?t=' in html.split("The ends it waits for")[1]

    def test_its_query_count_does_not_grow_with_finished_jobs(self):
        def count(t):
            with CaptureQueriesContext(connection) as ctx:
                assert self.get(WHY, t).status_code == 200
            return len(ctx.captured_queries)

        t = self.times["end"]
        before = count(t)
        done = []
        for i in range(30):
            j = job_obs(
                "nlp", f"done-{i}", queue="nlp", phase="Succeeded", pods=1, gpus_per_pod=8, submitted=T0
            )
            j.state.update(started=iso(T0), completed=iso(t - timedelta(minutes=5)))
            done.append(j)
        record_states(self.cluster, done, t - timedelta(minutes=5))
        assert count(t) == before
