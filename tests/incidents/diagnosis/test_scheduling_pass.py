"""The scheduling pass in queue order (incidents.diagnosis.scheduling_pass): a fault's fix starts the jobs ahead
first, so it is the cause of one waiting job's wait, not of every job that would fit in the room alone."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.fault_pass import pass_if_fixed, room_if
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduling_pass import place
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
        req = job_request(di, w2)
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
        req = job_request(di, mine)
        rows = F.node_fits(di, req)
        room = room_if(rows, LIFT)
        result = pass_if_fixed(di, mine, req, rows, LIFT, [r.node for r in rows])
        given_out: dict[str, int] = {}
        for start in result.before:
            other_req = job_request(di, start.job.job)
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
                k * job_request(di, s.job.job).gpus_per_pod
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
    from incidents.diagnosis.fault_pass import starts_with_room

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


#
# One queue order for every pass (incidents.diagnosis.queue_order)
#

queue_specs = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 16), st.sampled_from([0, 1, 2])),  # priority, quota, weight
    min_size=1,
    max_size=4,
)
waiter_specs = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 120), st.sampled_from(["train", "inference"])),
    min_size=1,
    max_size=12,
)


def _queued_world(queues, waiters, scheduler="kai"):
    """Two full 8-GPU nodes and h100-03, whose device plugin withdrew all 8 GPUs; 8-GPU jobs wait in queues."""
    from .dx_world import queue

    qs = []
    for i, (prio, quota, weight) in enumerate(queues):
        q = queue(f"q{i}", quota, priority=prio)
        q.state["over_quota_weight"] = weight
        qs.append(q)
    jobs = [
        job(f"w{i}", f"q{qi % len(queues)}", submitted=T0 + timedelta(minutes=m), priority_class=cls)
        for i, (qi, m, cls) in enumerate(waiters)
    ]
    di = _full_cluster_with_a_gpu_missing(jobs, "w0")
    di.nodes[2].state["allocatable"] = {"nvidia.com/gpu": 0}
    di.nodes[2].state["capacity"] = {"nvidia.com/gpu": 8}
    di.queues = qs
    di.scheduler = scheduler
    return di


@settings(max_examples=60, deadline=None)
@given(queue_specs, waiter_specs, st.sampled_from(["kai", "kueue", "kube"]))
def test_fixing_one_8_gpu_node_starts_exactly_the_first_8_gpu_job_in_order(queues, waiters, scheduler):
    from incidents.diagnosis.fault_pass import starts_with_room
    from incidents.diagnosis.pending import is_pending
    from incidents.diagnosis.queue_order import QueueOrder
    from incidents.diagnosis.quota import quota_at

    di = _queued_world(queues, waiters, scheduler)
    with di.indexed():
        order = [j.ref.label for j in QueueOrder(di, [j for j in di.jobs if is_pending(j)])]
        started = starts_with_room(di, {"h100-03": 8})
        # every waiter in order: only the first would start with the fix, each other is told who goes first
        answers = {}
        for j in di.jobs:
            req = job_request(di, j)
            held = quota_at(di, j, req, 8)
            if held is not None and held.holds:
                continue  # its own quota is its cause (quota_causes.py), whatever the room: not weighed here
            rows = F.node_fits(di, req)
            answers[j.ref.label] = pass_if_fixed(di, j, req, rows, frozenset({F.DEVICE_PLUGIN}), ["h100-03"])
    order = [label for label in order if label in answers]
    assert len(started) <= 1
    if started:
        assert [label for label, r in answers.items() if r.starts] == started
        first = order.index(started[0])
        for label in order[first + 1 :]:
            r = answers[label]
            assert not r.starts and r.first is not None and r.first.label == started[0]
    else:
        assert not any(r.starts for r in answers.values())


@settings(max_examples=60, deadline=None)
@given(queue_specs, waiter_specs, st.sampled_from(["kai", "kueue", "kube"]))
def test_the_order_serves_every_waiting_job_once_and_each_queue_in_its_own_order(queues, waiters, scheduler):
    from incidents.diagnosis.pending import is_pending
    from incidents.diagnosis.queue_order import QueueOrder, in_queue_key, job_queue

    di = _queued_world(queues, waiters, scheduler)
    with di.indexed():
        served = list(QueueOrder(di, [j for j in di.jobs if is_pending(j)]))
    assert sorted(j.ref.label for j in served) == sorted(j.ref.label for j in di.jobs)
    for name in {job_queue(j) for j in served}:
        mine = [j for j in served if job_queue(j) == name]
        assert mine == sorted(mine, key=in_queue_key)
    if scheduler == "kueue":  # a higher queue priority is served first, whatever else
        prio = {q.name: q.get("priority") for q in di.queues}
        ranks = [prio[job_queue(j)] for j in served]
        assert ranks == sorted(ranks, reverse=True)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 16), st.integers(1, 8), st.sampled_from([0, 1, 3]))
def test_two_equal_kai_queues_split_the_free_gpus(free_gpus, quota, weight):
    """KAI charges each start to its queue before the next choice: two queues with the same quota and weight,
    each with more 1-GPU jobs waiting than the room, end within one GPU of each other."""
    from incidents.diagnosis.scheduling_pass import cluster_pass

    from .dx_world import queue

    qs = [queue("a", quota), queue("b", quota)]
    for q in qs:
        q.state["over_quota_weight"] = weight
    jobs = [
        job(f"{q}{i}", q, gpus_per_pod=1, submitted=T0 + timedelta(seconds=i if q == "a" else 100 + i))
        for q in ("a", "b")
        for i in range(free_gpus + 1)
    ]
    di = world(subjects=[Ref("job", "a0", "a")], nodes=[node("n1", gpus=free_gpus)], jobs=jobs, queues=qs)
    with di.indexed():
        cp = cluster_pass(di)
    units = {name: sum(u for (_, q), u in cp.started_units.items() if q == name) for name in ("a", "b")}
    assert units["a"] + units["b"] == free_gpus
    assert abs(units["a"] - units["b"]) <= 1


def test_a_missing_gpu_on_a_cordoned_node_is_context_not_the_cause_of_a_wait():
    """Repairing the GPU of a cordoned node starts nobody: the fault is told as context, never as the cause."""
    waiters = _waiters(2)
    nodes = [node("h100-01"), node("h100-02"), node("h100-03", capacity=7, unschedulable=True)]
    held = [pod(f"r{i}-0", f"r{i}", "research", node_name=f"h100-0{i}", gpus=8) for i in (1, 2)]
    for subject in ("w1", "w2"):
        di = world(subjects=[Ref("job", subject, "research")], nodes=nodes, pods=held, jobs=waiters)
        findings = run_checks(di).findings
        assert not any(f.code == C.GPU_MISSING and f.supported and f.scope == "cause" for f in findings), [
            (f.code, f.status, f.scope) for f in findings
        ]


def test_repairing_a_missing_gpu_gives_back_that_gpu_not_the_ones_a_device_plugin_withdrew():
    """h100-03 (cordoned) lost a GPU; a100-02's device plugin withdrew all 8 of its GPUs. Repairing the missing
    GPU gives back its GPU on h100-03 and nothing on a100-02: it is not the cause of an 8-GPU job's wait."""
    nodes = [
        node("h100-01"),
        node("h100-03", capacity=7, unschedulable=True),
        node("a100-02", capacity=8, allocatable=0, pool="a100"),
    ]
    held = [pod("r1-0", "r1", "research", node_name="h100-01", gpus=8)]
    di = world(subjects=[Ref("job", "w1", "research")], nodes=nodes, pods=held, jobs=_waiters(1))
    with di.indexed():
        req = job_request(di, di.find("job", "w1", "research"))
        rows = {r.node: r for r in F.node_fits(di, req)}
    assert rows["a100-02"].free_if({F.MISSING_GPU}) == 0
    assert rows["a100-02"].free_if({F.DEVICE_PLUGIN}) == 8
    assert (rows["h100-03"].free, rows["h100-03"].free_if({F.MISSING_GPU})) == (7, 8)
    findings = run_checks(di).findings
    assert not any(f.code == C.GPU_MISSING and f.supported and f.scope == "cause" for f in findings), [
        (f.code, f.status, f.scope) for f in findings
    ]


def _strict_world(subject: str, strategy: str):
    """Kueue: h100-03's device plugin withdrew its 8 GPUs; queue "batch" heads with a 16-GPU job that no node can
    hold, then an 8-GPU job the repair could start."""
    from .dx_world import queue

    head = job("huge", "batch", pods=1, gpus_per_pod=16, submitted=T0)
    small = job("small", "batch", submitted=T0 + timedelta(minutes=5))
    di = _full_cluster_with_a_gpu_missing([head, small], subject)
    di.subjects = [Ref("job", subject, "batch")]
    di.nodes[2].state["allocatable"] = {"nvidia.com/gpu": 0}
    di.nodes[2].state["capacity"] = {"nvidia.com/gpu": 8}
    q = queue("batch", 64)
    q.state["queueing_strategy"] = strategy
    di.queues = [q]
    di.scheduler = "kueue"
    return di


def test_a_strict_fifo_head_that_cannot_be_admitted_holds_the_jobs_behind_it_whatever_the_fix():
    """Kueue's StrictFIFO: the repair gives back room for the 8-GPU job, but the 16-GPU head of its queue is not
    admitted even then and holds it. BestEffortFIFO goes past the head, and the repair starts the job."""
    from incidents.diagnosis.fault_pass import starts_with_room

    lift = frozenset({F.DEVICE_PLUGIN})
    for strategy, starts in (("StrictFIFO", False), ("BestEffortFIFO", True)):
        di = _strict_world("small", strategy)
        with di.indexed():
            small = di.find("job", "small", "batch")
            req = job_request(di, small)
            result = pass_if_fixed(di, small, req, F.node_fits(di, req), lift, ["h100-03"])
            assert result.starts is starts, strategy
            assert (result.blocked_by is not None) is not starts
            assert starts_with_room(di, {"h100-03": 8}) == (["batch/small"] if starts else [])
        findings = run_checks(_strict_world("small", strategy)).findings
        plugin = [f for f in findings if f.code == C.DEVICE_PLUGIN_UNHEALTHY and f.scope == "cause"]
        if starts:
            assert any(f.supported for f in plugin), [(f.code, f.status) for f in findings]
        else:
            assert plugin and not any(f.supported for f in plugin)
            assert "StrictFIFO" in plugin[0].statement and "batch/huge" in plugin[0].statement
    assert result.blocked_by is None and result.nodes == {"h100-03": 1}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.sampled_from([8, 16]), st.integers(0, 60)), min_size=1, max_size=8
    ),
    st.booleans(),
)
def test_in_a_strict_fifo_queue_nobody_starts_behind_a_head_that_does_not(waiters, strict):
    """Property, Kueue: whatever the waiters, a job of a StrictFIFO queue starts with the repair only if every job
    ahead of it in its own queue starts too; and the repair never starts more than its 8 GPUs hold."""
    from incidents.diagnosis.fault_pass import starts_with_room
    from incidents.diagnosis.queue_order import in_queue_key, job_queue

    from .dx_world import queue

    jobs = [
        job(f"w{i}", f"q{qi}", gpus_per_pod=g, submitted=T0 + timedelta(minutes=m))
        for i, (qi, g, m) in enumerate(waiters)
    ]
    di = _full_cluster_with_a_gpu_missing(jobs, "w0")
    di.nodes[2].state["allocatable"] = {"nvidia.com/gpu": 0}
    di.nodes[2].state["capacity"] = {"nvidia.com/gpu": 8}
    qs = [queue("q0", 64), queue("q1", 64)]
    for q in qs:
        q.state["queueing_strategy"] = "StrictFIFO" if strict else "BestEffortFIFO"
    di.queues, di.scheduler = qs, "kueue"
    with di.indexed():
        started = set(starts_with_room(di, {"h100-03": 8}))
        answers = {}
        for j in di.jobs:
            req = job_request(di, j)
            answers[j.ref.label] = pass_if_fixed(
                di, j, req, F.node_fits(di, req), frozenset({F.DEVICE_PLUGIN}), ["h100-03"]
            ).starts
    assert len(started) <= 1
    assert {label for label, s in answers.items() if s} == started
    if strict:
        for j in di.jobs:
            if j.ref.label in started:
                ahead = [
                    o for o in di.jobs if job_queue(o) == job_queue(j) and in_queue_key(o) < in_queue_key(j)
                ]
                assert not ahead, (j.ref.label, [o.ref.label for o in ahead])
