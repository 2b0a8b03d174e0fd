"""Scheduling checks on hand-built inventory: fit, capacity vs fragmentation, taints, selectors, quota, queue, request."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduling import check_scheduling
from incidents.diagnosis.types import Derived, Ref

from .dx_world import T0, T, change, job, node, pod, queue, world

JOB = Ref("job", "train", "vision")


def by_code(findings):
    return {f.code: f for f in findings}


def test_it_refutes_capacity_and_quota_when_the_job_fits_and_quota_is_fine():
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[job("train")],
        queues=[queue("vision", 16, 24)],
    )
    found = by_code(check_scheduling(di))
    assert found[C.GPU_CAPACITY_SHORTAGE].status == "refuted"
    quota = found[C.PROJECT_QUOTA_EXHAUSTED]
    assert quota.status == "refuted"
    assert quota.refutes, "a refuted hypothesis still cites what refutes it"
    assert any(isinstance(c, Derived) and c.kind == "quota_usage" for c in quota.refutes)


def test_it_supports_quota_exhausted_over_the_limit_and_names_the_cut():
    running = pod("other-0", "other", "vision", node_name="h100-01", gpus=8)
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02"), node("h100-03")],
        jobs=[job("train", pods=1, gpus_per_pod=8), job("other", phase="Running")],
        pods=[running],
        queues=[queue("vision", 8, 8)],
        changes=[
            change("queue", "vision", "quota_gpus", 16, 8, T0 + timedelta(hours=2), "platform-admin"),
            change("queue", "vision", "limit_gpus", 24, 8, T0 + timedelta(hours=2), "platform-admin"),
        ],
    )
    found = by_code(check_scheduling(di))
    q = found[C.PROJECT_QUOTA_EXHAUSTED]
    assert q.status == "supported"
    assert "uses 8 of 8" in q.statement and "platform-admin" in q.statement and "02:00" in q.statement
    assert found[C.GPU_CAPACITY_SHORTAGE].status == "refuted"


def test_it_tells_fragmentation_from_capacity_shortage():
    # 4 free GPUs on each of two nodes: 8 free in total, but no node has 8.
    pods = [
        pod("a-0", "a", "nlp", node_name="h100-01", gpus=4),
        pod("b-0", "b", "nlp", node_name="h100-02", gpus=4),
    ]
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[job("train")],
        pods=pods,
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    assert found[C.GPU_FRAGMENTATION].status == "supported"
    assert "largest free block on one node is 4" in found[C.GPU_FRAGMENTATION].statement
    assert found[C.GPU_CAPACITY_SHORTAGE].status == "refuted"

    full = [
        pod("a-0", "a", "nlp", node_name="h100-01", gpus=8),
        pod("b-0", "b", "nlp", node_name="h100-02", gpus=4),
    ]
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[job("train")],
        pods=full,
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    assert found[C.GPU_CAPACITY_SHORTAGE].status == "supported"
    assert found[C.GPU_FRAGMENTATION].status == "refuted"


def test_it_finds_the_untolerated_taint_that_alone_blocks_the_job():
    taint = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
    busy = pod("a-0", "a", "nlp", node_name="h100-02", gpus=8)
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01", taints=[taint]), node("h100-02")],
        jobs=[job("train")],
        pods=[busy],
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    t = found[C.UNTOLERATED_TAINT]
    assert t.status == "supported" and t.confidence >= 0.8
    assert "maintenance=true:NoSchedule" in t.statement and "h100-01" in t.statement
    assert C.GPU_CAPACITY_SHORTAGE in t.explains


def test_it_respects_tolerations_and_cordon_taints():
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01", taints=[taint])],
        jobs=[job("train", tolerations=tol)],
        queues=[queue("vision", 16)],
    )
    assert F.fits(F.node_fits(di, job_request(di, di.jobs[0])), job_request(di, di.jobs[0]))
    cordoned = node(
        "h100-01",
        unschedulable=True,
        taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    )
    di = world(subjects=[JOB], nodes=[cordoned], jobs=[job("train")], queues=[queue("vision", 16)])
    found = by_code(check_scheduling(di))
    assert found[C.GPU_NODE_UNAVAILABLE].status == "supported"
    assert C.UNTOLERATED_TAINT not in found or found[C.UNTOLERATED_TAINT].status == "refuted"


def test_it_reports_a_selector_nothing_matches():
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[job("train", node_selector={"nvidia.com/gpu.product": "NVIDIA-B200"})],
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    sel = found[C.NODE_SELECTOR_MISMATCH]
    assert sel.status == "supported" and "NVIDIA-B200" in sel.statement


def test_it_blames_the_device_plugin_and_refutes_the_shortage_it_fakes():
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01", allocatable=0), node("h100-02")],
        pods=[pod("a-0", "a", "nlp", node_name="h100-02", gpus=8)],
        jobs=[job("train")],
        queues=[queue("vision", 16)],
    )
    ranked = run_checks(di).findings
    assert ranked[0].code == C.DEVICE_PLUGIN_UNHEALTHY
    short = next(f for f in ranked if f.code == C.GPU_CAPACITY_SHORTAGE)
    assert (
        short.status == "refuted"
        and "would fit without what hides the GPUs (device plugin unhealthy)" in short.statement
    )


def test_it_ranks_a_partial_blocker_before_the_real_shortage_it_worsens():
    # Even a healthy h100-01 would leave the 2x8 job one node short: the shortage is real, the plugin makes it worse.
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01", allocatable=0), node("h100-02"), node("h100-03")],
        pods=[
            pod("a-0", "a", "nlp", node_name="h100-02", gpus=8),
            pod("b-0", "b", "nlp", node_name="h100-03", gpus=4),
        ],
        jobs=[job("train", pods=2)],
        queues=[queue("vision", 16)],
    )
    ranked = [f for f in run_checks(di).findings if f.supported]
    codes = [f.code for f in ranked]
    assert codes.index(C.DEVICE_PLUGIN_UNHEALTHY) < codes.index(C.GPU_CAPACITY_SHORTAGE)


def test_it_sees_the_jobs_ahead_in_the_queue():
    ahead = job("first", submitted=T0, pods=1, gpus_per_pod=8)
    mine = job("train", submitted=T0 + timedelta(minutes=30), pods=1, gpus_per_pod=8)
    di = world(subjects=[JOB], nodes=[node("h100-01")], jobs=[ahead, mine], queues=[queue("vision", 16)])
    found = by_code(check_scheduling(di))
    assert found[C.QUEUE_PRIORITY].status == "supported"
    assert "vision/first" in found[C.QUEUE_PRIORITY].statement
    di = world(subjects=[JOB], nodes=[node("h100-01")], jobs=[mine], queues=[queue("vision", 16)])
    assert by_code(check_scheduling(di))[C.QUEUE_PRIORITY].status == "refuted"


def test_jobs_ahead_that_leave_it_room_are_not_its_cause():
    # One job ahead wants 8 of 16 free GPUs: the pass serves it first and still starts this one.
    ahead = job("first", submitted=T0, pods=1, gpus_per_pod=8)
    mine = job("train", submitted=T0 + timedelta(minutes=30), pods=1, gpus_per_pod=8)
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[ahead, mine],
        queues=[queue("vision", 32)],
    )
    found = by_code(check_scheduling(di))[C.QUEUE_PRIORITY]
    assert found.status == "refuted"
    assert "still starts it on" in found.statement and "vision/first" in found.statement


def test_it_notices_a_request_that_grew_past_what_fits():
    old = job("train", pods=1, gpus_per_pod=8, valid_from=T0)
    old.valid_to = T0 + timedelta(hours=2)
    new = job("train", pods=2, gpus_per_pod=8, valid_from=T0 + timedelta(hours=2))
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[new],
        pods=[pod("a-0", "a", "nlp", node_name="h100-02", gpus=8)],
        queues=[queue("vision", 32)],
        history={JOB: [old, new]},
        changes=[change("job", "train", "pods", 1, 2, T0 + timedelta(hours=2), "alice", "vision")],
    )
    found = by_code(check_scheduling(di))
    r = found[C.REQUEST_SIZE_CHANGED]
    assert r.status == "supported" and r.confidence >= 0.8
    assert "1×8 to 2×8" in r.statement and "alice" in r.statement


def test_it_cites_inventory_facts_for_every_finding():
    di = world(
        subjects=[JOB], nodes=[node("h100-01")], jobs=[job("train")], queues=[queue("vision", 16)], t=T
    )
    for f in check_scheduling(di):
        assert f.cites, f.code


def test_a_cordoned_nodes_free_gpus_are_no_room_for_fragmentation_nor_for_its_action():
    """4 + 4 GPUs free on two usable nodes, 4 more on cordoned h100-03: fragmentation of the usable 8, and the
    consolidation action names the usable nodes only; the cordoned node's GPUs are counted nowhere as room."""
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02"), node("h100-03", unschedulable=True)],
        pods=[
            pod("a-0", "a", "nlp", node_name="h100-01", gpus=4),
            pod("b-0", "b", "nlp", node_name="h100-02", gpus=4),
            pod("c-0", "c", "nlp", node_name="h100-03", gpus=4),
        ],
        jobs=[job("train")],
        queues=[queue("vision", 16, 24)],
    )
    result = run_checks(di)
    frag = next(f for f in result.findings if f.code == C.GPU_FRAGMENTATION)
    assert frag.supported and frag.facts["free"] == 8 and frag.facts["nodes"] == ["h100-01", "h100-02"]
    assert "8 GPUs are free across 2 usable node(s)" in frag.statement
    act = next(a for a in result.actions if a.code == C.GPU_FRAGMENTATION)
    assert "h100-03" not in act.command and "h100-01" in act.command
    table = next(c for c in frag.supports if isinstance(c, Derived) and c.kind == "fit_table")
    assert "8 free on 2 usable node(s), largest usable block 4" in table.summary


def test_a_shortage_counts_the_usable_nodes_gpus_only():
    """Two full nodes and a cordoned one with 4 GPUs free: the shortage is told in the usable nodes' figures (16 of
    their 16 allocatable GPUs allocated), never with the cordoned node's GPUs as capacity."""
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02"), node("h100-03", unschedulable=True)],
        pods=[
            pod("a-0", "a", "nlp", node_name="h100-01", gpus=8),
            pod("b-0", "b", "nlp", node_name="h100-02", gpus=8),
            pod("c-0", "c", "nlp", node_name="h100-03", gpus=4),
        ],
        jobs=[job("train")],
        queues=[queue("vision", 16, 24)],
    )
    shortage = by_code(check_scheduling(di))[C.GPU_CAPACITY_SHORTAGE]
    assert shortage.supported
    assert "only 0 are free on the 2 usable node(s) (16 of their 16 allocatable GPUs allocated" in (
        shortage.statement
    ), shortage.statement
