"""KAI fair share and reclaim with departments (parent queues), as KAI's proportion plugin does them.

Fair share is divided level by level: the cluster among the top-level queues (departments and ungrouped
projects), then each department's share among its projects, never past a department's limit. Reclaim
compares queues where they diverge: siblings by their own quotas, across departments by the departments'.
"""

from __future__ import annotations

from datetime import timedelta

from .test_engine_sharing import job, pool, world

H100 = "NVIDIA-H100-80GB-HBM3"


def cluster(nodes: int = 2) -> dict:
    return {"name": "c", "scheduler": "kai", "nodepools": [{**pool("h100", H100, 8), "nodes": nodes}]}


def test_a_department_fair_share_is_divided_among_its_projects() -> None:
    w = world(
        {
            "cluster": cluster(),
            "departments": [{"name": "research", "quota": {"gpu": 8}}],
            "projects": [
                {"name": "vision", "department": "research", "quota": {"gpu": 4}},
                {"name": "nlp", "department": "research", "quota": {"gpu": 4}},
                {"name": "serving", "quota": {"gpu": 8}},
            ],
            "jobs": [
                job("v1", "vision", gpus_per_pod=8),
                job("v2", "vision", gpus_per_pod=8),
                job("s1", "serving", gpus_per_pod=8),
                job("s2", "serving", gpus_per_pod=8),
            ],
        }
    )
    w.advance_to(w.start + timedelta(minutes=3))
    fs = {n: p.fair_share_gpus for n, p in w.projects.items()}
    # Top level: research (quota 8) and serving (quota 8) split the 16 GPUs; inside research, nlp asks for
    # nothing, so vision gets research's whole 8. A flat division would give vision 6 and serving 10.
    assert fs == {"vision": 8.0, "nlp": 0.0, "serving": 8.0}


def test_a_department_limit_caps_its_fair_share() -> None:
    w = world(
        {
            "cluster": cluster(),
            "departments": [{"name": "research", "quota": {"gpu": 4}, "limit": {"gpu": 5}}],
            "projects": [
                {"name": "vision", "department": "research", "quota": {"gpu": 4}},
                {"name": "serving", "quota": {"gpu": 8}},
            ],
            "jobs": [
                job("v1", "vision", pods=4, gpus_per_pod=4),
                job("s1", "serving", pods=4, gpus_per_pod=4),
            ],
        }
    )
    w.advance_to(w.start + timedelta(minutes=3))
    # research: 4 deserved + 1 of the spare, up to its limit of 5; serving takes the rest (a flat division,
    # blind to the department's limit, would give vision 6 and serving 10).
    assert w.projects["vision"].fair_share_gpus == 5.0
    assert w.projects["serving"].fair_share_gpus == 11.0


def in_quota_department_world(nlp_priority: str = "train") -> dict:
    # research's projects each run within their own quota (8 of 8), but together they hold 16 of research's 8.
    return {
        "cluster": cluster(),
        "departments": [{"name": "research", "quota": {"gpu": 8}}],
        "projects": [
            {"name": "vision", "department": "research", "quota": {"gpu": 8}},
            {"name": "nlp", "department": "research", "quota": {"gpu": 8}},
            {"name": "serving", "quota": {"gpu": 8}},
        ],
        "jobs": [
            job("vision-a", "vision", submit="1m", gpus_per_pod=8, runtime="3h"),
            job("nlp-a", "nlp", submit="2m", gpus_per_pod=8, runtime="3h", priority=nlp_priority),
            job("serve", "serving", submit="10m", gpus_per_pod=8, runtime="3h"),
        ],
    }


def test_a_department_over_its_quota_is_reclaimed_from_even_where_its_projects_are_within_theirs() -> None:
    w = world(in_quota_department_world())
    w.advance_to(w.start + timedelta(minutes=14))
    (p,) = w.preemptions
    assert (p["kind"], p["victim"], p["preemptor"]) == ("reclaim", "nlp/nlp-a", "serving/serve")
    assert p["victim_project_allocated"] <= p["victim_project_quota"]  # nlp itself was within its quota
    assert w.jobs["serve"].state == "Running" and w.jobs["vision-a"].state == "Running"


def test_non_preemptible_work_of_a_department_over_quota_is_not_reclaimed() -> None:
    w = world(in_quota_department_world(nlp_priority="inference"))
    w.advance_to(w.start + timedelta(minutes=14))
    (p,) = w.preemptions
    assert (
        p["victim"] == "vision/vision-a"
    )  # the train job of the over-quota department, not the inference one


def test_a_project_under_its_quota_cannot_reclaim_across_departments_past_its_departments_quota() -> None:
    w = world(
        {
            "cluster": cluster(),
            "departments": [{"name": "research", "quota": {"gpu": 8}}],
            "projects": [
                {"name": "vision", "department": "research", "quota": {"gpu": 8}},
                {"name": "nlp", "department": "research", "quota": {"gpu": 8}},
                {"name": "serving", "quota": {"gpu": 0}},
            ],
            "jobs": [
                job("vision-a", "vision", submit="1m", gpus_per_pod=8, runtime="3h"),
                job("serve", "serving", submit="2m", gpus_per_pod=8, runtime="3h"),  # borrows 8 over its 0
                job("nlp-a", "nlp", submit="10m", gpus_per_pod=8, runtime="3h"),
            ],
        }
    )
    w.advance_to(w.start + timedelta(minutes=20))
    # nlp is within its own quota (0 + 8 <= 8), but research would hold 16 of its 8: at the top level, where
    # research and serving compare, research may not reclaim. A flat comparison would have evicted serve.
    assert w.preemptions == []
    assert w.jobs["serve"].state == "Running" and w.jobs["nlp-a"].state == "Pending"


def test_siblings_in_a_department_compare_by_their_own_quotas() -> None:
    w = world(
        {
            "cluster": cluster(),
            "departments": [{"name": "research", "quota": {"gpu": 16}}],
            "projects": [
                {"name": "vision", "department": "research", "quota": {"gpu": 8}},
                {"name": "nlp", "department": "research", "quota": {"gpu": 0}},
            ],
            "jobs": [
                job("nlp-a", "nlp", submit="1m", gpus_per_pod=8, runtime="3h"),
                job("nlp-b", "nlp", submit="2m", gpus_per_pod=8, runtime="3h"),
                job("vision-a", "vision", submit="10m", gpus_per_pod=8, runtime="3h"),
            ],
        }
    )
    w.advance_to(w.start + timedelta(minutes=14))
    (p,) = w.preemptions
    assert (p["victim"], p["preemptor"]) == ("nlp/nlp-b", "vision/vision-a")
