"""Fair shares, starvation and borrowing (incidents.diagnosis.fairshare): the queues page's arithmetic."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis.fairshare import Claim, divide, shares
from incidents.diagnosis.scheduling_pass import cluster_pass
from incidents.diagnosis.types import EntityState

from .dx_world import T0, job, node, pod, queue, world


def test_each_claimant_gets_its_quota_first_then_the_rest_by_weight_up_to_what_it_asks():
    share = divide(
        32,
        [
            Claim("a", deserved=8, limit=None, weight=1, asks=20),
            Claim("b", deserved=8, limit=None, weight=3, asks=40),
            Claim("c", deserved=8, limit=None, weight=1, asks=2),  # asks less than it deserves
        ],
    )
    # 8 + 8 + 2 = 18 first; 14 left, split 1:3 between a and b in whole GPUs as KAI does: 3 and 10, each with a
    # remainder of 0.5; the one GPU left goes to the larger remainder, a tie by name: a
    assert share == {"a": 12.0, "b": 18.0, "c": 2.0}


def test_a_limit_caps_the_share_and_what_it_leaves_goes_to_the_others():
    share = divide(
        40, [Claim("a", 8, 10, 1, 100), Claim("b", 8, None, 1, 100), Claim("n", None, None, 1, 100)]
    )
    assert share == {"a": 10.0, "b": 19.0, "n": 11.0}
    assert divide(10, [Claim("a", 8, None, 1, 0)]) == {"a": 0.0}  # nothing asked, nothing shared


def _department() -> EntityState:
    return EntityState(
        "department",
        "research",
        state={
            "quota_gpus": 16,
            "limit_gpus": 16,
            "queues": ["vision", "nlp"],
            "projects": ["vision", "nlp"],
        },
        valid_from=T0,
    )


def _busy(scheduler: str = "kai"):
    """Three 8-GPU nodes; vision (quota 8) holds 16, nlp (quota 8) holds nothing and waits for 8; speech (quota 8,
    no department) holds 8."""
    di = world(
        subjects=[],
        nodes=[node("h100-01"), node("h100-02"), node("h100-03")],
        pods=[
            pod("v0-0", "v0", "vision", node_name="h100-01"),
            pod("v1-0", "v1", "vision", node_name="h100-02"),
            pod("s0-0", "s0", "speech", node_name="h100-03"),
        ],
        jobs=[
            job("v0", "vision", phase="Running"),
            job("v1", "vision", phase="Running"),
            job("s0", "speech", phase="Running"),
            job("n1", "nlp", submitted=T0 + timedelta(minutes=1)),
        ],
        queues=[queue("vision", 8, 24), queue("nlp", 8, 24), queue("speech", 8, 24)],
        departments=[_department()],
    )
    di.scheduler = scheduler
    return di


def test_it_names_the_starved_queue_and_the_one_borrowing_while_it_starves():
    di = _busy()
    with di.indexed():
        s = shares(di, cluster_pass(di))
    q = {x.name: x for x in s.queues}
    assert s.capacity == 24
    assert [x.name for x in s.starved] == ["nlp"] and q["nlp"].short == 8
    assert q["vision"].borrowing == 8 and q["vision"].borrowing_while_starved == ["nlp"]
    assert q["speech"].borrowing == 0 and not q["speech"].starved
    # the department (quota 16, asks 24) gets 16 of 24, speech its 8; inside it, vision and nlp 8 each
    dept = s.departments[0]
    assert (dept.allocated, dept.fair_share, dept.waiting_units) == (16.0, 16.0, 8.0)
    assert (q["vision"].fair_share, q["nlp"].fair_share, q["speech"].fair_share) == (8.0, 8.0, 8.0)
    assert q["vision"].over_fair_share and not q["nlp"].over_fair_share
    assert [c.job.name for c in q["nlp"].waiting] == ["n1"]


def test_under_kueue_only_a_queue_of_the_same_cohort_borrows_from_a_starved_one():
    di = _busy("kueue")
    di.departments = []  # no cohort: vision borrows from the cluster, not from nlp's cohort
    with di.indexed():
        s = shares(di, cluster_pass(di))
    q = {x.name: x for x in s.queues}
    assert q["nlp"].starved and q["vision"].borrowing == 8
    assert q["vision"].borrowing_while_starved == []
    assert q["vision"].borrowing_limit == 16  # limit 24 over a nominal quota of 8
