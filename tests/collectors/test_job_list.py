from __future__ import annotations

from datetime import timedelta
from unittest.mock import patch

from tests.collectors.factories import PageTestCase, iso

PATH = "/c/gpu-prod/jobs/"


class JobListTest(PageTestCase):
    def names(self, query: str, t=None) -> list[str]:
        r = self.get(PATH + query, t or self.times["end"])
        assert r.status_code == 200, r.content
        return [v.entity.name for v in r.context["versions"]]

    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH + "?queue=nlp", self.times["end"])

    def test_it_lists_jobs_as_of_t(self):
        assert self.names("") == ["bert-eval", "llama-ft", "resnet-train", "vit-large"]
        assert "old-sweep" in self.names("", self.times["sweep_gone"] - timedelta(minutes=1))

    def test_it_filters_by_queue_project_phase_namespace_and_node(self):
        assert self.names("?queue=nlp") == ["bert-eval", "llama-ft"]
        assert self.names("?project=vision&phase=Running") == ["resnet-train"]
        assert self.names("?namespace=vision&phase=Pending") == ["vit-large"]
        assert self.names("?node=h100-02") == ["resnet-train"]
        assert self.names("?node=h100-04") == []
        assert self.names("?queue=nobody") == []

    def test_it_rejects_invalid_filters_with_a_400_naming_them(self):
        for query, field in (
            ("?phase=Sleeping", "phase"),
            ("?queue=Bad_Name!", "queue"),
            ("?node=" + "x" * 300, "node"),
        ):
            r = self.get(PATH + query, self.times["end"])
            assert r.status_code == 400, query
            assert f"<code>{field}</code>" in r.content.decode()

    def test_it_links_each_job_queue_and_project(self):
        html = self.get(PATH + "?phase=Pending", self.times["end"]).content.decode()
        assert "/c/gpu-prod/jobs/nlp/bert-eval/" in html and "/c/gpu-prod/queues/nlp/" in html
        assert "/c/gpu-prod/projects/vision/" in html

    def test_it_is_a_404_for_an_unknown_cluster(self):
        assert self.get("/c/nowhere/jobs/").status_code == 404


class JobListCursorFormTest(PageTestCase):
    def test_it_keeps_the_filters_when_a_time_is_typed_into_the_cursor_bar(self):
        html = self.get(PATH + "?queue=nlp&phase=Pending", self.times["end"]).content.decode()
        assert '<input type="hidden" name="queue" value="nlp">' in html
        assert '<input type="hidden" name="phase" value="Pending">' in html


@patch("web.inventory.joblist.LIST_LIMIT", 3)
class JobListPagesTest(PageTestCase):
    """More jobs than a page holds (LIST_LIMIT patched to 3: the story has 4 jobs at its end)."""

    def page(self, query: str, status: int = 200) -> tuple[list[str], str, dict]:
        r = self.get(PATH + query, self.times["end"])
        assert r.status_code == status, r.content[:500]
        return [v.entity.name for v in r.context["versions"]], r.content.decode(), r.context

    def test_it_shows_the_count_and_links_the_next_and_last_pages_keeping_t_w_and_filters(self):
        names, html, ctx = self.page("")
        assert names == ["bert-eval", "llama-ft", "resnet-train"]
        assert "4 jobs, ordered by namespace and name; 1–3 shown (page 1 of 2)." in html
        t = iso(self.times["end"]).replace(":", "%3A")
        assert ctx["next_url"] == ctx["last_url"] == f"{PATH}?page=2&t={t}&w=2h"
        assert f'href="{PATH}?page=2&amp;t={t}&amp;w=2h" rel="next"' in html
        assert ctx["prev_url"] == ctx["first_url"] == ""

        names, html, ctx = self.page("?page=2")
        assert names == ["vit-large"]
        assert "4 jobs, ordered by namespace and name; 4–4 shown (page 2 of 2)." in html
        assert ctx["prev_url"] == ctx["first_url"] == f"{PATH}?page=1&t={t}&w=2h"
        assert ctx["next_url"] == ctx["last_url"] == ""

    def test_it_keeps_the_filters_in_the_page_links(self):
        with patch("web.inventory.joblist.LIST_LIMIT", 1):
            _, _, ctx = self.page("?queue=nlp")
        t = iso(self.times["end"]).replace(":", "%3A")
        assert ctx["next_url"] == f"{PATH}?queue=nlp&page=2&t={t}&w=2h"

    def test_it_numbers_waiting_jobs_across_pages_in_queue_order(self):
        with patch("web.inventory.joblist.LIST_LIMIT", 1):
            first, html1, _ = self.page("?phase=Pending")
            second, html2, ctx = self.page("?phase=Pending&page=2")
        everything, _, _ = self.page("?phase=Pending")
        assert first + second == everything and len(everything) == 2
        assert '<td class="num">1</td>' in html1 and '<td class="num">2</td>' in html2
        assert [v.position for v in ctx["versions"]] == [2]

    def test_it_shows_the_last_page_when_the_page_asked_for_is_past_it(self):
        names, html, ctx = self.page("?page=9")
        assert names == ["vit-large"] and ctx["page"] == 2
        assert "There is no page 9 at this time (4 jobs): this is the last page." in html

    def test_it_rejects_a_page_that_is_not_a_positive_number_with_a_400(self):
        for query in ("?page=0", "?page=-1", "?page=two", "?page=" + "9" * 12):
            _, html, _ = self.page(query, status=400)
            assert "<code>page</code>" in html, query

    def test_it_shows_no_pager_when_everything_fits(self):
        with patch("web.inventory.joblist.LIST_LIMIT", 500):
            names, html, _ = self.page("")
        assert len(names) == 4 and 'class="pager"' not in html and "shown (page" not in html
