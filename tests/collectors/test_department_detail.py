from __future__ import annotations

from datetime import timedelta

from collectors import inventory
from collectors.inventory import Observed
from tests.collectors.factories import PageTestCase, pod_obs

PATH = "/c/gpu-prod/departments/research/"


def department_obs(quota: int, limit: int | None) -> Observed:
    state = {
        "scheduler": "kai",
        "quota_gpus": quota,
        "limit_gpus": limit,
        "queues": ["nlp", "vision"],
        "projects": ["nlp", "vision"],
        "parent": "default-parent-queue",
        "allocated_gpus": None,
    }
    return Observed(
        kind="department",
        name="research",
        state=state,
        hot={"gpus": quota, "gpus_allocatable": limit, "queue": "research"},
    )


class DepartmentDetailTest(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.at = self.times["end"]
        share = pod_obs(
            "vision", "nb-0-aaaaa", job="nb", queue="vision", gpus=0, phase="Running", node="h100-01"
        )
        share.state["gpu_units"] = share.hot["gpu_units"] = 0.5
        inventory.record_states(self.cluster, [department_obs(20, 24), share], self.at - timedelta(minutes=5))

    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH, self.at)

    def test_it_shows_quota_limit_and_each_projects_use_in_fractions(self):
        r = self.get(PATH, self.at)
        assert r.status_code == 200
        assert (r.context["quota"], r.context["limit"]) == (20, 24)
        rows = {p["ref"].name: p for p in r.context["projects"]}
        assert set(rows) == {"nlp", "vision"}
        # the vision share counts 0.5, whole-GPU pods their GPUs (recorded before gpu_units existed)
        whole = inventory.as_of(self.cluster, "pod", self.at).filter(project="vision", phase="Running")
        expected = sum(
            (v.gpu_units if v.gpu_units is not None else v.gpus or 0) for v in whole.exclude(node="")
        )
        assert rows["vision"]["in_use"] == expected and expected % 1 == 0.5
        html = r.content.decode()
        assert "/c/gpu-prod/projects/vision/" in html and "/c/gpu-prod/queues/nlp/" in html

    def test_a_department_quota_change_shows_as_a_policy_change(self):
        inventory.record_states(self.cluster, [department_obs(20, 20)], self.at)
        r = self.get(PATH, self.at + timedelta(minutes=1))
        assert r.context["limit"] == 20
        assert any(ch.field == "limit_gpus" for ch in r.context["policy_changes"])
