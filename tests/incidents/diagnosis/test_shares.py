"""KAI GPU shares in the fit and gpu_fragmentation / capacity for shares: the GPUs and the shares holding them."""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduling import check_scheduling
from incidents.diagnosis.types import Ref

from .dx_world import gpu, job, node, pod, queue, world

JOB = Ref("job", "nb", "vision")


def share_job(name: str = "nb", fraction: float | None = 0.5, memory_mib: int | None = None):
    j = job(name, gpus_per_pod=0)
    j.state["gpu_share"] = {"fraction": fraction, "memory_mib": memory_mib, "gpu_index": None, "group": ""}
    return j


def shared_gpu(uuid: str, node_name: str, index: int, shares: list[tuple[str, float]]):
    g = gpu(uuid, node_name, index, pod_ref=f"runai-reservation/gpu-reservation-{node_name}-{index}")
    g.state["reservation"] = g.state["pod"]
    g.state["shares"] = [{"pod": p, "fraction": f, "memory_mib": int(f * 46068)} for p, f in shares]
    return g


def reservation(node_name: str, index: int):
    return pod(f"gpu-reservation-{node_name}-{index}", "", "runai-reservation", node_name=node_name, gpus=1)


def l40s(name: str, gpus: int = 2):
    n = node(name, gpus, pool="l40s")
    n.state["gpu_memory_mib"] = 46068
    return n


def two_fragmented_gpus():
    return world(
        subjects=[JOB],
        nodes=[l40s("l40s-01")],
        gpus=[
            shared_gpu("GPU-a", "l40s-01", 0, [("vision/ana-0", 0.6)]),
            shared_gpu("GPU-b", "l40s-01", 1, [("vision/ben-0", 0.3), ("nlp/emb-0", 0.3)]),
        ],
        pods=[reservation("l40s-01", 0), reservation("l40s-01", 1)],
        jobs=[share_job()],
        queues=[queue("vision", 4)],
    )


def test_the_fit_counts_what_is_left_of_each_shared_gpu():
    di = two_fragmented_gpus()
    req = job_request(di, di.jobs[0])
    assert req.share == 0.5
    (row,) = F.node_fits(di, req)
    assert row.free == 0 and [x["free"] for x in row.shared] == [0.4, 0.4]
    assert row.share_slots == 0 and F.INSUFFICIENT in row.blockers


def test_enough_in_total_on_no_single_gpu_is_fragmentation_naming_the_gpus_and_holders():
    found = {f.code: f for f in check_scheduling(two_fragmented_gpus())}
    frag = found[C.GPU_FRAGMENTATION]
    assert frag.supported
    assert "0.8 of a GPU is free in total" in frag.statement
    assert "GPU 0 on l40s-01 (0.4 free, held by vision/ana-0 (0.6))" in frag.statement
    assert "GPU 1 on l40s-01 (0.4 free, held by vision/ben-0 (0.3), nlp/emb-0 (0.3))" in frag.statement
    assert found[C.GPU_CAPACITY_SHORTAGE].status == "refuted"


def test_too_little_left_is_capacity():
    di = two_fragmented_gpus()
    di.jobs[0].state["gpu_share"]["fraction"] = 0.9
    found = {f.code: f for f in check_scheduling(di)}
    assert found[C.GPU_CAPACITY_SHORTAGE].supported
    assert found[C.GPU_FRAGMENTATION].status == "refuted"


def test_a_gpu_with_room_or_a_whole_free_gpu_fits():
    di = two_fragmented_gpus()
    di.jobs[0].state["gpu_share"]["fraction"] = 0.4
    assert F.fits(F.node_fits(di, job_request(di, di.jobs[0])), job_request(di, di.jobs[0]))
    di = two_fragmented_gpus()
    di.nodes[0].state["capacity"]["nvidia.com/gpu"] = 3
    di.nodes[0].state["allocatable"]["nvidia.com/gpu"] = 3
    req = job_request(di, di.jobs[0])
    (row,) = F.node_fits(di, req)
    assert row.free == 1 and row.share_slots == 2 and F.fits([row], req)


def test_gpu_memory_shares_count_mib():
    di = two_fragmented_gpus()
    di.jobs[0].state["gpu_share"] = {"fraction": None, "memory_mib": 20000, "gpu_index": None, "group": ""}
    req = job_request(di, di.jobs[0])
    (row,) = F.node_fits(di, req)
    assert [x["free_mib"] for x in row.shared] == [46068 - 27640, 46068 - 27640]
    assert row.share_slots == 0
    frag = {f.code: f for f in check_scheduling(di)}[C.GPU_FRAGMENTATION]
    assert frag.supported and "MiB of GPU memory is free in total" in frag.statement


def test_moving_the_fewest_shares_makes_room():
    dx = run_checks(two_fragmented_gpus())
    (act,) = [a for a in dx.actions if a.code == C.GPU_FRAGMENTATION]
    # GPU 1 needs 0.1 more: moving one 0.3 share is enough; GPU 0 would need its only 0.6 share moved too.
    assert act.title.startswith("Move 1 share(s) off GPU 1 on l40s-01")
    assert act.command.startswith("kubectl delete pod -n vision ben-0 ")
    assert "GPU 1 then has 0.7 free for a 0.5 share" in act.impact
