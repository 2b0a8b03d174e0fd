"""The cluster's scheduling pass and the what-if edits (incidents.diagnosis.scheduling_pass.cluster_pass,
incidents.diagnosis.whatif): which waiting jobs one pass starts, and where, before and after an edit."""

from __future__ import annotations

from datetime import timedelta

import pytest

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.types import Ref
from incidents.diagnosis.whatif import EditError, apply_edits, compare, parse_edit, parse_edits, suggest_edit

from .dx_world import T0, job, node, pod, queue, world


def _busy():
    """Two full 8-GPU nodes, one free; vision (quota 16) runs 8, nlp (quota 8) runs 8; three jobs wait."""
    nodes = [node("h100-01"), node("h100-02"), node("h100-03"), node("h100-04", unschedulable=True)]
    pods = [
        pod("v0-0", "v0", "vision", node_name="h100-01"),
        pod("n0-0", "n0", "nlp", node_name="h100-02"),
    ]
    jobs = [
        job("v0", "vision", phase="Running"),
        job("n0", "nlp", phase="Running"),
        job("n1", "nlp", submitted=T0 + timedelta(minutes=1)),
        job("v1", "vision", submitted=T0 + timedelta(minutes=2)),
        job("v2", "vision", submitted=T0 + timedelta(minutes=3)),
    ]
    return world(
        subjects=[Ref("job", "v2", "vision")],
        nodes=nodes,
        pods=pods,
        jobs=jobs,
        queues=[queue("vision", 16, 24), queue("nlp", 8, 8)],
    )


def _outcomes(cp):
    return {c.label: (c.outcome, c.nodes) for c in cp.considered}


def test_the_pass_serves_the_queue_below_its_fair_share_first_and_charges_each_start():
    di = _busy()
    with di.indexed():
        cp = SP.cluster_pass(di)
    # nlp is at its quota and limit (8 of 8): its job is held by quota; vision (8 of 16) is below its share
    got = _outcomes(cp)
    assert got["vision/v1"] == ("starts", {"h100-03": 1})
    assert got["vision/v2"][0] == "no room"  # h100-03 went to v1, h100-04 is cordoned
    assert got["nlp/n1"][0] == "quota"
    # once v1 is charged both queues are at their quota; with its job vision would hold 24 of its fair share
    # 16 (1.5) and nlp 16 of 8 (2, its limit caps its share): the smaller share goes first, as KAI weighs it
    assert [c.label for c in cp.considered] == ["vision/v1", "vision/v2", "nlp/n1"]
    assert cp.started_units == {("vision", "vision"): 8.0}
    assert "fair share" in cp.rule


def test_position_names_the_jobs_ahead_that_compete_for_the_same_gpus():
    di = _busy()
    v2 = di.find("job", "v2", "vision")
    with di.indexed():
        pos = SP.position(di, v2)
    assert pos is not None
    assert (pos.in_queue, pos.queue_size, pos.in_cluster, pos.waiting) == (2, 2, 2, 3)
    assert [c.label for c in pos.competitors] == ["vision/v1"]  # nlp/n1 comes after it (fair share)
    assert [c.label for c in pos.starting_ahead] == ["vision/v1"]
    assert SP.position(di, di.find("job", "v0", "vision")) is None  # a running job has no place in line


def test_uncordoning_a_node_starts_the_next_job_there():
    di = _busy()
    wi = compare(di, [parse_edit("uncordon", "h100-04")])
    changed = {j.job.ref.label: (j.change, j.after.nodes if j.after else None) for j in wi.changed}
    assert changed == {"vision/v2": ("starts", {"h100-04": 1})}
    vision = next(a for a in wi.allocations if a.name == "vision")
    assert (vision.now, vision.before, vision.after, vision.delta) == (8.0, 16.0, 24.0, 8.0)
    assert di.find("node", "h100-04").get("unschedulable") is True  # the input itself is not changed


def test_raising_a_quota_lets_the_held_job_in_ahead_of_the_other_queue():
    di = _busy()
    wi = compare(di, parse_edits({"quota": ["nlp:16"], "limit": ["nlp:16"]}))
    got = {j.job.ref.label: j.change for j in wi.changed}
    # nlp (8 of 16) now shares the order with vision (8 of 16); n1 is older, takes h100-03, v1 loses it
    assert got == {"nlp/n1": "starts", "vision/v1": "no longer starts"}


def test_adding_nodes_of_a_shape_starts_every_waiting_job_that_fits_them():
    di = _busy()
    wi = compare(di, [parse_edit("add", "h100-01:2")])
    assert wi.added_nodes == ["h100-01+1", "h100-01+2"]
    # first fit in node order: the new nodes sort before h100-03
    assert {j.job.ref.label: j.after.nodes for j in wi.starting} == {
        "vision/v1": {"h100-01+1": 1},
        "vision/v2": {"h100-01+2": 1},
    }


def test_holding_a_job_gives_its_room_to_the_next_and_removing_a_running_one_frees_its_gpus():
    di = _busy()
    wi = compare(di, [parse_edit("hold", "vision/v1")])
    assert {j.job.ref.label: j.change for j in wi.changed} == {
        "vision/v2": "starts",
        "vision/v1": "no longer starts",
    }
    wi = compare(di, [parse_edit("remove", "vision/v0")])
    got = {j.job.ref.label: (j.change, j.after.nodes if j.after else None) for j in wi.changed}
    assert got == {"vision/v1": ("moves", {"h100-01": 1}), "vision/v2": ("starts", {"h100-03": 1})}
    vision = next(a for a in wi.allocations if a.name == "vision")
    assert vision.now == 0.0 and vision.after == 16.0


def test_a_smaller_request_fits_where_the_larger_did_not():
    di = _busy()
    wi = compare(di, [parse_edit("request", "vision/v1:1x4"), parse_edit("request", "vision/v2:1x4")])
    assert {j.job.ref.label: j.after.nodes for j in wi.starting} == {
        "vision/v1": {"h100-03": 1},
        "vision/v2": {"h100-03": 1},
    }


@pytest.mark.parametrize(
    ("kind", "raw", "words"),
    [
        ("quota", "vision:-1", "expected <name>:<gpus>"),
        ("quota", "vision:1000000", "between 0 and 100000"),
        ("add", "h100-01:1000000", "expected <node>:<n>"),
        ("add", "h100-01:65", "between 1 and 64"),
        ("request", "vision/v1:0x8", "pods between 1"),
        ("hold", "v1", "expected <namespace>/<job>"),
    ],
)
def test_it_refuses_a_malformed_edit_naming_it(kind, raw, words):
    with pytest.raises(EditError) as err:
        parse_edit(kind, raw)
    assert err.value.param == kind and words in str(err.value) and raw in str(err.value)


@pytest.mark.parametrize(
    ("kind", "raw", "words"),
    [
        ("quota", "nobody:4", "no queue, project or department nobody"),
        ("cordon", "h100-99", "no node h100-99"),
        ("hold", "vision/nope", "no job vision/nope"),
        ("request", "vision/v0:1x4", "vision/v0 is not waiting"),
    ],
)
def test_it_refuses_an_edit_of_something_that_does_not_exist_at_t(kind, raw, words):
    with pytest.raises(EditError) as err:
        apply_edits(_busy(), [parse_edit(kind, raw)])
    assert err.value.param == kind and words in str(err.value)


def test_it_bounds_the_number_of_edits_and_of_nodes_added():
    with pytest.raises(EditError, match="at most 20 edits"):
        parse_edits({"cordon": [f"n{i}" for i in range(21)]})
    with pytest.raises(EditError, match="at most 256 nodes"):
        parse_edits({"add": [f"n{i}:64" for i in range(5)]})


def test_the_suggested_edit_is_the_quota_a_held_job_lacks_or_the_job_ahead_that_takes_its_room():
    di = _busy()
    with di.indexed():
        n1 = di.find("job", "n1", "nlp")
        edit = suggest_edit(di, n1, SP.position(di, n1))
        assert edit is not None and (edit.kind, edit.value) == ("limit", "nlp:16")
        v2 = di.find("job", "v2", "vision")
        edit = suggest_edit(di, v2, SP.position(di, v2))
        assert edit is not None and (edit.kind, edit.value) == ("hold", "vision/v1")


def test_a_waiting_job_whose_pods_are_all_bound_is_placed_and_competes_for_nothing():
    di = _busy()
    di.jobs.append(job("v3", "vision", submitted=T0 - timedelta(minutes=5)))
    di.pods.append(pod("v3-0", "v3", "vision", node_name="h100-03", phase="Pending"))
    with di.indexed():
        cp = SP.cluster_pass(di)
        v3 = cp.find("vision", "v3")
        assert v3 is not None and (v3.outcome, v3.why) == ("placed", "its pods are bound")
        pos = SP.position(di, di.find("job", "v2", "vision"))
    assert pos is not None and "vision/v3" not in [c.label for c in pos.competitors]


def test_kueue_strict_fifo_stops_a_queue_at_a_head_that_cannot_start():
    di = _busy()
    di.scheduler = "kueue"
    # a ClusterQueue without a cohort admits within its nominal quota only: vision's takes v9's 16 GPUs, no
    # node does
    di.find("queue", "vision").state.update(quota_gpus=32, limit_gpus=32)
    di.jobs.append(job("v9", "vision", gpus_per_pod=16, submitted=T0 - timedelta(minutes=5)))
    with di.indexed():
        best_effort = _outcomes(SP.cluster_pass(di))
    assert best_effort["vision/v9"][0] == "no room" and best_effort["vision/v1"][0] == "starts"
    vision = di.find("queue", "vision")
    vision.state["queueing_strategy"] = "StrictFIFO"
    with di.indexed():
        strict = _outcomes(SP.cluster_pass(di))
    assert strict["vision/v9"][0] == "no room"
    assert strict["vision/v1"][0] == strict["vision/v2"][0] == "behind its queue's head"


def test_a_departments_limit_holds_its_projects_jobs_until_the_edit_raises_it():
    from incidents.diagnosis.types import EntityState

    di = _busy()
    di.departments = [
        EntityState(
            "department",
            "research",
            state={"projects": ["vision", "nlp"], "quota_gpus": 16, "limit_gpus": 16, "scheduler": "kai"},
            valid_from=T0,
        )
    ]
    with di.indexed():
        held = _outcomes(SP.cluster_pass(di))
    assert held["vision/v1"][0] == "quota"
    wi = compare(di, [parse_edit("limit", "research:24")])
    assert {j.job.ref.label: j.change for j in wi.changed} == {"vision/v1": "starts"}
    research = next(a for a in wi.allocations if a.kind == "department")
    assert (research.name, research.now, research.before, research.after) == ("research", 16.0, 16.0, 24.0)
    assert research.display["limit"] == "24" and research.display["delta"] == "+8"


def _over_share():
    """One 8-GPU node held by b's two 4-GPU jobs (b deserves 4); a (deserving 0) waits with a 4-GPU job."""
    pods = [
        pod("b1-0", "b1", "b", node_name="h100-01", gpus=4),
        pod("b2-0", "b2", "b", node_name="h100-01", gpus=4),
    ]
    b1 = job("b1", "b", phase="Running", gpus_per_pod=4, submitted=T0)
    b2 = job("b2", "b", phase="Running", gpus_per_pod=4, submitted=T0 + timedelta(minutes=5))
    a1 = job("a1", "a", gpus_per_pod=4, submitted=T0 + timedelta(minutes=10))
    return world(
        subjects=[Ref("job", "a1", "a")],
        nodes=[node("h100-01")],
        pods=pods,
        jobs=[b1, b2, a1],
        queues=[queue("a", 0, 8), queue("b", 4, 8)],
    )


def test_an_edit_that_makes_a_queue_deserve_more_names_the_job_it_would_reclaim():
    di = _over_share()
    wi = compare(di, parse_edits({"quota": ["a:4"]}))
    # before: a, over its share with the job, may not reclaim; with a quota of 4 it is within it, and b (8 of its
    # 4) gives back its newest job
    assert wi.reclaims_before == []
    assert [(r.label, [(v.label, v.action) for v in r.victims], r.nodes) for r in wi.reclaims] == [
        ("a/a1", [("b/b2", "reclaim")], {"h100-01": 1})
    ]
    assert wi.evicted == ["b/b2"]
    # an edit that changes nothing for a evicts nobody
    assert compare(di, parse_edits({"quota": ["b:4"]})).evicted == []


def test_reclaimers_take_turns_each_on_the_state_the_one_before_left():
    di = _over_share()
    di.jobs.append(job("a2", "a", gpus_per_pod=4, submitted=T0 + timedelta(minutes=11)))
    wi = compare(di, parse_edits({"quota": ["a:4"]}))
    # a1 reclaims b2; a2 would take a over its 4: b, at its 4 once b2 is gone, keeps b1
    assert [r.label for r in wi.reclaims] == ["a/a1"]
    wi8 = compare(di, parse_edits({"quota": ["a:8"]}))
    assert [(r.label, [v.label for v in r.victims]) for r in wi8.reclaims] == [("a/a1", ["b/b2"])]
