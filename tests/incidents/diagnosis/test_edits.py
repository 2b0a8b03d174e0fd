"""The smallest edits that would start a waiting job (incidents.diagnosis.edits), each checked by one scheduling
pass over the state at t with the edit applied, and the what-if edits they are made of (repair, onto, a request
as a share or a MIG profile)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.edits import MAX_PASSES, smallest_edits
from incidents.diagnosis.request import job_request
from incidents.diagnosis.types import EntityState, Ref
from incidents.diagnosis.whatif import Edit, EditError, apply_edits, parse_edit, would_start

from .dx_world import T0, gpu, job, node, pod, queue, world


def _world(nodes, pods=(), jobs=(), queues=None, departments=()):
    return world(
        subjects=[],
        nodes=list(nodes),
        pods=list(pods),
        jobs=list(jobs),
        queues=queues or [queue("vision", 64, 64), queue("nlp", 64, 64)],
        departments=list(departments),
    )


def _answers(di, label):
    ns, name = label.split("/")
    with di.indexed():
        base = SP.cluster_pass(di)
        return smallest_edits(di, di.find("job", name, ns), base)


def _full(name, ns="vision", gpus=8, **kw):
    """A running job of one pod holding ``gpus`` GPUs on ``name``."""
    return job(f"run-{name}", ns, phase="Running", gpus_per_pod=gpus, **kw), pod(
        f"run-{name}-0", f"run-{name}", ns, node_name=name, gpus=gpus
    )


def test_a_job_held_by_its_quota_gets_the_least_raise_that_starts_it_and_where():
    r1, p1 = _full("h100-01")
    di = _world(
        [node("h100-01"), node("h100-02")],
        [p1],
        [r1, job("wait", "vision", submitted=T0 + timedelta(minutes=1))],
        queues=[queue("vision", 8, 8)],
    )
    di.gpus = [gpu(f"GPU-2-{i}", "h100-02", i) for i in range(8)]
    u = _answers(di, "vision/wait")
    a = u.answers[0]
    assert a.kind == "limit" and a.edits == [Edit("limit", "vision", number=16)]
    assert a.sentence == "limit +8 on vision (to 16) → starts now on h100-02, GPUs 0–7; nothing evicted"
    # the least: one GPU less does not start it
    with di.indexed():
        assert (
            would_start(di, di.find("job", "wait", "vision"), Edit("limit", "vision", number=15)).outcome
            == "quota"
        )


def test_raising_a_departments_limit_names_whom_it_delays():
    # Kueue: nlp's ClusterQueue goes first (priority 100) but its cohort is full; vision's job takes the free node
    r1, p1 = _full("h100-01", "nlp")
    cohort = EntityState(
        "department",
        "research",
        state={
            "projects": ["nlp"],
            "queues": ["nlp"],
            "quota_gpus": 8,
            "limit_gpus": 8,
            "scheduler": "kueue",
        },
        valid_from=T0,
    )
    di = _world(
        [node("h100-01"), node("h100-02")],
        [p1],
        [r1, job("n1", "nlp"), job("v1", "vision", submitted=T0 + timedelta(minutes=5))],
        queues=[queue("nlp", 64, 64, priority=100), queue("vision", 64, 64)],
        departments=[cohort],
    )
    di.scheduler = "kueue"
    a = _answers(di, "nlp/n1").answers[0]
    assert a.edits == [Edit("limit", "research", number=16)]
    assert (
        a.sentence
        == "limit +8 on research (to 16) → starts now on h100-02; nothing evicted; delays vision/v1"
    )
    assert [c.label for c in a.delayed] == ["vision/v1"]


def test_a_cordoned_or_broken_node_it_could_use_is_uncordoned_or_repaired():
    r1, p1 = _full("h100-01")
    di = _world(
        [node("h100-01"), node("h100-02", unschedulable=True), node("h100-03", ready=False)],
        [p1],
        [r1, job("wait")],
    )
    kinds = {a.kind: (a.edits, a.nodes) for a in _answers(di, "vision/wait").answers}
    assert kinds["uncordon"] == ([Edit("uncordon", "h100-02")], {"h100-02": 1})
    assert kinds["repair"] == ([Edit("repair", "h100-03")], {"h100-03": 1})


def test_a_node_whose_device_plugin_lost_gpus_is_repaired_to_its_nominal_count():
    di = _world([node("h100-01", allocatable=4)], [], [job("wait")])
    a = next(a for a in _answers(di, "vision/wait").answers if a.kind == "repair")
    assert a.edits == [Edit("repair", "h100-01")] and a.nodes == {"h100-01": 1}


def test_holding_the_jobs_ahead_names_them_and_evicts_nothing():
    di = _world(
        [node("h100-01")],
        [],
        [job("first"), job("second", submitted=T0 + timedelta(minutes=1))],
    )
    a = next(a for a in _answers(di, "vision/second").answers if a.kind == "hold")
    assert a.words == "hold vision/first" and a.nodes == {"h100-01": 1}
    assert a.delayed == [] and a.evicted == [] and a.others_words == "nothing evicted"


def test_a_gang_too_large_for_every_node_is_refused_and_offered_the_largest_shape_that_fits():
    r1, p1 = _full("h100-01", gpus=4)
    di = _world([node("h100-01"), node("h100-02")], [p1], [r1, job("big", gpus_per_pod=16)])
    u = _answers(di, "vision/big")
    assert u.refusals == ["not possible: no node type can hold 1×16 GPUs (the largest has 8)"]
    shrink = [a for a in u.answers if a.kind == "shrink"]
    # 4 free on h100-01 and 8 on h100-02: 3 × 4 GPUs is the most of its 16 that fits (1 × 8 would be 8)
    assert shrink and shrink[0].edits == [Edit("request", "big", "vision", number=3, gpus=4)]
    assert shrink[0].words == "shrink to 3 pod(s) × 4 GPUs (from 1 × 16)"
    assert sum(shrink[0].nodes.values()) == 3


def test_a_selector_that_names_no_large_enough_node_type_is_refused_where_it_may_go():
    di = _world(
        [node("a100-01", gpus=4, labels={"pool": "a100"}), node("h100-01", labels={"pool": "h100"})],
        [],
        [job("sel", gpus_per_pod=8, node_selector={"pool": "a100"})],
    )
    u = _answers(di, "vision/sel")
    assert u.refusals[0].startswith("not possible where it may go: no node type it selects has 8 GPUs")


def test_shrinking_counts_cpu_and_memory_as_well_as_gpus():
    # 8 GPUs free but CPU for one 32-core pod: 2 × 4 GPUs does not fit, 1 × 8 does not either (gang of 2 asked)
    n = node("h100-01")
    n.state["allocatable"] = {"nvidia.com/gpu": 8, "cpu": "40", "memory": "1000Gi"}
    j = job("cpu", pods=2, gpus_per_pod=4)
    j.state["requests_per_pod"] = {"cpu": "32", "memory": "100Gi"}
    di = _world([n], [], [j])
    a = next(a for a in _answers(di, "vision/cpu").answers if a.kind == "shrink")
    assert a.edits == [Edit("request", "cpu", "vision", number=1, gpus=4)]
    assert a.nodes == {"h100-01": 1}


def test_another_pool_is_offered_through_its_selector_and_tolerations():
    taint = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
    r1, p1 = _full("a100-01")
    di = _world(
        [
            node("a100-01", labels={"pool": "a100"}, pool="a100"),
            node("h100-01", labels={"pool": "h100"}, taints=[taint], pool="h100"),
        ],
        [p1],
        [r1, job("sel", node_selector={"pool": "a100"})],
    )
    a = next(a for a in _answers(di, "vision/sel").answers if a.kind == "onto")
    assert a.edits == [Edit("onto", "sel", "vision", profile="h100-01")]
    assert a.words == "let it onto pool h100 (tolerate its taints)" and a.nodes == {"h100-01": 1}
    edited = apply_edits(di, a.edits)
    st = edited.find("job", "sel", "vision").state
    assert st["node_selector"] == {"pool": "h100"}
    assert {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"} in st[
        "tolerations"
    ]


def _share_world(free_each: float):
    """Two GPUs of h100-01 shared, each with ``free_each`` left; no whole GPU free."""
    n = node("h100-01", gpus=2)
    gpus = []
    for i in range(2):
        g = gpu(f"GPU-{i}", "h100-01", i, pod_ref=f"vision/res-{i}")
        g.state["reservation"] = f"vision/res-{i}"
        g.state["shares"] = [{"pod": f"vision/s{i}", "fraction": round(1 - free_each, 4)}]
        gpus.append(g)
    holders = [pod(f"res-{i}", f"res-{i}", "vision", node_name="h100-01", gpus=1) for i in range(2)]
    j = job("share", gpus_per_pod=0)
    j.state["gpu_share"] = {"fraction": 0.5}
    j.state["gpu_units"] = 0.5
    di = _world([n], holders, [j])
    di.gpus = gpus
    return di


def test_a_share_too_large_for_what_is_left_is_shrunk_to_what_is_left():
    di = _share_world(0.3)
    a = next(a for a in _answers(di, "vision/share").answers if a.kind == "shrink")
    assert a.edits == [Edit("request", "share", "vision", number=1, share=0.3)]
    assert a.words == "shrink its share to 0.3 of a GPU (from 0.5)" and a.nodes == {"h100-01": 1}


def test_a_mig_profile_with_no_free_instance_is_shrunk_to_a_smaller_free_one():
    n = node("h100-01")
    n.state["allocatable"] = {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 4}
    n.state["capacity"] = dict(n.state["allocatable"])
    n.state["mig"] = {"config": "custom", "strategy": "mixed"}
    used = pod("m-0", "m", "vision", node_name="h100-01", gpus=0)
    used.state["mig"] = {"3g.40gb": 2}
    j = job("mig", gpus_per_pod=0)
    j.state["mig"] = {"3g.40gb": 1}
    di = _world([n], [used], [j])
    a = next(a for a in _answers(di, "vision/mig").answers if a.kind == "shrink")
    assert a.edits == [Edit("request", "mig", "vision", number=1, profile="1g.10gb")]
    assert a.words == "shrink to MIG 1g.10gb (from 3g.40gb)"


def test_a_job_the_next_pass_starts_needs_no_edit_and_the_passes_are_bounded():
    di = _world([node("h100-01")], [], [job("now")])
    u = _answers(di, "vision/now")
    assert u.starts_already and u.answers == [] and u.passes == 0
    nodes = [node(f"h100-{i:02d}", unschedulable=True) for i in range(12)]
    di = _world(nodes, [], [job("wait", pods=2)])
    u = _answers(di, "vision/wait")
    assert u.passes <= MAX_PASSES


@pytest.mark.parametrize(
    ("kind", "raw", "edit"),
    [
        ("repair", "h100-01", Edit("repair", "h100-01")),
        ("onto", "vision/j:h100-01", Edit("onto", "j", "vision", profile="h100-01")),
        ("request", "vision/j:2x0.25", Edit("request", "j", "vision", number=2, share=0.25)),
        ("request", "vision/j:1x1g.10gb", Edit("request", "j", "vision", number=1, profile="1g.10gb")),
    ],
)
def test_the_new_edit_kinds_read_and_write_back_their_query_value(kind, raw, edit):
    assert parse_edit(kind, raw) == edit and edit.value == raw


@pytest.mark.parametrize(
    ("kind", "raw", "words"),
    [
        ("request", "vision/j:1x0.0", "a share is between 0 and 1"),
        ("request", "vision/j:1x3g", "expected <namespace>/<job>:<pods>x"),
        ("onto", "vision/j", "expected <namespace>/<job>:<node>"),
        ("repair", "h100-01:2", "expected <node>"),
    ],
)
def test_the_new_edit_kinds_refuse_malformed_values(kind, raw, words):
    with pytest.raises(EditError, match=words):
        parse_edit(kind, raw)


def test_onto_and_repair_name_what_does_not_exist():
    di = _world([node("h100-01")], [], [job("j")])
    with pytest.raises(EditError, match="onto=vision/j:h100-09: no node h100-09 at t"):
        apply_edits(di, [parse_edit("onto", "vision/j:h100-09")])
    with pytest.raises(EditError, match="repair=h100-09: no node h100-09 at t"):
        apply_edits(di, [parse_edit("repair", "h100-09")])


def test_a_request_edit_rewrites_the_unbound_pods_too():
    j = job("j", gpus_per_pod=8)
    p = pod("j-0", "j", "vision", gpus=8, phase="Pending")
    p.state["gpu_share"] = {"fraction": 0.9}
    di = _world([node("h100-01")], [p], [j])
    edited = apply_edits(di, [parse_edit("request", "vision/j:1x2")])
    req = job_request(edited, edited.find("job", "j", "vision"))
    assert (req.pods, req.gpus_per_pod, req.share) == (1, 2, None)
    assert di.find("job", "j", "vision").state["gpus_per_pod"] == 8  # the input is left as it was
    assert Ref("job", "j", "vision") == edited.find("job", "j", "vision").ref


def test_stopping_a_running_job_names_whom_it_evicts_newest_and_least_important_first():
    old, p_old = _full("h100-01")
    old.state["started"] = "2026-11-29T00:10:00Z"
    new, p_new = _full("h100-02")
    new.state["started"] = "2026-11-29T02:00:00Z"
    serving, p_serving = _full("h100-03", priority_class="inference")
    di = _world([node("h100-01"), node("h100-02"), node("h100-03")], [p_old, p_new, p_serving],
                [old, new, serving, job("wait")])  # fmt: skip
    a = next(a for a in _answers(di, "vision/wait").answers if a.kind == "stop")
    assert a.edits == [Edit("hold", "run-h100-02", "vision")] and a.nodes == {"h100-02": 1}
    assert [j.ref.label for j in a.evicted] == ["vision/run-h100-02"]
    assert a.sentence == "stop vision/run-h100-02 → starts now on h100-02; evicts vision/run-h100-02"


def test_room_given_back_goes_to_the_first_in_line_so_a_job_deep_in_line_is_told_so():
    r1, p1 = _full("h100-01")
    waiting = [job(f"w{i}", submitted=T0 + timedelta(minutes=i)) for i in range(6)]
    di = _world([node("h100-01"), node("h100-02", unschedulable=True)], [p1], [r1, *waiting])
    first = _answers(di, "vision/w0")
    assert [a.edits for a in first.answers if a.kind == "uncordon"] == [[Edit("uncordon", "h100-02")]]
    last = _answers(di, "vision/w5")
    assert not [a for a in last.answers if a.kind in ("uncordon", "hold", "stop")]
    assert last.refusals == [
        "no small edit starts it in one pass: 5 waiting job(s) ahead of it want the same GPUs and would take any "
        "room freed first"
    ]
    assert last.passes <= 1  # no futile pass


def test_a_job_short_of_quota_and_of_room_gets_both_edits_in_one_answer():
    r1, p1 = _full("h100-01")
    di = _world(
        [node("h100-01"), node("h100-02", unschedulable=True)],
        [p1],
        [r1, job("wait", submitted=T0 + timedelta(minutes=1))],
        queues=[queue("vision", 8, 8)],
    )
    a = next(a for a in _answers(di, "vision/wait").answers if a.kind == "uncordon")
    assert a.edits == [Edit("limit", "vision", number=16), Edit("uncordon", "h100-02")]
    assert a.words == "limit +8 on vision (to 16) and uncordon h100-02"
    assert a.query == "limit=vision%3A16&uncordon=h100-02"


def test_a_quota_raise_on_a_full_kai_cluster_starts_it_by_reclaiming_and_names_the_victim():
    # one 8-GPU node held by b's two 4-GPU jobs (b deserves 4); a deserves nothing and waits with a 4-GPU
    # inference job, which may not run over its quota: the quota holds it, and once raised the node is full
    b1 = job("b1", "b", phase="Running", gpus_per_pod=4, submitted=T0)
    b2 = job("b2", "b", phase="Running", gpus_per_pod=4, submitted=T0 + timedelta(minutes=5))
    pods = [
        pod("b1-0", "b1", "b", node_name="h100-01", gpus=4),
        pod("b2-0", "b2", "b", node_name="h100-01", gpus=4),
    ]
    a1 = job("a1", "a", gpus_per_pod=4, priority_class="inference", submitted=T0 + timedelta(minutes=10))
    di = _world([node("h100-01")], pods, [b1, b2, a1], queues=[queue("a", 0, 8), queue("b", 4, 8)])
    u = _answers(di, "a/a1")
    quota = [a for a in u.answers if a.kind == "quota"]
    assert len(quota) == 1
    assert quota[0].words == "quota +4 on a (to 4)"
    assert quota[0].nodes == {"h100-01": 1}
    assert quota[0].sentence.endswith("starts now on h100-01; evicts b/b2")
