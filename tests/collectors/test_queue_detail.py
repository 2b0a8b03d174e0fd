from __future__ import annotations

from datetime import timedelta

from collectors import inventory
from tests.collectors.factories import T0, PageTestCase, job_obs

PATH = "/c/gpu-prod/queues/nlp/"


class QueueDetailTest(PageTestCase):
    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH, self.times["end"])

    def test_it_shows_priority_quota_limit_and_weight_as_of_t(self):
        r = self.get("/c/gpu-prod/queues/vision/", self.times["quota_cut"] - timedelta(minutes=1))
        s = self.get("/c/gpu-prod/queues/vision/", self.times["quota_cut"] + timedelta(minutes=1))
        assert (r.context["quota"], s.context["quota"]) == (16, 12)
        html = s.content.decode()
        assert "Over-quota weight" in html and "/c/gpu-prod/projects/vision/" in html
        assert self.get(PATH, self.times["end"]).context["state"]["priority"] == 40

    def test_it_orders_waiting_jobs_by_priority_class_then_submission_time(self):
        at = self.times["end"]
        inventory.record_states(
            self.cluster,
            [
                job_obs(
                    "nlp",
                    "late-build",
                    queue="nlp",
                    phase="Pending",
                    pods=1,
                    gpus_per_pod=1,
                    submitted=at,
                    priority_class="build",
                ),
                job_obs(
                    "nlp",
                    "early-train",
                    queue="nlp",
                    phase="Pending",
                    pods=1,
                    gpus_per_pod=1,
                    submitted=T0,
                    priority_class="train",
                ),
                job_obs(
                    "nlp",
                    "inference-x",
                    queue="nlp",
                    phase="Pending",
                    pods=1,
                    gpus_per_pod=2,
                    submitted=at - timedelta(minutes=1),
                    priority_class="inference",
                ),
            ],
            at,
        )
        r = self.get(PATH, at + timedelta(minutes=1))
        # inference (125) > build (100) > train (50); within train, earlier submission first
        assert [j.entity.name for j in r.context["pending"]] == [
            "inference-x",
            "late-build",
            "early-train",
            "bert-eval",
        ]
        assert [j.position for j in r.context["pending"]] == [1, 2, 3, 4]
        assert r.context["pending_count"] == 4 and r.context["pending_gpus"] == 1 + 1 + 2 + 8
        # each job page gives the same position (the scheduling model's order in the queue)
        for pos, name in enumerate(["inference-x", "late-build", "early-train", "bert-eval"], start=1):
            job = self.get(f"/c/gpu-prod/jobs/nlp/{name}/", at + timedelta(minutes=1))
            assert job.context["queue_position"] == (pos, 4), name

    def test_it_lists_running_jobs_and_gpus_in_use(self):
        r = self.get(PATH, self.times["end"])
        assert [j.entity.name for j in r.context["running"]] == ["llama-ft"]
        assert r.context["gpus_in_use"] == 4

    def test_it_says_plainly_when_the_queue_did_not_exist(self):
        self.assert_absent_before_first_version(PATH, T0)
