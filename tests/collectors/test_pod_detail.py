from __future__ import annotations

from datetime import timedelta

from tests.collectors.factories import PageTestCase

PATH = "/c/gpu-prod/pods/nlp/llama-ft-0/"


class PodDetailTest(PageTestCase):
    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH, self.times["end"])

    def test_it_links_node_job_queue_project_and_gpus(self):
        html = self.get(PATH, self.times["end"]).content.decode()
        for href in (
            "/c/gpu-prod/nodes/h100-03/",
            "/c/gpu-prod/jobs/nlp/llama-ft/",
            "/c/gpu-prod/queues/nlp/",
            "/c/gpu-prod/projects/nlp/",
            "/c/gpu-prod/gpus/GPU-",
        ):
            assert href in html, href

    def test_it_shows_container_state_last_state_restarts_and_image_as_of_t(self):
        before = self.get(PATH, self.times["cordon"] - timedelta(minutes=5))
        after = self.get(PATH, self.times["cordon"] + timedelta(minutes=5))
        (c0,) = before.context["containers"]
        (c1,) = after.context["containers"]
        assert (c0["state_word"], c0["restart_count"]) == ("running", 0)
        assert (c1["state_word"], c1["state_reason"], c1["restart_count"]) == (
            "waiting",
            "CrashLoopBackOff",
            3,
        )
        assert (c1["last_word"], c1["last_reason"]) == ("terminated", "Error")
        html = after.content.decode()
        assert "registry.local/nlp/llama-ft:1.4" in html and "exit code 1" in html

    def test_it_shows_env_as_stored_redacted(self):
        html = self.get(PATH, self.times["end"]).content.decode()
        assert "WANDB_API_KEY" in html and "[redacted]" in html

    def test_it_shows_conditions_and_events_near_t(self):
        r = self.get("/c/gpu-prod/pods/nlp/bert-eval-0/", self.times["bert_8"])
        html = r.content.decode()
        assert "PodScheduled" in html and "Unschedulable" in html
        assert [e.reason for e in r.context["events"]] == ["FailedScheduling"]
        far = self.get("/c/gpu-prod/pods/nlp/bert-eval-0/", self.times["end"] + timedelta(hours=3))
        assert far.context["events"] == []

    def test_it_says_plainly_when_the_pod_was_deleted_with_a_link_to_when_it_existed(self):
        r = self.get("/c/gpu-prod/pods/nlp/old-sweep-0/", self.times["end"])
        html = r.content.decode()
        assert "did not exist at" in html
        assert r.context["existed_until"] == self.times["sweep_gone"]
        assert "It existed until" in html and "t=2026-11-29T00%3A39%3A59Z" in html
