"""MIG in the per-node fit and mig_profile_unavailable: the layouts, who holds the instances, what to repartition."""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.messages import parse_message
from incidents.diagnosis.relevance import CAUSE
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduler_words import said_codes
from incidents.diagnosis.scheduling import check_scheduling
from incidents.diagnosis.types import Ref

from .dx_world import job, node, pod, queue, world

JOB = Ref("job", "ft", "vision")


def mig_node(name: str, layout: dict[str, int], config: str = "all-1g.10gb"):
    n = node(name, 4, pool="a100-mig")
    n.state["labels"].update({"nvidia.com/mig.capable": "true", "nvidia.com/mig.config": config})
    res = {"nvidia.com/gpu": 0, **{f"nvidia.com/mig-{p}": c for p, c in layout.items()}}
    n.state["capacity"] = dict(res)
    n.state["allocatable"] = dict(res)
    n.state["mig"] = {"config": config, "state": "success", "strategy": "mixed"}
    return n


def mig_job(name: str = "ft", profile: str = "3g.40gb", pods: int = 1, **kw):
    j = job(name, gpus_per_pod=0, pods=pods, **kw)
    j.state["mig"] = {profile: 1}
    return j


def mig_pod(name: str, job_name: str, node_name: str, profile: str):
    p = pod(name, job_name, "vision", node_name=node_name, gpus=0)
    p.state["mig"] = {profile: 1}
    return p


def by_code(findings):
    return {f.code: f for f in findings}


def test_a_partitioned_node_counts_its_instances_and_is_not_missing_gpus():
    di = world(
        subjects=[JOB],
        nodes=[mig_node("a100-01", {"1g.10gb": 28})],
        jobs=[mig_job(profile="1g.10gb", pods=2)],
        pods=[mig_pod(f"nb-{i}", "nb", "a100-01", "1g.10gb") for i in range(27)],
    )
    req = job_request(di, di.jobs[0])
    assert req.mig == {"1g.10gb": 1}
    (row,) = F.node_fits(di, req)
    assert row.nominal == 0 and F.MISSING_GPU not in row.blockers
    assert row.mig_free("1g.10gb") == 1 and row.mig_pods == 1 and row.pods_fit == 1
    assert not F.fits([row], req) and F.fits([row], req, {F.MIG})


def test_no_node_advertises_the_profile_names_layouts_and_repartition_candidates():
    pods = [mig_pod("nb-0", "nb", "a100-01", "1g.10gb"), mig_pod("nb-1", "nb", "a100-01", "1g.10gb")]
    di = world(
        subjects=[JOB],
        nodes=[mig_node("a100-01", {"1g.10gb": 28}), mig_node("a100-02", {"1g.10gb": 28})],
        jobs=[mig_job()],
        pods=pods,
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    f = found[C.MIG_PROFILE_UNAVAILABLE]
    assert f.supported and f.confidence >= 0.85 and f.facts["missing"] == ["3g.40gb"]
    assert "no usable node advertises nvidia.com/mig-3g.40gb" in f.statement
    assert "a100-01 (all-1g.10gb: 28 × 1g.10gb)" in f.statement
    # The node whose repartition evicts nobody comes first.
    assert [c["node"] for c in f.facts["candidates"]] == ["a100-02", "a100-01"]
    assert "a100-02 (all-1g.10gb, evicts 0 pod(s)), a100-01 (all-1g.10gb, evicts 2 pod(s))" in f.statement
    assert found[C.GPU_CAPACITY_SHORTAGE].status == "refuted"


def test_every_instance_in_use_names_who_holds_them():
    pods = [mig_pod("big-0", "big", "a100-01", "3g.40gb"), mig_pod("big-1", "big", "a100-01", "3g.40gb")]
    di = world(
        subjects=[JOB],
        nodes=[mig_node("a100-01", {"3g.40gb": 2, "1g.10gb": 4}, config="custom-mixed")],
        jobs=[mig_job()],
        pods=pods,
        queues=[queue("vision", 16)],
    )
    f = by_code(check_scheduling(di))[C.MIG_PROFILE_UNAVAILABLE]
    assert f.supported and not f.facts["missing"]
    assert (
        "every instance of the profile is in use (3g.40gb: 2 instance(s), held by vision/big-0 on a100-01, vision/big-1 on a100-01"
        in f.statement
    )


def test_a_free_instance_means_no_finding():
    di = world(
        subjects=[JOB],
        nodes=[mig_node("a100-01", {"3g.40gb": 2})],
        jobs=[mig_job()],
        queues=[queue("vision", 16)],
    )
    assert C.MIG_PROFILE_UNAVAILABLE not in by_code(check_scheduling(di))


def test_the_kai_mig_message_corroborates_the_profile_not_gpu_capacity():
    p = parse_message(
        "PodSchedulingErrors: Resources were not found for pod vision/ft-0 due to: 2 node(s) didn't have enough "
        "of mig profile: nvidia.com/mig-3g.40gb."
    )
    assert said_codes(p) == {C.MIG_PROFILE_UNAVAILABLE}


def test_it_is_the_top_cause_and_the_repartition_names_the_evicted_pods():
    pods = [mig_pod("nb-0", "nb", "a100-01", "1g.10gb")]
    di = world(
        subjects=[JOB],
        nodes=[mig_node("a100-01", {"1g.10gb": 28})],
        jobs=[mig_job()],
        pods=pods,
        queues=[queue("vision", 16)],
    )
    dx = run_checks(di)
    causes = [f for f in dx.findings if f.supported and f.scope == CAUSE]
    assert causes[0].code == C.MIG_PROFILE_UNAVAILABLE
    (act,) = [a for a in dx.actions if a.code == C.MIG_PROFILE_UNAVAILABLE]
    assert act.command == "kubectl label node a100-01 nvidia.com/mig.config=all-3g.40gb --overwrite"
    assert "vision/nb-0" in act.impact


def test_a_cordoned_node_without_the_profile_is_no_room_a_mig_job_is_kept_off():
    """edge/edge-distill (1 × 3g.40gb) waits for a layout that has the profile; a cordoned whole-GPU H100 node
    and a NotReady one have free GPUs but no 3g.40gb instance, cordoned or not: they keep it off nothing."""
    di = world(
        subjects=[JOB],
        nodes=[
            mig_node("a100-01", {"1g.10gb": 28}),
            node("h100-03", unschedulable=True),
            node("a100-07", ready=False),
        ],
        jobs=[mig_job()],
        queues=[queue("vision", 16)],
    )
    findings = run_checks(di).findings
    assert by_code(findings)[C.MIG_PROFILE_UNAVAILABLE].supported
    about_the_job = [f for f in findings if f.code == C.GPU_NODE_UNAVAILABLE and f.subject == JOB]
    assert not [f.statement for f in about_the_job if f.supported]
