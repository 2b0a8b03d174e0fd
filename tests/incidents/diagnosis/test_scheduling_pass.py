"""The scheduling pass in queue order (incidents.diagnosis.scheduling_pass): a fault's fix starts the jobs ahead
first, so it is the cause of one waiting job's wait, not of every job that would fit in the room alone."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.scheduling_pass import pass_if_fixed, place, room_if
from incidents.diagnosis.types import Ref

from .dx_world import T0, job, node, pod, world

LIFT = frozenset({F.MISSING_GPU})


def _waiters(n: int) -> list:
    return [job(f"w{i}", "research", submitted=T0 + timedelta(minutes=i)) for i in range(1, n + 1)]


def _full_cluster_with_a_gpu_missing(waiters: list, subject: str):
    nodes = [node("h100-01"), node("h100-02"), node("h100-03", capacity=7)]
    held = [pod(f"r{i}-0", f"r{i}", "research", node_name=f"h100-0{i}", gpus=8) for i in (1, 2)]
    return world(subjects=[Ref("job", subject, "research")], nodes=nodes, pods=held, jobs=waiters)


def _supported(di) -> list[str]:
    return [f.code for f in run_checks(di).findings if f.supported and f.scope == "cause"]


def test_many_waiters_on_one_fault_only_the_first_in_line_is_told_the_fault_holds_it():
    waiters = _waiters(5)
    first = _full_cluster_with_a_gpu_missing(waiters, "w1")
    assert _supported(first)[0] == C.GPU_MISSING
    fifth = _full_cluster_with_a_gpu_missing(waiters, "w5")
    findings = run_checks(fifth).findings
    codes = [f.code for f in findings if f.supported and f.scope == "cause"]
    assert C.GPU_MISSING not in codes and codes[0] == C.GPU_CAPACITY_SHORTAGE, codes
    missing = next(f for f in findings if f.code == C.GPU_MISSING and f.scope == "cause")
    assert missing.status == "refuted"
    assert "would start research/w1 first" in missing.statement and "5th in line" in missing.statement
    shortage = next(f for f in findings if f.code == C.GPU_CAPACITY_SHORTAGE)
    assert "research/w1 first" in shortage.statement  # the fault stays in the answer as context


def test_a_job_ahead_that_its_own_quota_holds_takes_nothing():
    from .dx_world import queue

    waiters = [job("w1", "capped", submitted=T0), job("w2", "research", submitted=T0 + timedelta(minutes=5))]
    di = _full_cluster_with_a_gpu_missing(waiters, "w2")
    di.queues = [queue("capped", 0, 0), queue("research", 64)]
    with di.indexed():
        w2 = di.find("job", "w2", "research")
        req = F.job_request(di, w2)
        rows = F.node_fits(di, req)
        result = pass_if_fixed(di, w2, req, rows, LIFT, ["h100-03"])
    assert result.starts and result.nodes == {"h100-03": 1} and not result.before


# Property: a pass over random room and random waiters ahead never gives out more than the room, starts the
# job only where the jobs ahead left room, and agrees with the job's fit alone when nothing is ahead of it.
node_free = st.lists(st.integers(min_value=0, max_value=7), min_size=1, max_size=5)
ahead_sizes = st.lists(st.tuples(st.integers(1, 2), st.sampled_from([1, 2, 4, 8])), max_size=6)


@settings(max_examples=60, deadline=None)
@given(node_free, ahead_sizes, st.integers(1, 2), st.sampled_from([1, 2, 4, 8]))
def test_a_pass_never_gives_out_more_than_the_room(free, ahead, pods, per_pod):
    # node 0 lost a GPU (the fault lifted); every node holds some GPUs for running work
    nodes = [node(f"n{i}", capacity=7 if i == 0 else 8) for i in range(len(free))]
    running = [
        pod(f"p{i}-0", f"p{i}", "other", node_name=f"n{i}", gpus=held) for i, held in enumerate(free) if held
    ]
    jobs = [
        job(f"a{i}", "research", pods=p, gpus_per_pod=g, submitted=T0 + timedelta(minutes=i))
        for i, (p, g) in enumerate(ahead)
    ]
    mine = job("mine", "research", pods=pods, gpus_per_pod=per_pod, submitted=T0 + timedelta(hours=1))
    di = world(subjects=[Ref("job", "mine", "research")], nodes=nodes, pods=running, jobs=[*jobs, mine])
    with di.indexed():
        req = F.job_request(di, mine)
        rows = F.node_fits(di, req)
        room = room_if(rows, LIFT)
        result = pass_if_fixed(di, mine, req, rows, LIFT, [r.node for r in rows])
        given_out: dict[str, int] = {}
        for start in result.before:
            other_req = F.job_request(di, start.job.job)
            assert sum(start.nodes.values()) == other_req.pods  # a gang starts whole or not at all
            for n, k in start.nodes.items():
                given_out[n] = given_out.get(n, 0) + k * other_req.gpus_per_pod
        if result.starts:
            for n, k in result.nodes.items():
                given_out[n] = given_out.get(n, 0) + k * per_pod
            assert sum(result.nodes.values()) == pods
        assert all(given_out.get(n, 0) <= room[n] for n in room)
        left = {
            n: room[n]
            - sum(
                k * F.job_request(di, s.job.job).gpus_per_pod
                for s in result.before
                for m, k in s.nodes.items()
                if m == n
            )
            for n in room
        }
        assert result.starts == bool(place(rows, req, left, LIFT))
        if not jobs:
            assert result.starts == F.fits(rows, req, LIFT) and result.position == 1


def test_room_given_back_starts_the_first_jobs_in_order_not_every_job_that_fits_alone():
    """An action's impact ("pending jobs that would then start"): 8 GPUs back on h100-03 start one 8-GPU job, the
    first in queue order, and a 4-GPU job still fits beside nothing; higher queue priority goes first."""
    from incidents.diagnosis.scheduling_pass import starts_with_room

    from .dx_world import queue

    waiters = _waiters(4)
    di = _full_cluster_with_a_gpu_missing(waiters, "w1")
    di.nodes[2].state["allocatable"] = {"nvidia.com/gpu": 0}  # the device plugin withdrew all of h100-03
    assert starts_with_room(di, {"h100-03": 8}) == ["research/w1"]
    urgent = job("urgent", "prod", submitted=T0 + timedelta(hours=2))
    di = _full_cluster_with_a_gpu_missing([*waiters, urgent], "w1")
    di.nodes[2].state["allocatable"] = {"nvidia.com/gpu": 0}
    di.queues = [queue("prod", 64, priority=100), queue("research", 64)]
    assert starts_with_room(di, {"h100-03": 8}) == ["prod/urgent"]
    assert starts_with_room(di, {}) == []
