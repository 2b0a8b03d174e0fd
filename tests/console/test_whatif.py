"""The what-if page /c/<cluster>/whatif/ (web.console.whatif): the state at t with the query string's edits,
one scheduling pass before and after, never executed."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.collectors.factories import PageTestCase, crowd_node, deepen_history, iso

PATH = "/c/gpu-prod/whatif/"
# session, user, cluster, the fleet's rows (nodes, GPUs, queues, projects, pods, jobs), departments, the
# history, the changes and the events of the lookback: the same whatever the edits and the cluster's size.
BUDGET = 16


class WhatIfTest(PageTestCase):
    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH, self.times["end"])

    def test_without_edits_it_lists_every_waiting_job_in_the_clusters_order(self):
        r = self.get(PATH, self.times["end"])
        assert r.status_code == 200
        order = [(c.job.ref.label, c.outcome) for c in r.context["wi"].after.considered]
        # vision (16 held, quota 12, limit 24) and nlp (4 of 8): nlp is below its fair share, yet vision's queue
        # priority (50) comes first
        assert order == [("vision/vit-large", "no room"), ("nlp/bert-eval", "no room")]
        html = r.content.decode()
        assert "nothing here is executed" in html and "Add an edit to compare." in html
        assert (
            "KAI: departments first, then their projects; a queue still within its deserved quota first"
            in html
        )

    def test_adding_a_node_starts_the_first_job_in_line_on_it(self):
        r = self.get(PATH + "?add=h100-01:1", self.times["end"])
        assert r.status_code == 200
        changed = [
            (row.namespace, row.name, row.change, [p.node for p in row.nodes]) for row in r.context["changed"]
        ]
        assert changed == [("vision", "vit-large", "starts", ["h100-01+1"])]
        html = r.content.decode()
        assert "add 1 node(s) like h100-01" in html and "h100-01+1</span> (added)" in html
        vision = next(a for a in r.context["wi"].allocations if a.name == "vision")
        assert (vision.before, vision.after) == (16.0, 24.0)

    def test_holding_the_job_ahead_gives_the_room_to_the_next(self):
        r = self.get(PATH + "?add=h100-01:1&hold=vision/vit-large", self.times["end"])
        changed = {(row.name, row.change) for row in r.context["changed"]}
        assert changed == {("bert-eval", "starts")}

    def test_it_keeps_the_cursor_and_the_other_edits_in_its_links(self):
        r = self.get(PATH + "?add=h100-01:1&hold=vision/vit-large", self.times["end"])
        html = r.content.decode()
        hrefs = re.findall(r'href="([^"]+)"', html.split('<main class="page">', 1)[1])
        assert hrefs
        for href in hrefs:
            assert "t=2026-11-29T03%3A20%3A00Z" in href and "w=2h" in href, href
        assert (
            f'href="{PATH}?t=2026-11-29T03%3A20%3A00Z&amp;w=2h&amp;hold=vision%2Fvit-large"' in html
        )  # drop add
        assert '<input type="hidden" name="add" value="h100-01:1">' in html

    def test_an_empty_field_of_its_form_is_no_edit(self):
        r = self.get(PATH + "?quota=&cordon=&add=h100-01:1", self.times["end"])
        assert r.status_code == 200 and len(r.context["wi"].edits) == 1

    def test_it_answers_400_naming_a_bad_edit(self):
        for query, words in (
            ("quota=nobody:4", "quota=nobody:4: no queue, project or department nobody"),
            ("quota=vision:-4", "quota=vision:-4: expected <name>:<gpus>"),
            ("cordon=h100-99", "cordon=h100-99: no node h100-99"),
            ("add=h100-01:1000000", "add=h100-01:1000000"),
            ("request=nlp/bert-eval:0x8", "request=nlp/bert-eval:0x8: pods between 1"),
            ("hold=nlp/nope", "hold=nlp/nope: no job nlp/nope"),
            ("flavor=a100", "flavor: not an edit"),
        ):
            r = self.get(f"{PATH}?{query}", self.times["end"])
            assert r.status_code == 400, query
            assert words in r.content.decode(), (query, r.content)
        assert self.get(f"{PATH}?t=yesterday").status_code == 400

    def test_it_answers_400_naming_a_bad_repair_onto_or_share_request(self):
        for query, words in (
            ("repair=h100-99", "repair=h100-99: no node h100-99"),
            ("onto=nlp/bert-eval:h100-99", "onto=nlp/bert-eval:h100-99: no node h100-99"),
            ("onto=nlp/nope:h100-01", "onto=nlp/nope:h100-01: no job nlp/nope"),
            (
                "request=nlp/bert-eval:1x1.5",
                "request=nlp/bert-eval:1x1.5: expected <namespace>/<job>:<pods>x",
            ),
            ("request=nlp/bert-eval:1x0.0", "a share is between 0 and 1"),
            ("onto=vision/resnet-train:h100-01", "vision/resnet-train is not waiting at t"),
            ("repair=<script>", "repair=<script>: expected <node>"),
        ):
            r = self.get(f"{PATH}?{query}", self.times["end"])
            assert r.status_code == 400, query
            assert words in r.content.decode(), (query, r.content)
            assert r["Content-Type"].startswith("text/plain"), query  # never rendered as HTML

    def test_a_share_or_mig_request_and_a_repair_are_edits_of_the_page(self):
        r = self.get(PATH + "?request=nlp/bert-eval:1x0.5&repair=h100-04", self.times["end"])
        assert r.status_code == 200
        html = r.content.decode()
        assert "nlp/bert-eval asks 1 pod(s) × 0.5 of a GPU" in html and "repair h100-04" in html
        assert '<input type="hidden" name="request" value="nlp/bert-eval:1x0.5">' in html

    def test_it_answers_400_naming_a_bad_cpu_or_memory_edit(self):
        for query, words in (
            ("cpu_limit=nobody:8", "cpu_limit=nobody:8: no queue, project or department nobody at t"),
            ("cpu_quota=vision:-8", "cpu_quota=vision:-8: a CPU quota is 0 or more"),
            ("cpu_limit=vision:5000000", "cpu_limit=vision:5000000: cores must be between 0 and 1,000,000"),
            ("memory_limit=vision:2Ei", "memory_limit=vision:2Ei: memory must be between 0 and 1Ei"),
            ("memory_quota=vision:lots", "memory_quota=vision:lots: expected <name>:<bytes>"),
            ("memory_limit=nobody:1Gi", "memory_limit=nobody:1Gi: no queue, project or department nobody"),
        ):
            r = self.get(f"{PATH}?{query}", self.times["end"])
            assert r.status_code == 400, query
            assert words in r.content.decode(), (query, r.content)
            assert r["Content-Type"].startswith("text/plain"), query

    def test_cpu_and_memory_quota_and_limit_edits_are_edits_of_the_page_and_its_form(self):
        r = self.get(
            PATH + "?cpu_limit=vision:96&memory_quota=nlp:512Gi&cpu_quota=nlp:500m", self.times["end"]
        )
        assert r.status_code == 200
        assert [(e.kind, e.value) for e in r.context["wi"].edits] == [
            ("cpu_quota", "nlp:0.5"),
            ("cpu_limit", "vision:96"),
            ("memory_quota", "nlp:512Gi"),
        ]
        html = r.content.decode()
        assert "CPU limit of vision → 96 cores" in html and "memory quota of nlp → 512 GiB" in html
        assert "CPU quota of nlp → 0.5 cores" in html
        assert '<input type="hidden" name="cpu_limit" value="vision:96">' in html
        for kind in ("cpu_quota", "cpu_limit", "memory_quota", "memory_limit"):
            assert f'<input name="{kind}"' in html, kind

    def test_an_unknown_cluster_is_404(self):
        assert self.get("/c/nowhere/whatif/", self.times["end"]).status_code == 404

    def count(self, t) -> tuple[int, list[str]]:
        with CaptureQueriesContext(connection) as ctx:
            r = self.client.get(f"{PATH}?t={iso(t)}&w=2h&add=h100-01:2&uncordon=h100-04&quota=nlp:12")
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


class WhatIfEvictionTest(PageTestCase):
    def test_it_names_who_an_edit_would_evict_or_says_nobody(self):
        r = self.get(PATH + "?quota=nlp:16", self.times["end"])
        assert r.status_code == 200
        wi = r.context["wi"]
        html = r.content.decode()
        assert "Evicted or reclaimed with the edits" in html
        # nlp deserving 16 is below its share with bert-eval: it takes the room back from vision, over its quota 12
        assert [(x.label, [(v.label, v.action) for v in x.victims]) for x in wi.reclaims] == [
            ("nlp/bert-eval", [("vision/resnet-train", "reclaim")])
        ]
        assert wi.reclaims_before == [] and wi.evicted == ["vision/resnet-train"]
        section = html.split('id="evicted"', 1)[1].split("</section>", 1)[0]
        assert (
            "nlp/bert-eval</a> would start on" in section and "vision/resnet-train</a> (reclaim)" in section
        )
        r = self.get(PATH + "?cordon=h100-01", self.times["end"])
        assert "Nobody: no waiting job the pass leaves without room would reclaim" in r.content.decode()
