"""Proposed actions: computed impact (who else is affected at t), verification and rollback; never executed."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import codes as C
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.types import Ref

from .dx_world import T0, T, change, gpu, job, node, pod, queue, world


def test_it_proposes_a_drain_naming_the_pods_it_would_evict():
    g = gpu("GPU-aaa", "a100-01", 3, present=False, xid=79)
    others = [pod("nlp-0", "nlp-train", "nlp", node_name="a100-01", gpus=4)]
    di = world(
        subjects=[Ref("gpu", "GPU-aaa")],
        nodes=[node("a100-01", capacity=7), node("a100-02")],
        gpus=[g],
        pods=others,
        alertnames=["GPUXidError"],
    )
    acts = [a for a in run_checks(di).actions if a.code == C.GPU_XID_FAULT]
    # The GPU fell off the bus and is withdrawn already; nlp-0 runs on healthy GPUs: the least disruptive step
    # first, a cordon that evicts nothing. The numbers are what the nodes advertise (7 + 8, not 8 + 8).
    cordon = acts[0]
    assert cordon.title == "Cordon a100-01; let its 1 running pod(s) finish"
    assert cordon.command == "kubectl cordon a100-01"
    assert "Evicts nothing" in cordon.impact and "nlp/nlp-0" in cordon.impact and "15 → 8" in cordon.impact
    assert "uncordon a100-01" in cordon.rollback and cordon.verify


def test_a_drain_evicts_the_pods_on_the_faulty_gpu():
    g = gpu("GPU-aaa", "a100-01", 3, pod_ref="nlp/nlp-0", xid=48)
    held = [pod("nlp-0", "nlp-train", "nlp", node_name="a100-01", gpus=4)]
    di = world(
        subjects=[Ref("gpu", "GPU-aaa")],
        nodes=[node("a100-01"), node("a100-02")],
        gpus=[g],
        pods=held,
        alertnames=["GPUXidError"],
    )
    titles = [a.title for a in run_checks(di).actions]
    assert titles[0] == "Cordon and drain a100-01", titles


def test_a_cordoned_node_gets_its_next_step_not_a_cordon_again():
    """ops-bot cordoned the node after the Xid: what is left is the drain of what still runs on the faulty GPU,
    then its repair; never "cordon" again."""
    g = gpu("GPU-aaa", "a100-01", 3, pod_ref="nlp/nlp-0", xid=48)
    held = [pod("nlp-0", "nlp-train", "nlp", node_name="a100-01", gpus=4)]
    di = world(
        subjects=[Ref("gpu", "GPU-aaa")],
        nodes=[node("a100-01", unschedulable=True), node("a100-02")],
        gpus=[g],
        pods=held,
        alertnames=["GPUXidError"],
    )
    titles = [a.title for a in run_checks(di).actions]
    assert titles[0] == "Drain a100-01 (already cordoned)", titles
    assert not any("ordon " in t and t.startswith("Cordon") for t in titles)
    # Emptied and cordoned, with the GPU off the bus: the repair is next
    gone = gpu("GPU-aaa", "a100-01", 3, present=False, xid=79)
    di = world(
        subjects=[Ref("gpu", "GPU-aaa")],
        nodes=[node("a100-01", capacity=7, unschedulable=True), node("a100-02")],
        gpus=[gone],
        alertnames=["GPUXidError", "GPUMissing"],
    )
    actions = run_checks(di).actions
    assert [a.title for a in actions] == [
        "Reboot a100-01 to recover GPU 3; replace it (RMA) if it stays missing"
    ]
    assert "7 advertised GPUs" in actions[0].impact


def test_it_proposes_restoring_a_cut_quota_with_its_impact_on_other_projects():
    pending = job("train", pods=2, valid_from=T0 + timedelta(hours=1, minutes=10))
    di = world(
        subjects=[Ref("job", "train", "vision")],
        nodes=[node(f"h100-0{i}") for i in range(1, 5)],
        jobs=[pending],
        queues=[queue("vision", 8, 8), queue("nlp", 16, 16)],
        pods=[pod("n-0", "n", "nlp", node_name="h100-01"), pod("n-1", "n", "nlp", node_name="h100-02")],
        changes=[change("queue", "vision", "quota_gpus", 16, 8, T0 + timedelta(hours=1), "platform-admin")],
        t=T0 + timedelta(hours=1, minutes=30),
        history={Ref("job", "train", "vision"): [pending]},
    )
    acts = [a for a in run_checks(di).actions if a.code == C.PROJECT_QUOTA_EXHAUSTED]
    assert acts[0].title.startswith("Restore project vision's quota to 16")
    assert "sum to 32 of 32 GPUs" in acts[0].impact and "no other project is over its quota" in acts[0].impact
    assert "kubectl patch queue vision" in acts[0].command
    assert "back to 8" in acts[0].rollback


def test_it_never_proposes_a_smaller_request_that_cannot_fit_the_quota_left():
    """The project's limit is used up: "resubmit with at most 0 GPUs" helps nobody, so it is not proposed."""
    pending = job("train", pods=2, valid_from=T0 + timedelta(hours=1, minutes=10))
    di = world(
        subjects=[Ref("job", "train", "vision")],
        nodes=[node(f"h100-0{i}") for i in range(1, 5)],
        jobs=[pending, job("other", phase="Running")],
        queues=[queue("vision", 8, 8), queue("nlp", 16, 16)],
        pods=[pod("o-0", "other", "vision", node_name="h100-01")],
        t=T0 + timedelta(hours=1, minutes=30),
        history={Ref("job", "train", "vision"): [pending]},
    )
    acts = [a for a in run_checks(di).actions if a.code == C.PROJECT_QUOTA_EXHAUSTED]
    assert acts, "the quota change is still proposed"
    assert not any("resubmit" in a.command and "0 GPUs" in a.command for a in acts)
    assert not any(a.title.startswith("Or resubmit") for a in acts)


def test_the_drain_impact_names_the_pod_the_fault_already_ended():
    """Xid 79 killed the serving pod on GPU 4 at the onset: "evicts 0 pods" must not hide that it served one."""
    before = gpu("GPU-4", "h100-03", 4, pod_ref="prod/llm-serving-2")
    now = gpu("GPU-4", "h100-03", 4, xid=79)
    di = world(
        subjects=[Ref("gpu", "GPU-4"), Ref("node", "h100-03")],
        nodes=[node("h100-03", capacity=7)],
        gpus=[now, *[gpu(f"GPU-{i}", "h100-03", i) for i in range(4)]],
        history={Ref("gpu", "GPU-4"): [before, now]},
        alertnames=["GPUXidError", "GPUMissing"],
        t=T,
    )
    drains = [a for a in run_checks(di).actions if a.title.startswith("Cordon h100-03")]
    assert drains and "prod/llm-serving-2" in drains[0].impact


def test_an_impact_builds_the_fit_of_the_waiting_jobs_that_could_use_the_node_only():
    """'Pending jobs that would then fit' (fit.could_gain): a job whose selector keeps it off the node that gains
    room fits as before, so its fit table over the fleet is not built; the answer is the same."""
    from unittest import mock

    from incidents.diagnosis import fit as F
    from incidents.diagnosis.actions_nodes import pending_that_start_after
    from incidents.diagnosis.actions_workloads import _pending_that_fit_after_release

    nodes = [node("a100-01", allocatable=0, pool="a100")] + [
        node(f"h100-{i:02d}", labels={"team": "nlp"}) for i in range(1, 31)
    ]
    held = [pod(f"nlp-{i}", f"nlp-{i}", "nlp", node_name=f"h100-{i:02d}", gpus=8) for i in range(1, 31)]
    elsewhere = [job(f"nlp-wait-{i}", "nlp", node_selector={"team": "nlp"}) for i in range(40)]
    di = world(
        subjects=[Ref("node", "a100-01")],
        nodes=nodes,
        pods=held,
        jobs=[*elsewhere, job("train", pods=1, gpus_per_pod=8)],
    )
    with mock.patch.object(F, "node_fits", wraps=F.node_fits) as built:
        assert pending_that_start_after(di, {"a100-01": 8}) == ["vision/train"]
    assert built.call_count == 1  # train only: the 40 jobs that select team=nlp cannot use a100-01
    assert pending_that_start_after(di, {}) == []  # nothing gains room
    di.nodes[0].state["allocatable"] = {"nvidia.com/gpu": 8}
    di.pods.append(pod("vision-0", "vision-old", "vision", node_name="a100-01", gpus=8))
    with mock.patch.object(F, "node_fits", wraps=F.node_fits) as built:
        assert _pending_that_fit_after_release(di, {"a100-01": 8}) == ["vision/train"]
    assert built.call_count == 1


def test_a_quota_action_is_the_smallest_edit_that_lets_the_job_in():
    """A preemptible job held by its project's limit needs the limit raised by what is missing, not the quota
    raised above what it ever was (over-committing the pool); a cut that alone explains the wait is reverted."""
    pending = job("train", pods=2, valid_from=T0 + timedelta(hours=1, minutes=10))
    held = [pod("v-0", "v-old", "vision", node_name="h100-01")]  # vision already runs 8
    common = dict(
        subjects=[Ref("job", "train", "vision")],
        nodes=[node(f"h100-0{i}") for i in range(1, 5)],
        jobs=[pending, job("v-old", phase="Running")],
        pods=held,
        t=T0 + timedelta(hours=1, minutes=30),
        history={Ref("job", "train", "vision"): [pending]},
    )
    di = world(queues=[queue("vision", 16, 16), queue("nlp", 16, 16)], **common)
    acts = [a for a in run_checks(di).actions if a.code == C.PROJECT_QUOTA_EXHAUSTED]
    assert acts[0].title == "Raise project vision's GPU limit from 16 to 24 (+8; its quota stays 16)", acts[
        0
    ].title
    assert '"quota":16,"limit":24' in acts[0].command
    assert "sum to 32 of 32 GPUs" in acts[0].impact and "over-committed" not in acts[0].impact

    # quota and limit cut together at 01:00: reverting both is enough, and is what is proposed
    cut = [
        change("queue", "vision", "quota_gpus", 32, 16, T0 + timedelta(hours=1), "platform-admin"),
        change("queue", "vision", "limit_gpus", 32, 16, T0 + timedelta(hours=1), "platform-admin"),
    ]
    di = world(queues=[queue("vision", 16, 16), queue("nlp", 16, 16)], changes=cut, **common)
    acts = [a for a in run_checks(di).actions if a.code == C.PROJECT_QUOTA_EXHAUSTED]
    assert acts[0].title == "Restore project vision's quota to 32 and limit to 32 (cut by platform-admin)"
    assert "sum to 48 of 32 GPUs in the cluster (over-committed by 16" in acts[0].impact


def test_an_uncordon_names_the_waiting_jobs_the_node_would_start_in_queue_order():
    """Uncordoning a Ready node whose maintenance is over: its 8 free GPUs start one 8-GPU job, the first in the
    cluster's order (a higher queue priority first), not every job that would fit there alone; another cordoned
    node stays shut."""
    from incidents.diagnosis import fit as F
    from incidents.diagnosis.actions_nodes import node_unavailable
    from incidents.diagnosis.request import job_request
    from incidents.diagnosis.types import Finding

    nodes = [node("h100-01", unschedulable=True), node("h100-02", unschedulable=True)]
    waiting = [
        job("early", "research", submitted=T0),
        job("urgent", "prod", submitted=T0 + timedelta(hours=1)),
        job("late", "research", submitted=T0 + timedelta(hours=2)),
    ]
    di = world(
        subjects=[Ref("node", "h100-01")],
        nodes=nodes,
        jobs=waiting,
        queues=[queue("prod", 64, priority=100), queue("research", 64)],
    )
    f = Finding(C.GPU_NODE_UNAVAILABLE, "h100-01 is cordoned", "supported", 0.9, facts={"node": "h100-01"})
    (uncordon,) = node_unavailable(di, f)
    assert uncordon.title == "Uncordon h100-01 if its maintenance is over"
    assert "could land there: prod/urgent." in uncordon.impact
    assert F.CORDONED in F.node_fit(di, di.nodes[1], job_request(di, waiting[0])).blockers


def test_removing_a_taint_says_who_would_start_in_queue_order_not_every_waiting_job():
    """One tainted 8-GPU node, two 8-GPU jobs waiting and a third asking more than any node has: removing the
    taint starts the first in queue order only (the model's pass), never every pending job."""
    taint = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
    jobs = [
        job("w1", "research", submitted=T0),
        job("w2", "research", submitted=T0 + timedelta(minutes=5)),
        job("huge", "research", gpus_per_pod=16, submitted=T0 + timedelta(minutes=9)),
    ]
    di = world(
        subjects=[Ref("job", "w1", "research")],
        nodes=[node("h100-01"), node("h100-02", taints=[taint])],
        pods=[pod("r-0", "r", "research", node_name="h100-01", gpus=8)],
        jobs=jobs,
    )
    acts = [a for a in run_checks(di).actions if a.code == C.UNTOLERATED_TAINT]
    assert acts and acts[0].command == "kubectl taint nodes h100-02 maintenance=true:NoSchedule-"
    impact = acts[0].impact
    assert impact.endswith("pending jobs that would then start, in queue order: research/w1."), impact


def test_a_drains_pool_figures_count_only_nodes_that_take_new_pods():
    """The pool's schedulable GPUs are read as the model reads a node (capacity.offered_gpus, capacity.shut): a
    NotReady node and a cordoned one offer the pool nothing, so removing a100-01 takes 15 to 8, not 31 to 24."""
    g = gpu("GPU-aaa", "a100-01", 3, present=False, xid=79)
    di = world(
        subjects=[Ref("gpu", "GPU-aaa")],
        nodes=[
            node("a100-01", capacity=7),
            node("a100-02"),
            node("a100-03", ready=False),
            node("a100-04", unschedulable=True),
        ],
        gpus=[g],
        alertnames=["GPUXidError"],
    )
    cordon = next(a for a in run_checks(di).actions if a.code == C.GPU_XID_FAULT)
    assert cordon.title == "Cordon a100-01" and "(15 → 8)" in cordon.impact, cordon.impact
