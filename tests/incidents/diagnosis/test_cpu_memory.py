"""CPU and memory in the per-node fit, and cpu_memory_shortage: GPUs free only where CPU or memory is taken."""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.quantities import quantity
from incidents.diagnosis.relevance import CAUSE
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduling import check_scheduling
from incidents.diagnosis.types import Ref

from .dx_world import job, node, pod, queue, world

JOB = Ref("job", "train", "vision")
GI = 1024**3


def cpu_node(name: str, cpu: str = "95", memory: str = "1040Gi", gpus: int = 8):
    n = node(name, gpus)
    n.state["capacity"].update({"cpu": "96", "memory": "1056Gi"})
    n.state["allocatable"].update({"cpu": cpu, "memory": memory})
    return n


def cpu_job(name: str = "train", *, cpu: str = "32", memory: str = "256Gi", **kw):
    j = job(name, **kw)
    j.state["requests_per_pod"] = {"cpu": cpu, "memory": memory}
    return j


def cpu_pod(name: str, job_name: str, project: str, node_name: str, gpus: int, cpu: str, memory: str):
    p = pod(name, job_name, project, node_name=node_name, gpus=gpus)
    p.state["requests"] = {"cpu": cpu, "memory": memory}
    return p


def by_code(findings):
    return {f.code: f for f in findings}


def test_quantities_parse_the_kubernetes_forms():
    assert quantity("95") == 95
    assert quantity("500m") == 0.5
    assert quantity("1040Gi") == 1040 * GI
    assert quantity("64G") == 64 * 1000**3
    assert quantity(8) == 8
    assert quantity("lots") is None and quantity(None) is None


def test_quantities_that_are_no_amount_are_unreadable():
    assert quantity(" 2Ti ") == 2 * 1024**4 and quantity("1.5k") == 1500
    assert quantity("NaN") is None and quantity("Infinity") is None and quantity("8Xi") is None


def test_the_fit_counts_cpu_and_memory_of_the_bound_pods():
    # A CPU-heavy preprocessing pod (no GPU) took 80 of the node's 95 cores: 8 GPUs free, 15 cores left.
    hog = cpu_pod("etl-0", "etl", "data", "h100-01", 0, "80", "200Gi")
    di = world(subjects=[JOB], nodes=[cpu_node("h100-01")], jobs=[cpu_job(gpus_per_pod=8)], pods=[hog])
    req = job_request(di, di.jobs[0])
    assert req.cpu_per_pod == 32 and req.memory_per_pod == 256 * GI
    (row,) = F.node_fits(di, req)
    assert row.free == 8 and row.gpu_pods_fit == 1
    assert row.cpu_free == 15 and row.cpu_pods == 0 and row.memory_pods == 3
    assert F.INSUFFICIENT_CPU in row.blockers and F.INSUFFICIENT_MEMORY not in row.blockers
    assert row.pods_fit == 0 and not F.fits([row], req)
    assert F.fits([row], req, {F.CPU_MEMORY})


def test_it_names_the_nodes_their_free_gpus_and_what_is_missing():
    pods = [
        cpu_pod("etl-0", "etl", "data", "h100-01", 0, "80", "200Gi"),  # CPU taken
        cpu_pod("cache-0", "cache", "data", "h100-02", 0, "8", "1000Gi"),  # memory taken
        cpu_pod("big-0", "big", "nlp", "h100-03", 8, "16", "128Gi"),  # GPUs taken
    ]
    di = world(
        subjects=[JOB],
        nodes=[cpu_node("h100-01"), cpu_node("h100-02"), cpu_node("h100-03")],
        jobs=[cpu_job(pods=2, gpus_per_pod=4)],
        pods=pods,
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    f = found[C.CPU_MEMORY_SHORTAGE]
    assert f.supported and f.confidence >= 0.8
    assert f.facts["nodes"] == ["h100-01", "h100-02"]
    assert "h100-01: 8 GPU(s) free, 17 cores CPU short (15 cores of 95 cores unrequested)" in f.statement
    assert "h100-02: 8 GPU(s) free, 216 GiB memory short (40 GiB of 1040 GiB unrequested)" in f.statement
    assert "h100-03" not in f.statement
    # The GPUs exist: "insufficient GPUs" is the symptom, neither capacity nor fragmentation.
    assert found[C.GPU_CAPACITY_SHORTAGE].status == "refuted"
    assert found[C.GPU_FRAGMENTATION].status == "refuted"
    assert C.GPU_CAPACITY_SHORTAGE in f.explains


def test_it_is_no_cause_when_cpu_and_memory_are_free():
    di = world(
        subjects=[JOB],
        nodes=[cpu_node("h100-01")],
        jobs=[cpu_job(gpus_per_pod=8)],
        pods=[cpu_pod("small-0", "small", "data", "h100-01", 0, "8", "64Gi")],
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    assert C.CPU_MEMORY_SHORTAGE not in found
    assert found[C.GPU_CAPACITY_SHORTAGE].status == "refuted"  # it fits now


def test_a_real_gpu_shortage_is_not_blamed_on_cpu():
    # The CPU-short node has no free GPU either: GPUs are what is short.
    pods = [cpu_pod("etl-0", "etl", "data", "h100-01", 8, "80", "200Gi")]
    di = world(
        subjects=[JOB],
        nodes=[cpu_node("h100-01")],
        jobs=[cpu_job(gpus_per_pod=8)],
        pods=pods,
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    assert C.CPU_MEMORY_SHORTAGE not in found
    assert found[C.GPU_CAPACITY_SHORTAGE].supported


def test_contributing_when_gpus_are_short_as_well():
    # 2 pods × 8 GPUs: h100-01 has 8 GPUs free but no CPU; h100-02 has no free GPU. Without the CPU hog one
    # pod more would bind, still not both: the GPUs are short too.
    pods = [
        cpu_pod("etl-0", "etl", "data", "h100-01", 0, "80", "200Gi"),
        cpu_pod("big-0", "big", "nlp", "h100-02", 8, "16", "128Gi"),
    ]
    di = world(
        subjects=[JOB],
        nodes=[cpu_node("h100-01"), cpu_node("h100-02")],
        jobs=[cpu_job(pods=2, gpus_per_pod=8)],
        pods=pods,
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    f = found[C.CPU_MEMORY_SHORTAGE]
    assert f.supported and f.confidence < 0.6 and not f.explains
    assert found[C.GPU_CAPACITY_SHORTAGE].supported


def test_unrecorded_requests_fall_back_on_the_schedulers_words():
    di = world(
        subjects=[JOB],
        nodes=[cpu_node("h100-01")],
        jobs=[
            job(
                "train",
                gpus_per_pod=8,
                message="0/1 nodes are available: 1 node(s) didn't have enough resources: CPU cores.",
            )
        ],
        queues=[queue("vision", 16)],
    )
    found = by_code(check_scheduling(di))
    f = found[C.CPU_MEMORY_SHORTAGE]
    assert f.supported and f.confidence == 0.6
    assert "not in the inventory" in f.statement and "h100-01 (8 GPU(s) free)" in f.statement
    assert C.GPU_CAPACITY_SHORTAGE not in found  # not "capacity is fine, it fits now" against the scheduler


def test_without_the_schedulers_words_unrecorded_requests_claim_nothing():
    di = world(subjects=[JOB], nodes=[cpu_node("h100-01")], jobs=[job("train")], queues=[queue("vision", 16)])
    assert C.CPU_MEMORY_SHORTAGE not in by_code(check_scheduling(di))


def test_it_is_the_top_cause_with_actions_that_name_the_pods_to_move():
    pods = [
        cpu_pod("etl-0", "etl", "data", "h100-01", 0, "60", "200Gi"),
        cpu_pod("etl-1", "etl", "data", "h100-01", 0, "20", "100Gi"),
    ]
    di = world(
        subjects=[JOB],
        nodes=[cpu_node("h100-01")],
        jobs=[cpu_job(gpus_per_pod=8)],
        pods=pods,
        queues=[queue("vision", 16)],
    )
    dx = run_checks(di)
    causes = [f for f in dx.findings if f.supported and f.scope == CAUSE]
    assert causes[0].code == C.CPU_MEMORY_SHORTAGE
    actions = [a for a in dx.actions if a.code == C.CPU_MEMORY_SHORTAGE]
    move, shrink = actions
    # 17 cores missing: moving the 60-core pod is enough, the 20-core one stays.
    assert "etl-0" in move.impact and "etl-1" not in move.impact and "frees 60 cores" in move.impact
    assert "cpu ≤ 15 cores" in shrink.title
