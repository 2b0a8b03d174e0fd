"""The queues page /c/<cluster>/queues/ (web.console.queues): each queue's and department's deserved quota,
allocation and fair share at t and over the window, who is starved or borrowing, and what each waits on."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.collectors.factories import PageTestCase, crowd_node, deepen_history, iso

PATH = "/c/gpu-prod/queues/"
# session, user, cluster, the state at t (the what-if page's load) and one aggregate over the window: the same
# whatever the cluster's size or the depth of its history.
BUDGET = 17


class QueuesTest(PageTestCase):
    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH, self.times["end"])

    def test_it_names_the_starved_queue_and_the_one_borrowing_while_it_starves(self):
        r = self.get(PATH, self.times["end"])
        assert r.status_code == 200
        now = {q.name: q for q in r.context["shares"].queues}
        # nlp holds 4 of its 8 with bert-eval (8) waiting; vision holds 16 of a quota cut to 12
        assert (now["nlp"].allocated, now["nlp"].deserved, now["nlp"].starved) == (4.0, 8.0, True)
        assert (now["vision"].borrowing, now["vision"].borrowing_while_starved) == (4.0, ["nlp"])
        # 24 schedulable GPUs: each its quota first (8 + 12), the 4 left split by weight
        assert r.context["shares"].capacity == 24.0
        assert (now["nlp"].fair_share, now["vision"].fair_share) == (10.0, 14.0)
        html = r.content.decode()
        assert "holds 4 GPUs over its deserved quota while" in html
        assert '<span class="pill bad">starved</span>' in html

    def test_its_window_figures_are_time_weighted_over_the_stored_versions(self):
        r = self.get(PATH, self.times["end"])
        window = {q.name: q for q in r.context["window_shares"].queues}
        # vision's quota was 16, then 12 for the last part of the window: between the two
        assert 12.0 < window["vision"].deserved < 16.0
        assert window["vision"].allocated == 16.0
        # a minute after the story starts: old-sweep's 1 GPU for 60 s of a 2 h window, vision nothing yet
        early = {
            q.name: q
            for q in self.get(PATH, self.story.t0 + timedelta(minutes=1)).context["window_shares"].queues
        }
        assert (early["nlp"].allocated, early["vision"].allocated) == (round(60 / 7200, 4), 0.0)

    def test_it_lists_what_each_queue_waits_on_with_links(self):
        r = self.get(PATH, self.times["end"])
        html = r.content.decode()
        assert (
            'href="/c/gpu-prod/jobs/nlp/bert-eval/?t=2026-11-29T03%3A20%3A00Z&amp;w=2h">nlp/bert-eval</a>'
            in html
        )
        assert (
            'href="/c/gpu-prod/jobs/?queue=nlp&amp;phase=Pending&amp;t=2026-11-29T03%3A20%3A00Z&amp;w=2h">'
            "1 waiting job</a>" in html
        )
        nlp = next(q for q in r.context["shares"].queues if q.name == "nlp")
        assert [c.outcome for c in nlp.waiting] == ["no room"]

    def test_it_keeps_the_cursor_in_its_links(self):
        r = self.get(PATH, self.times["end"])
        html = r.content.decode()
        hrefs = re.findall(r'href="([^"]+)"', html.split('<main class="page">', 1)[1])
        assert hrefs
        for href in hrefs:
            assert "t=2026-11-29T03%3A20%3A00Z" in href and "w=2h" in href, href

    def test_without_t_it_reads_the_cluster_now(self):
        r = self.client.get(PATH)
        assert r.status_code == 200
        assert {q.name for q in r.context["shares"].queues} == {"nlp", "vision"}

    def test_it_rejects_a_malformed_t_and_an_unknown_cluster(self):
        assert self.get(f"{PATH}?t=yesterday").status_code == 400
        assert self.get("/c/nowhere/queues/", self.times["end"]).status_code == 404

    def test_it_answers_400_naming_a_parameter_it_does_not_take(self):
        r = self.get(f"{PATH}?queue=<b>nlp</b>", self.times["end"])
        assert r.status_code == 400 and r["Content-Type"].startswith("text/plain")
        assert r.content.decode() == "queue: not a parameter of this page (it takes t and w)\n"

    def count(self, t) -> tuple[int, list[str]]:
        with CaptureQueriesContext(connection) as ctx:
            r = self.client.get(f"{PATH}?t={iso(t)}&w=2h")
        assert r.status_code == 200
        return len(ctx.captured_queries), [q["sql"][:160] for q in ctx.captured_queries]

    def test_its_query_count_holds_as_the_cluster_grows(self):
        small_t = self.times["end"]
        n_small, sql_small = self.count(small_t)
        deepen_history(self.cluster, small_t + timedelta(minutes=1), versions=20, step=timedelta(seconds=10))
        big_t = small_t + timedelta(minutes=20)
        crowd_node(self.cluster, "h100-02", 300, big_t - timedelta(minutes=1))
        n_big, sql_big = self.count(big_t)
        assert n_small <= BUDGET, (n_small, sql_small)
        assert n_big == n_small, (n_small, n_big, sql_big)

    def test_the_fleet_page_links_to_it(self):
        html = self.get("/fleet/", self.times["end"]).content.decode()
        assert f'href="{PATH}?t=2026-11-29T03%3A20%3A00Z&amp;w=2h">gpu-prod</a>' in html
