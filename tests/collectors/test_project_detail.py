from __future__ import annotations

from datetime import timedelta

from tests.collectors.factories import T0, PageTestCase

PATH = "/c/gpu-prod/projects/vision/"


class ProjectDetailTest(PageTestCase):
    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH, self.times["end"])

    def test_it_shows_quota_as_of_t(self):
        before = self.get(PATH, self.times["quota_cut"] - timedelta(minutes=1))
        after = self.get(PATH, self.times["quota_cut"] + timedelta(minutes=1))
        assert (before.context["quota"], after.context["quota"]) == (16, 12)
        assert before.context["limit"] == after.context["limit"] == 24

    def test_it_shows_gpus_in_use_against_quota(self):
        r = self.get(PATH, self.times["end"])
        assert r.context["gpus_in_use"] == 16  # resnet-train: 2 running pods x 8
        assert r.context["over_quota"] is True
        assert "over quota" in r.content.decode()
        early = self.get(PATH, self.times["resnet_start"] - timedelta(minutes=1))
        assert early.context["gpus_in_use"] == 0 and early.context["over_quota"] is False

    def test_it_lists_running_and_pending_jobs_with_gpu_counts_and_links_counts_to_the_list(self):
        r = self.get(PATH, self.times["end"])
        assert [j.entity.name for j in r.context["running"]] == ["resnet-train"]
        assert [j.entity.name for j in r.context["pending"]] == ["vit-large"]
        html = r.content.decode()
        assert "/c/gpu-prod/jobs/?project=vision&amp;phase=Pending&amp;t=" in html
        assert "/c/gpu-prod/queues/vision/" in html

    def test_it_shows_recent_policy_changes_with_who(self):
        r = self.get(PATH, self.times["end"])
        changes = [(c.entity.kind, c.field, c.old, c.new, c.actor) for c in r.context["policy_changes"]]
        assert ("project", "quota_gpus", 16, 12, "alice@example.org") in changes
        assert ("queue", "quota_gpus", 16, 12, "alice@example.org") in changes
        assert "alice@example.org" in r.content.decode()

    def test_it_says_plainly_when_the_project_did_not_exist(self):
        self.assert_absent_before_first_version(PATH, T0)
