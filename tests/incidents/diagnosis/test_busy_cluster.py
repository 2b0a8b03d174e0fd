"""What the busy bundled scenarios (simulator/scenarios/busy-*.yaml) found wrong, pinned on small worlds.

- A job's own node selector is not why it waits when the nodes it selects could hold it: a 2 x 8 H100 gang
  that lost a GPU to double-bit ECC errors waits for that GPU, not for "the A100s it does not select".
- A cordon on a node a waiting job could never use (its selector or size rules it out) is not a recent
  change that explains the wait.
"""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import codes as C
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.types import Ref

from .dx_world import T0, T, change, gpu, job, node, pod, queue, world

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def _supported(di) -> list[str]:
    """Supported causes in rank order."""
    return [f.code for f in run_checks(di).findings if f.supported and f.scope == "cause"]


def _ecc_gang_world(extra_changes=()):
    """llm/train (2 x 8, H100 only) was killed by double-bit ECC errors on GPU 3 of h100-02.

    h100-01 is free again, h100-02 has 7 healthy GPUs, h100-03 is full of inference; both A100 nodes are idle.
    """
    nodes = [
        node("h100-01"),
        node("h100-02", allocatable=7),
        node("h100-03"),
        node("a100-01", labels=A100, pool="a100"),
        node("a100-02", labels=A100, pool="a100"),
    ]
    gpus = [gpu(f"GPU-2-{i}", "h100-02", i, dbe=2 if i == 3 else 0) for i in range(8)]
    gpus += [gpu(f"GPU-3-{i}", "h100-03", i, pod_ref="prod/serve-0") for i in range(8)]
    return world(
        subjects=[Ref("job", "train", "llm")],
        nodes=nodes,
        gpus=gpus,
        pods=[pod("serve-0", "serve", "prod", node_name="h100-03", gpus=8, priority_class="inference")],
        jobs=[job("train", "llm", pods=2, gpus_per_pod=8, node_selector=H100)],
        queues=[queue("llm", 48, 64), queue("prod", 32)],
        changes=list(extra_changes),
        t=T,
    )


def test_the_gang_waits_for_the_gpu_the_ecc_error_took_not_for_its_selector():
    causes = _supported(_ecc_gang_world())
    assert C.NODE_SELECTOR_MISMATCH not in causes
    assert causes and causes[0] == C.GPU_ECC_ERRORS


def test_a_selector_no_node_matches_is_still_the_cause():
    di = world(
        subjects=[Ref("job", "train", "llm")],
        nodes=[node("a100-01", labels=A100, pool="a100"), node("a100-02", labels=A100, pool="a100")],
        jobs=[job("train", "llm", pods=1, gpus_per_pod=8, node_selector=H100)],
        queues=[queue("llm", 48, 64)],
        t=T,
    )
    assert _supported(di)[:1] == [C.NODE_SELECTOR_MISMATCH]


def test_a_selector_whose_nodes_cannot_hold_the_whole_gang_is_still_the_cause():
    """One H100 node for a 2 x 8 gang: without its selector it would fit, with it it never can."""
    di = world(
        subjects=[Ref("job", "train", "llm")],
        nodes=[
            node("h100-01"),
            node("a100-01", labels=A100, pool="a100"),
            node("a100-02", labels=A100, pool="a100"),
        ],
        jobs=[job("train", "llm", pods=2, gpus_per_pod=8, node_selector=H100)],
        queues=[queue("llm", 48, 64)],
        t=T,
    )
    assert C.NODE_SELECTOR_MISMATCH in _supported(di)


def test_a_cordon_on_a_node_the_job_never_selects_is_no_recent_change():
    cordon = change(
        "node", "a100-02", "spec.unschedulable", False, True, T0 - timedelta(minutes=20), "ops-bot"
    )
    assert C.RECENT_CHANGE not in _supported(_ecc_gang_world([cordon]))


def test_a_cordon_on_a_node_too_small_for_one_pod_is_no_recent_change():
    cordon = change(
        "node", "l40s-01", "spec.unschedulable", False, True, T0 - timedelta(minutes=20), "ops-bot"
    )
    di = _ecc_gang_world([cordon])
    di.nodes.append(node("l40s-01", 4, labels=H100, pool="l40s"))
    assert C.RECENT_CHANGE not in _supported(di)


def test_a_cordon_on_a_node_the_job_could_use_is_still_a_recent_change():
    cordon = change(
        "node", "h100-03", "spec.unschedulable", False, True, T0 - timedelta(minutes=20), "ops-bot"
    )
    assert C.RECENT_CHANGE in _supported(_ecc_gang_world([cordon]))


def test_a_label_change_on_a_node_the_job_no_longer_selects_is_still_a_recent_change():
    """The relabel may be what moved the node out of the job's selector: it stays a candidate change."""
    relabel = change("node", "a100-01", "metadata.labels", H100, A100, T0 - timedelta(minutes=20), "node-ops")
    assert C.RECENT_CHANGE in _supported(_ecc_gang_world([relabel]))


def test_a_job_its_quota_holds_waits_on_no_nodes_fault():
    """eval/big (1 x 8) would pass eval's limit of 8 (4 held): KAI says OverLimit before looking at nodes.

    h100-02 lost a GPU (7 present, none used): without the quota it would be where the job is short; with it,
    the missing GPU is not why the job waits.
    """
    gpus = [gpu(f"GPU-1-{i}", "h100-01", i, pod_ref="eval/small-0" if i < 4 else "") for i in range(8)]
    gpus += [gpu(f"GPU-2-{i}", "h100-02", i, present=i != 3) for i in range(8) if i != 3]
    di = world(
        subjects=[Ref("job", "big", "eval")],
        nodes=[node("h100-01"), node("h100-02", capacity=7)],
        gpus=gpus,
        pods=[
            pod("small-0", "small", "eval", node_name="h100-01", gpus=4),
            pod("nlp-0", "nlp-a", "nlp", node_name="h100-01", gpus=4),
        ],
        jobs=[job("big", "eval", gpus_per_pod=8), job("small", "eval", phase="Running", gpus_per_pod=4)],
        queues=[queue("eval", 8, 8), queue("nlp", 32, 48)],
        t=T,
    )
    causes = _supported(di)
    assert causes[:1] == [C.PROJECT_QUOTA_EXHAUSTED]
    assert C.GPU_MISSING not in causes


def _missing_gpu_world(cordoned_at, t=T):
    """GPU 4 of h100-03 fell off the bus (Xid 79) at the onset; ops-bot cordons the node at ``cordoned_at``."""
    from incidents.diagnosis.types import EntityState

    onset = T0 + timedelta(hours=1)
    before = node("h100-03", capacity=7)
    after = node("h100-03", capacity=7, unschedulable=True)
    after.valid_from = cordoned_at
    gpus = [gpu(f"GPU-3-{i}", "h100-03", i, present=i != 4, xid=79 if i == 4 else 0) for i in range(8)]
    di = world(
        subjects=[Ref("gpu", "GPU-3-4"), Ref("node", "h100-03")],
        nodes=[after],
        gpus=gpus,
        alertnames=["GPUMissing", "GPUXidError"],
        t=t,
        onset=onset,
    )
    di.history[after.ref] = [EntityState("node", "h100-03", state=dict(before.state), valid_from=T0), after]
    return di


def test_a_cordon_after_the_gpu_fell_off_the_bus_is_not_its_cause():
    causes = _supported(_missing_gpu_world(cordoned_at=T0 + timedelta(hours=4), t=T0 + timedelta(hours=4)))
    assert causes[:1] == [C.GPU_XID_FAULT]
    assert C.GPU_NODE_UNAVAILABLE not in causes


def test_a_node_already_cordoned_at_onset_stays_in_the_gpus_neighbourhood():
    causes = _supported(_missing_gpu_world(cordoned_at=T0 + timedelta(minutes=30)))
    assert C.GPU_NODE_UNAVAILABLE in causes


def test_a_cordon_is_no_recent_change_for_a_job_its_quota_holds():
    """misleading-cordon-quota.yaml: speech-xl is over its limit; the cordon ten minutes earlier is a red herring."""
    cordon = change(
        "node", "h100-02", "spec.unschedulable", False, True, T0 - timedelta(minutes=10), "ops-bot"
    )
    di = world(
        subjects=[Ref("job", "xl", "speech")],
        nodes=[node("h100-01"), node("h100-02", unschedulable=True), node("h100-03")],
        jobs=[job("xl", "speech", pods=3, gpus_per_pod=4)],
        queues=[queue("speech", 4, 8)],
        changes=[cordon],
        t=T,
    )
    causes = _supported(di)
    assert causes[:1] == [C.PROJECT_QUOTA_EXHAUSTED]
    assert C.RECENT_CHANGE not in causes


def test_a_neighbour_gpus_corrected_errors_are_not_why_a_gpu_is_hot():
    """busy-gpu-neighbours-kai.yaml: grouping names the hot GPU and its node; GPU 5's 150 single-bit errors
    (corrected) on the same node are context, not the cause."""
    from .dx_world import series

    gpus = [gpu(f"GPU-{i}", "h100-04", i) for i in range(8)]
    gpus[5].state["ecc_sbe_total"] = 150
    hot = series("DCGM_FI_DEV_GPU_TEMP", "GPU-2", "h100-04", [70, 92, 93], start=T - timedelta(minutes=15))
    di = world(
        subjects=[Ref("gpu", "GPU-2"), Ref("node", "h100-04")],
        nodes=[node("h100-04")],
        gpus=gpus,
        series=[hot],
        alertnames=["GPUHighTemperature"],
        t=T,
    )
    findings = run_checks(di).findings
    assert _supported(di) == [C.GPU_THERMAL_THROTTLING]
    assert {f.scope for f in findings if f.code == C.GPU_ECC_ERRORS} == {"elsewhere"}


def test_the_gpus_own_node_going_not_ready_stays_in_scope():
    gpus = [gpu(f"GPU-{i}", "h100-04", i, present=i != 2) for i in range(8)]
    di = world(
        subjects=[Ref("gpu", "GPU-2"), Ref("node", "h100-04")],
        nodes=[node("h100-04", ready=False)],
        gpus=gpus,
        alertnames=["GPUMissing"],
        t=T,
        onset=T,
    )
    assert C.GPU_NODE_UNAVAILABLE in _supported(di)
