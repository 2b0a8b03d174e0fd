"""GPU/node health checks on hand-built inventory: Xid via the catalog, missing GPUs, ECC, device plugin, thermal, NVLink."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import codes as C
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.health import check_health
from incidents.diagnosis.types import Ref

from .dx_world import T0, T, gpu, node, pod, series, world


def by_code(findings):
    return {f.code: f for f in findings}


def test_it_reads_xid_79_as_fatal_and_ranks_it_before_the_missing_gpu():
    g = gpu("GPU-aaa", "a100-01", 3, present=False, xid=79)
    di = world(
        subjects=[Ref("gpu", "GPU-aaa")],
        nodes=[node("a100-01", capacity=7)],
        gpus=[g],
        series=[series("DCGM_FI_DEV_XID_ERRORS", "GPU-aaa", "a100-01", [0, 0, 79], obs_id=11)],
        alertnames=["GPUXidError", "GPUMissing"],
    )
    found = by_code(check_health(di))
    xid = found[C.GPU_XID_FAULT]
    assert xid.status == "supported" and xid.facts["drain_node"] is True
    assert "Xid 79" in xid.statement and "fallen off the bus" in xid.statement and 11 in xid.supports
    assert found[C.GPU_MISSING].status == "supported"
    assert "7 of 8" in found[C.GPU_MISSING].statement
    ranked = [f.code for f in run_checks(di).findings]
    assert ranked.index(C.GPU_XID_FAULT) < ranked.index(C.GPU_MISSING)


def test_it_does_not_condemn_the_node_for_an_application_xid():
    g = gpu("GPU-bbb", "h100-01", 0, xid=13)
    di = world(
        subjects=[Ref("gpu", "GPU-bbb")], nodes=[node("h100-01")], gpus=[g], alertnames=["GPUXidError"]
    )
    xid = by_code(check_health(di))[C.GPU_XID_FAULT]
    assert xid.facts["drain_node"] is False and "does not condemn the node" in xid.statement
    assert xid.confidence < 0.9


def test_it_refutes_an_xid_alert_when_the_gpu_reports_none():
    g = gpu("GPU-ccc", "h100-01", 0)
    di = world(
        subjects=[Ref("gpu", "GPU-ccc")],
        nodes=[node("h100-01")],
        gpus=[g],
        alertnames=["GPUXidError"],
        series=[series("DCGM_FI_DEV_XID_ERRORS", "GPU-ccc", "h100-01", [0, 0, 0])],
    )
    xid = by_code(check_health(di))[C.GPU_XID_FAULT]
    assert xid.status == "refuted" and xid.refutes


def test_it_reports_double_bit_ecc_and_explains_xid_48():
    g = gpu("GPU-ddd", "h100-03", 5, dbe=2, xid=48)
    di = world(
        subjects=[Ref("gpu", "GPU-ddd")],
        nodes=[node("h100-03")],
        gpus=[g],
        alertnames=["GPUECCDoubleBitError"],
    )
    ranked = run_checks(di).findings
    assert ranked[0].code == C.GPU_ECC_ERRORS
    assert "2 double-bit" in ranked[0].statement


def test_it_sees_a_device_plugin_that_hides_gpus_on_a_ready_node():
    di = world(subjects=[Ref("node", "h100-01")], nodes=[node("h100-01", allocatable=0)])
    dp = by_code(check_health(di))[C.DEVICE_PLUGIN_UNHEALTHY]
    assert dp.status == "supported" and "0 of 8" in dp.statement
    di = world(subjects=[Ref("node", "h100-01")], nodes=[node("h100-01")])
    assert by_code(check_health(di))[C.DEVICE_PLUGIN_UNHEALTHY].status == "refuted"


def test_it_reports_a_not_ready_node_with_the_pods_stranded_on_it():
    n = node("h100-02", ready=False)
    di = world(
        subjects=[Ref("node", "h100-02")],
        nodes=[n],
        pods=[pod("a-0", "a", "nlp", node_name="h100-02")],
        alertnames=["NodeNotReady"],
    )
    f = by_code(check_health(di))[C.GPU_NODE_UNAVAILABLE]
    assert f.status == "supported" and "NotReady" in f.statement and "1 pod(s) holding 8 GPUs" in f.statement


def test_it_tells_thermal_throttling_from_a_warm_gpu():
    g = gpu("GPU-eee", "h100-02", 0)
    hot = series("DCGM_FI_DEV_GPU_TEMP", "GPU-eee", "h100-02", [70, 80, 93, 94])
    clock = series("DCGM_FI_DEV_SM_CLOCK", "GPU-eee", "h100-02", [1980, 1980, 1400, 1300])
    di = world(
        subjects=[Ref("gpu", "GPU-eee")],
        nodes=[node("h100-02")],
        gpus=[g],
        series=[hot, clock],
        alertnames=["GPUHighTemperature"],
    )
    f = by_code(check_health(di))[C.GPU_THERMAL_THROTTLING]
    assert f.status == "supported" and "94 °C" in f.statement and "SM clock fell" in f.statement
    warm = series("DCGM_FI_DEV_GPU_TEMP", "GPU-eee", "h100-02", [70, 75, 78])
    di = world(
        subjects=[Ref("gpu", "GPU-eee")],
        nodes=[node("h100-02")],
        gpus=[g],
        series=[warm],
        alertnames=["GPUHighTemperature"],
    )
    assert by_code(check_health(di))[C.GPU_THERMAL_THROTTLING].status == "refuted"


def test_it_puts_nvlink_errors_before_the_xid_74_they_cause():
    g = gpu("GPU-fff", "h100-01", 6, xid=74)
    crc = series("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "GPU-fff", "h100-01", [0, 0, 40, 300])
    xid = series("DCGM_FI_DEV_XID_ERRORS", "GPU-fff", "h100-01", [0, 0, 0, 74])
    di = world(
        subjects=[Ref("gpu", "GPU-fff")],
        nodes=[node("h100-01", allocatable=7)],
        gpus=[g],
        series=[crc, xid],
        alertnames=["GPUXidError"],
    )
    ranked = run_checks(di).findings
    assert [f.code for f in ranked[:2]] == [C.NVLINK_ERRORS, C.GPU_XID_FAULT]


def test_it_ignores_healthy_bystander_nodes_for_a_job_that_waits_on_quota():
    from .dx_world import job, queue

    g = gpu("GPU-hot", "h100-09", 0)
    hot = series("DCGM_FI_DEV_GPU_TEMP", "GPU-hot", "h100-09", [95, 96], start=T0 + timedelta(hours=2))
    di = world(
        subjects=[Ref("job", "train", "vision")],
        nodes=[node("h100-01"), node("h100-09")],
        gpus=[g],
        series=[hot],
        jobs=[job("train", gpus_per_pod=8)],
        queues=[queue("vision", 0, 0)],
        t=T,
    )
    findings = run_checks(di).findings
    causes = [f.code for f in findings if f.scope == "cause"]
    assert C.GPU_THERMAL_THROTTLING not in causes
    # A hot GPU elsewhere is context at most: listed as also happening in the cluster, never a cause.
    elsewhere = [f for f in findings if f.code == C.GPU_THERMAL_THROTTLING]
    assert all(f.scope == "elsewhere" and f.supported for f in elsewhere)
