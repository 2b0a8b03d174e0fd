"""The why-pending panel's position and what-if link (/c/<cluster>/jobs/<ns>/<name>/why/): the job's place in its
queue and in the cluster's order, the jobs ahead competing for its GPUs, and the page that tries an edit."""

from __future__ import annotations

import re

from tests.collectors.factories import PageTestCase

WHY = "/c/gpu-prod/jobs/nlp/bert-eval/why/"


class WhyPositionTest(PageTestCase):
    def test_it_shows_the_position_the_rule_and_the_jobs_ahead_for_the_same_gpus(self):
        r = self.get(WHY, self.times["end"])
        html = r.content.decode()
        # vision's queue priority (50) puts vit-large first; both wait for room on h100-01/02
        assert "1 of 1 waiting in queue" in html and "2 of 2 in the cluster's order" in html
        assert "One scheduling pass at t would not start it (no room)." in html
        assert "Order: KAI: departments first, then their projects" in html
        assert "Ahead, competing for the same GPUs (1)" in html
        assert '<a href="/c/gpu-prod/jobs/vision/vit-large/?t=2026-11-29T03%3A20%3A00Z&amp;w=2h">' in html
        ex = r.context["why_pending"]
        assert ex.position is not None and [c.label for c in ex.position.competitors] == ["vision/vit-large"]

    def test_it_links_the_what_if_page_prefilled_with_an_edit_that_would_start_it(self):
        html = self.get(WHY, self.times["end"]).content.decode()
        # two nodes like h100-01: one for vit-large, ahead of it, and one for bert-eval itself
        link = re.search(r'<a href="(/c/gpu-prod/whatif/[^"]+)">What if: add 2 node\(s\) like h100-01', html)
        assert link is not None, html[html.find("Position at") :][:800]
        assert "(one pass with it would start it)" in html
        url = link.group(1).replace("&amp;", "&")
        assert "t=2026-11-29T03%3A20%3A00Z" in url and "w=2h" in url
        page = self.client.get(url)
        assert page.status_code == 200
        started = {(row.name, row.change) for row in page.context["changed"]}
        assert started == {("vit-large", "starts"), ("bert-eval", "starts")}

    def test_a_running_job_has_no_position(self):
        r = self.get("/c/gpu-prod/jobs/vision/resnet-train/why/", self.times["end"])
        assert "Position at" not in r.content.decode()
