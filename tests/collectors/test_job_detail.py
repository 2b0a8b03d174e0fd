from __future__ import annotations

from datetime import timedelta

from tests.collectors.factories import T0, PageTestCase

PATH = "/c/gpu-prod/jobs/nlp/bert-eval/"


class JobDetailTest(PageTestCase):
    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH, self.times["end"])

    def test_it_links_project_queue_pods_and_nodes(self):
        html = self.get("/c/gpu-prod/jobs/vision/resnet-train/", self.times["end"]).content.decode()
        for href in (
            "/c/gpu-prod/projects/vision/",
            "/c/gpu-prod/queues/vision/",
            "/c/gpu-prod/pods/vision/resnet-train-0/",
            "/c/gpu-prod/pods/vision/resnet-train-1/",
            "/c/gpu-prod/nodes/h100-01/",
            "/c/gpu-prod/nodes/h100-02/",
        ):
            assert href in html, href
        assert "Pods (2, 2 running)" in html

    def test_it_shows_the_request_as_of_t_and_its_history(self):
        four = self.get(PATH, self.times["bert_4"] + timedelta(minutes=5))
        eight = self.get(PATH, self.times["bert_8"] + timedelta(minutes=5))
        assert four.context["state"]["gpus_per_pod"] == 4 and eight.context["state"]["gpus_per_pod"] == 8
        assert "1 pod × 4" in four.content.decode() and "1 pod × 8" in eight.content.decode()
        hist = [(c.field, c.old, c.new) for c in eight.context["request_history"]]
        assert ("gpus_per_pod", 4, 8) in hist and ("created", None, None) in hist

    def test_it_shows_the_scheduling_message_and_the_queue_position(self):
        r = self.get(PATH, self.times["end"])
        html = r.content.decode()
        assert "0/4 nodes are available: 2 Insufficient nvidia.com/gpu" in html
        assert r.context["queue_position"] == (1, 1)
        assert "position 1 of 1 waiting in this queue</a>" in html  # not the scheduler's order across queues
        assert "/c/gpu-prod/jobs/?queue=nlp&amp;phase=Pending&amp;t=" in html

    def test_it_leaves_the_why_pending_slot(self):
        html = self.get(PATH, self.times["end"]).content.decode()
        assert '<section class="panel" id="why-pending">' in html

    def test_it_shows_events_of_its_pods(self):
        r = self.get(PATH, self.times["bert_8"])
        assert [(e.involved_name, e.reason) for e in r.context["events"]] == [
            ("bert-eval-0", "FailedScheduling")
        ]

    def test_it_says_plainly_when_the_job_did_not_exist(self):
        self.assert_absent_before_first_version(PATH, T0 + timedelta(minutes=30))
        r = self.get("/c/gpu-prod/jobs/nlp/old-sweep/", self.times["end"])
        assert (
            "did not exist at" in r.content.decode()
            and r.context["existed_until"] == self.times["sweep_gone"]
        )


class JobWhyPendingTest(PageTestCase):
    WHY = PATH + "why/"

    def test_it_explains_only_jobs_that_wait_or_failed(self):
        running = self.get("/c/gpu-prod/jobs/vision/resnet-train/", self.times["end"])
        assert running.context["explain"] is False and 'id="why-pending"' not in running.content.decode()

    def test_it_loads_the_explanation_lazily_with_a_link_that_works_without_js(self):
        html = self.get(PATH, self.times["end"]).content.decode()
        url = "/c/gpu-prod/jobs/nlp/bert-eval/why/?t=2026-11-29T03%3A20%3A00Z&amp;w=2h"
        assert f'hx-get="{url}" hx-trigger="load"' in html and f'<a href="{url}">' in html

    def test_it_serves_the_panel_as_a_fragment_to_htmx_and_as_a_page_without_js(self):
        frag = self.get(self.WHY, self.times["end"], headers={"HX-Request": "true"})
        assert frag.status_code == 200 and "<html" not in frag.content.decode()
        page = self.get(self.WHY, self.times["end"])
        assert "<html" in page.content.decode() and 'id="why-pending"' in page.content.decode()
        assert self.get(self.WHY, self.times["end"], client=self.anon).status_code == 302

    def test_it_renders_the_diagnosis_when_the_diagnosis_package_provides_one(self):
        try:
            import incidents.diagnosis.explain  # noqa: F401
        except ImportError:
            self.skipTest("incidents.diagnosis.explain is not there yet")
        r = self.get(self.WHY, self.times["end"], headers={"HX-Request": "true"})
        assert r.context["why_pending"] is not None
        assert r.context["why_pending_template"] == "incidents/_why_pending.html"

    def test_it_says_so_when_the_job_did_not_exist(self):
        r = self.get(self.WHY, self.story.t0, headers={"HX-Request": "true"})
        assert "did not exist" in r.content.decode()


class CrashLoopStatusTest(PageTestCase):
    """A crash-looping job is not a green "Running": its job and pod pages name the container's reason."""

    def test_the_job_page_names_the_crash_loop_and_explains_it(self):
        r = self.get("/c/gpu-prod/jobs/nlp/llama-ft/", T0 + timedelta(hours=2, minutes=10))
        html = r.content.decode()
        assert dict(r.context["pods_trouble"]) == {"CrashLoopBackOff": 1}
        assert "CrashLoopBackOff" in html and "Why it is not running" in html
        assert "Pods (1, 0 running)" in html
        before = self.get("/c/gpu-prod/jobs/nlp/llama-ft/", T0 + timedelta(hours=1))
        assert not before.context["pods_trouble"] and "Pods (1, 1 running)" in before.content.decode()

    def test_the_pod_page_shows_crashloopbackoff_with_its_phase(self):
        r = self.get("/c/gpu-prod/pods/nlp/llama-ft-0/", T0 + timedelta(hours=2, minutes=10))
        assert r.context["pod_status"] == "CrashLoopBackOff"
        assert "phase Running" in r.content.decode()

    def test_the_node_page_names_the_crash_loop_in_its_pod_rows(self):
        r = self.get("/c/gpu-prod/nodes/h100-03/", T0 + timedelta(hours=2, minutes=10))
        llama = next(p for p in r.context["pods"] if p.entity.name == "llama-ft-0")
        assert llama.status == "CrashLoopBackOff" and "CrashLoopBackOff" in r.content.decode()
