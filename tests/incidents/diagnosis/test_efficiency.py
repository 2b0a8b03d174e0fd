"""Efficiency checks: allocated GPUs idle past the threshold, and jobs using fewer GPUs than they hold."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import codes as C
from incidents.diagnosis.efficiency import check_efficiency
from incidents.diagnosis.types import Ref

from .dx_world import T0, gpu, job, node, pod, series, world

JOB = Ref("job", "nb", "research")


def _world(values_per_gpu, alert=("GPUIdleAllocated",)):
    gpus, ss = [], []
    for i, values in enumerate(values_per_gpu):
        uuid = f"GPU-{i}"
        gpus.append(gpu(uuid, "h100-01", i, pod_ref="research/nb-0"))
        ss.append(
            series("DCGM_FI_PROF_SM_ACTIVE", uuid, "h100-01", values, start=T0, step=timedelta(minutes=10))
        )
    t = T0 + timedelta(minutes=10 * (len(values_per_gpu[0]) - 1))
    return world(
        subjects=[JOB],
        t=t,
        nodes=[node("h100-01")],
        gpus=gpus,
        series=ss,
        alertnames=list(alert),
        jobs=[job("nb", "research", phase="Running", gpus_per_pod=len(gpus))],
        pods=[pod("nb-0", "nb", "research", node_name="h100-01", gpus=len(gpus))],
    )


def test_it_finds_an_idle_allocation_past_the_threshold():
    f = check_efficiency(_world([[0.6] + [0.02] * 9]))
    assert f[0].code == C.IDLE_GPU_ALLOCATION and f[0].status == "supported"
    assert "since 00:10" in f[0].statement


def test_it_refutes_idle_when_the_gpus_are_busy():
    f = check_efficiency(_world([[0.7] * 10]))
    assert f[0].code == C.IDLE_GPU_ALLOCATION and f[0].status == "refuted" and f[0].refutes


def test_it_does_not_call_a_short_pause_idle():
    assert [x.status for x in check_efficiency(_world([[0.7] * 6 + [0.01] * 4]))] == ["unverified"]


def test_it_finds_a_job_using_fewer_gpus_than_it_holds():
    f = check_efficiency(_world([[0.8] * 10, [0.01] * 10, [0.0] * 10, [0.02] * 10]))
    assert f[0].code == C.OVER_REQUESTED and "uses 1 of its 4 GPUs" in f[0].statement


def test_an_idle_spell_starts_when_the_pod_got_the_gpus_not_while_they_were_free():
    # The series reaches back before the pod started (the evidence asks a little before its window): the
    # GPU idled free then. The pod's spell is counted from its start, and here falls short of the hour.
    di = _world([[0.0] * 10])
    di.pods[0].state["started"] = (T0 + timedelta(minutes=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
    f = check_efficiency(di)
    assert [x.status for x in f] == ["unverified"] and "since 00:40" in f[0].statement
    # Started between two samples and idle from the first one after: idle since it started.
    di.pods[0].state["started"] = (T0 + timedelta(minutes=25)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert "since 00:25" in check_efficiency(di)[0].statement
    # Started long before the series begins: idle as far back as it reaches, no further.
    di.pods[0].state["started"] = (T0 - timedelta(minutes=25)).strftime("%Y-%m-%dT%H:%M:%SZ")
    f = check_efficiency(di)
    assert f[0].status == "supported" and "since 00:00" in f[0].statement
