"""Causal relevance (incidents.diagnosis.relevance): only faults that touch the subject are causes.

The property test is the issue's rule: adding an unrelated fault (on a node the job cannot use, or in
another project) to a world never changes a job's supported causes; the example tests pin the converse
(a fault on a node the job would otherwise fit on is a cause and is found).
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from incidents.diagnosis import codes as C
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.types import Ref

from .dx_world import T0, T, gpu, job, node, pod, queue, series, world

TAINT = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}


def _causes(di) -> set[str]:
    return {f.code for f in run_checks(di).findings if f.supported and f.scope == "cause"}


def _elsewhere(di) -> set[str]:
    return {f.code for f in run_checks(di).findings if f.scope == "elsewhere"}


def _busy_world(extra_nodes=(), extra_gpus=(), extra_series=(), extra_pods=(), extra_jobs=()):
    """vision/train (2 x 8) waits: one node is full of nlp work, the other has 4 free GPUs."""
    nodes = [node("h100-01"), node("h100-02"), *extra_nodes]
    pods = [
        pod("nlp-a-0", "nlp-a", "nlp", node_name="h100-01", gpus=8),
        pod("nlp-b-0", "nlp-b", "nlp", node_name="h100-02", gpus=4),
        *extra_pods,
    ]
    gpus = [gpu(f"GPU-1-{i}", "h100-01", i, pod_ref="nlp/nlp-a-0") for i in range(8)]
    gpus += [gpu(f"GPU-2-{i}", "h100-02", i, pod_ref="nlp/nlp-b-0" if i < 4 else "") for i in range(8)]
    return world(
        subjects=[Ref("job", "train", "vision")],
        nodes=nodes,
        gpus=[*gpus, *extra_gpus],
        pods=pods,
        jobs=[job("train", pods=2, gpus_per_pod=8), job("nlp-a", "nlp", phase="Running"), *extra_jobs],
        queues=[queue("vision", 32, 48), queue("nlp", 32, 48)],
        series=list(extra_series),
        t=T,
    )


# Unrelated faults: each is on a node the job cannot use (tainted against it, and busy with the inference
# work the taint reserves it for, so it holds no room for the job either way) or in another project.
def _fault_on_tainted_node(kind: str, n: int):
    name = f"infer-{n:02d}"
    serving = pod(f"serve-{n}-0", f"serve-{n}", "prod", node_name=name, gpus=8, priority_class="inference")
    bad = node(name, taints=[TAINT])
    gpus = [gpu(f"GPU-{name}-{i}", name, i) for i in range(8)]
    series_ = []
    if kind == "not_ready":
        bad = node(name, taints=[TAINT], ready=False)
    elif kind == "device_plugin":
        bad = node(name, taints=[TAINT], allocatable=6)
    elif kind == "missing":
        bad = node(name, taints=[TAINT], capacity=7)
        gpus = gpus[:7]
    elif kind == "xid79":
        gpus[3] = gpu(f"GPU-{name}-3", name, 3, xid=79)
    elif kind == "dbe":
        gpus[2] = gpu(f"GPU-{name}-2", name, 2, dbe=3)
    elif kind == "hot":
        series_ = [
            series(
                "DCGM_FI_DEV_GPU_TEMP", f"GPU-{name}-1", name, [70, 93, 95], start=T - timedelta(minutes=15)
            )
        ]
    elif kind == "cordon":
        bad = node(name, taints=[TAINT], unschedulable=True)
    return {"extra_nodes": [bad], "extra_gpus": gpus, "extra_series": series_, "extra_pods": [serving]}


def _fault_in_other_project(n: int):
    """A crash-looping job of another project on a node the subject job does not need."""
    name = f"speech-{n:02d}"
    crash = pod(
        f"asr-{n}-0",
        f"asr-{n}",
        "speech",
        node_name="h100-01",
        gpus=0,
        containers=[
            {
                "name": "main",
                "image": "registry.local/asr:2",
                "gpus": 0,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "last_state": {"terminated": {"exitCode": 1, "reason": "Error"}},
                "restart_count": 7,
                "ready": False,
            }
        ],
    )
    return {"extra_pods": [crash], "extra_jobs": [job(f"asr-{n}", "speech", phase="Running")], "_": name}


KINDS = ["not_ready", "device_plugin", "missing", "xid79", "dbe", "hot", "cordon"]


@settings(max_examples=40, deadline=None)
@given(
    faults=st.lists(
        st.one_of(
            st.tuples(st.just("node"), st.sampled_from(KINDS)), st.tuples(st.just("project"), st.just(""))
        ),
        min_size=1,
        max_size=4,
    )
)
def test_an_unrelated_fault_never_changes_a_waiting_jobs_supported_causes(faults):
    base = _causes(_busy_world())
    extra: dict[str, list] = {
        "extra_nodes": [],
        "extra_gpus": [],
        "extra_series": [],
        "extra_pods": [],
        "extra_jobs": [],
    }
    for i, (where, kind) in enumerate(faults):
        more = _fault_on_tainted_node(kind, i) if where == "node" else _fault_in_other_project(i)
        for key, value in more.items():
            if key in extra:
                extra[key].extend(value)
    assert _causes(_busy_world(**extra)) == base


def test_a_fault_on_a_node_the_job_would_otherwise_fit_on_is_a_cause():
    """Double-bit ECC errors took a GPU from h100-02: without them 8 would be free there (the gang's 2nd pod)."""
    free = [node("h100-01"), node("h100-02", allocatable=7), node("h100-03")]
    gpus = [gpu(f"GPU-2-{i}", "h100-02", i, dbe=4 if i == 5 else 0) for i in range(8)]
    di = world(
        subjects=[Ref("job", "train", "vision")],
        nodes=free,
        gpus=gpus,
        pods=[pod("other-0", "other", "nlp", node_name="h100-01", gpus=8)],
        jobs=[job("train", pods=2, gpus_per_pod=8)],
        queues=[queue("vision", 32, 48), queue("nlp", 32, 48)],
        t=T,
    )
    causes = _causes(di)
    assert C.GPU_ECC_ERRORS in causes or C.DEVICE_PLUGIN_UNHEALTHY in causes
    findings = run_checks(di).findings
    ecc = [f for f in findings if f.code == C.GPU_ECC_ERRORS]
    assert ecc and all(f.scope == "cause" for f in ecc)
    # The plugin rightly withdrew the faulty GPU: not the plugin's fault, and not a shortage (the GPU exists).
    assert next(f for f in findings if f.supported).code == C.GPU_ECC_ERRORS
    assert C.DEVICE_PLUGIN_UNHEALTHY not in causes and C.GPU_CAPACITY_SHORTAGE not in _causes(di)


def test_a_hot_gpu_on_a_candidate_node_costs_a_waiting_job_nothing():
    di = _busy_world(
        extra_series=[
            series(
                "DCGM_FI_DEV_GPU_TEMP", "GPU-2-6", "h100-02", [70, 94, 95], start=T - timedelta(minutes=15)
            )
        ]
    )
    assert C.GPU_THERMAL_THROTTLING not in _causes(di)
    assert C.GPU_THERMAL_THROTTLING in _elsewhere(di)


def test_a_sibling_gpus_fault_is_not_a_cause_for_a_gpu_alert():
    """GPUHighTemperature on GPU 2: an Xid on GPU 5 of the same node is context, not its cause."""
    gpus = [gpu(f"GPU-{i}", "h100-01", i, xid=13 if i == 5 else 0) for i in range(8)]
    hot = series("DCGM_FI_DEV_GPU_TEMP", "GPU-2", "h100-01", [80, 92, 93], start=T - timedelta(minutes=15))
    di = world(
        subjects=[Ref("gpu", "GPU-2")],
        nodes=[node("h100-01")],
        gpus=gpus,
        series=[hot],
        alertnames=["GPUHighTemperature"],
        t=T,
    )
    findings = run_checks(di).findings
    top = next(f for f in findings if f.supported and f.scope == "cause")
    assert top.code == C.GPU_THERMAL_THROTTLING
    assert {f.scope for f in findings if f.code == C.GPU_XID_FAULT} <= {"elsewhere"}


def test_no_action_answers_a_fault_elsewhere():
    di = _busy_world(**{k: v for k, v in _fault_on_tainted_node("xid79", 1).items()})
    actions = run_checks(di).actions
    assert not any("infer-01" in (a.command + a.title) for a in actions)


def test_a_refuted_finding_is_never_first():
    di = world(
        subjects=[Ref("job", "train", "vision")],
        nodes=[node("h100-01")],
        jobs=[job("train", gpus_per_pod=8, submitted=T0)],
        queues=[queue("vision", 32, 48)],
        t=T,
    )
    findings = run_checks(di).findings
    assert findings and (findings[0].supported or not any(f.supported for f in findings))
    assert findings[0].status != "refuted" or all(f.status == "refuted" for f in findings)


def test_queue_order_is_not_a_cause_while_the_quota_holds_the_job():
    """vision is at its limit: the jobs ahead of train do not keep it waiting, the quota does."""
    ahead = job("first", pods=1, gpus_per_pod=8, submitted=T0)
    mine = job("train", pods=1, gpus_per_pod=8, submitted=T0 + timedelta(minutes=5))
    di = world(
        subjects=[Ref("job", "train", "vision")],
        nodes=[node("h100-01"), node("h100-02")],
        pods=[pod("run-0", "run", "vision", node_name="h100-01", gpus=8)],
        jobs=[ahead, mine, job("run", phase="Running")],
        queues=[queue("vision", 8, 8)],
        t=T,
    )
    findings = run_checks(di).findings
    causes = {f.code for f in findings if f.supported and f.scope == "cause"}
    assert C.PROJECT_QUOTA_EXHAUSTED in causes
    assert C.QUEUE_PRIORITY not in causes


def test_a_device_plugin_that_withdrew_a_faulty_gpu_is_not_called_unhealthy():
    """Double-bit ECC on GPU 5: the plugin rightly advertises 7 of 8; the GPU is the cause, not the plugin."""
    gpus = [gpu(f"GPU-{i}", "h100-01", i, dbe=3 if i == 5 else 0) for i in range(8)]
    di = world(
        subjects=[Ref("node", "h100-01"), Ref("gpu", "GPU-5")],
        nodes=[node("h100-01", allocatable=7)],
        gpus=gpus,
        alertnames=["GPUECCDoubleBitError"],
        t=T,
    )
    findings = run_checks(di).findings
    plugin = [f for f in findings if f.code == C.DEVICE_PLUGIN_UNHEALTHY]
    assert plugin and not any(f.supported for f in plugin)
    assert "withdrew GPU 5" in plugin[0].statement
    top = next(f for f in findings if f.supported and f.scope == "cause")
    assert top.code == C.GPU_ECC_ERRORS


def test_idle_gpus_of_a_failing_container_are_its_symptom_not_a_cause():
    from incidents.diagnosis.rank import idle_from_failure
    from incidents.diagnosis.types import Finding

    oom = Finding(C.GPU_OOM, "CUDA out of memory", "supported", 0.85, supports=[1])
    idle = Finding(C.IDLE_GPU_ALLOCATION, "holds 4 GPUs at 0.00 SM", "supported", 0.8, supports=[2])
    idle_from_failure([oom, idle])
    assert idle.status == "unverified" and "symptom" in idle.why
    alone = Finding(C.IDLE_GPU_ALLOCATION, "a notebook idles", "supported", 0.8, supports=[3])
    idle_from_failure([alone])
    assert alone.supported
