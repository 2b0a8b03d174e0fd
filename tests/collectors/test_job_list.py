from __future__ import annotations

from datetime import timedelta

from tests.collectors.factories import PageTestCase

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
