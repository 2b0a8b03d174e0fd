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
    drain = acts[0]
    assert drain.title == "Cordon and drain a100-01"
    assert "nlp/nlp-0" in drain.impact and "16 → 8" in drain.impact
    assert "uncordon a100-01" in drain.rollback and drain.verify


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
    drains = [a for a in run_checks(di).actions if a.title.startswith("Cordon and drain h100-03")]
    assert drains and "prod/llm-serving-2" in drains[0].impact
