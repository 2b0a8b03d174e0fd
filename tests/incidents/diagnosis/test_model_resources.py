"""The scheduling model's placement and its CPU and memory, as KAI weighs them (placement, resources,
resource_quota, queue_order): binpack puts a pod on the fullest node that takes it, each start takes its CPU and
memory from the room the next jobs see, a CPU limit holds a job as a GPU limit does, and the queue with the
smaller dominant share is served first."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.queue_order import QueueOrder
from incidents.diagnosis.types import EntityState

from .dx_world import T0, job, node, pod, queue, world


def _cpu_node(name: str, gpus: int = 8, cpu: float | None = None, memory: str | None = None) -> EntityState:
    n = node(name, gpus)
    for key, value in (("cpu", cpu), ("memory", memory)):
        if value is not None:
            n.state["allocatable"][key] = value
            n.state["capacity"][key] = value
    return n


def _asks(j: EntityState, cpu: float | None = None, memory: str | None = None) -> EntityState:
    j.state["requests_per_pod"] = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return j


def _held(name: str, project: str, node_name: str, gpus: int, cpu: float = 0.0) -> list[EntityState]:
    """A running job holding ``gpus`` GPUs (and ``cpu`` cores) on a node, with its pod."""
    p = pod(f"{name}-0", name, project, node_name=node_name, gpus=gpus)
    p.state["requests"] = {"cpu": cpu} if cpu else {}
    j = job(name, project, gpus_per_pod=gpus, phase="Running")
    j.state["active"] = 1
    return [j, p]


def _pass(nodes, running, waiting, queues=None):
    jobs = [x for pair in running for x in pair if x.kind == "job"] + waiting
    pods = [x for pair in running for x in pair if x.kind == "pod"]
    di = world(subjects=[], nodes=nodes, pods=pods, jobs=jobs, queues=queues or [])
    with di.indexed():
        return SP.cluster_pass(di)


def test_binpack_puts_a_pod_on_the_fitting_node_with_the_fewest_free_gpus():
    nodes = [node("n-01"), node("n-02"), node("n-03")]
    running = [_held("a", "vision", "n-02", 6), _held("b", "vision", "n-03", 7)]
    cp = _pass(nodes, running, [job("w", "vision", gpus_per_pod=2)])
    assert cp.starts[0].nodes == {"n-02": 1}  # n-03 (1 free) cannot take it; n-02 (2 free) before n-01 (8)


def test_binpack_fills_the_fullest_node_before_opening_the_next():
    nodes = [node("n-01"), node("n-02")]
    running = [_held("a", "vision", "n-02", 6)]
    cp = _pass(nodes, running, [job("w", "vision", pods=3, gpus_per_pod=1)])
    assert cp.starts[0].nodes == {"n-02": 2, "n-01": 1}


def test_a_tie_goes_to_the_first_node_by_name():
    cp = _pass([node("n-02"), node("n-01")], [], [job("w", "vision", gpus_per_pod=1)])
    assert cp.starts[0].nodes == {"n-01": 1}


def test_each_start_takes_its_cpu_from_the_room_the_next_job_sees():
    nodes = [_cpu_node("n-01", cpu=10)]
    first = _asks(job("w1", "vision", gpus_per_pod=1, submitted=T0), cpu=6)
    second = _asks(job("w2", "vision", gpus_per_pod=1, submitted=T0 + timedelta(minutes=1)), cpu=6)
    cp = _pass(nodes, [], [first, second])
    assert [c.outcome for c in cp.considered] == [SP.STARTS, SP.NO_ROOM]


def test_a_job_asking_no_gpu_is_placed_by_its_cpu_and_memory():
    nodes = [_cpu_node("n-01", cpu=4, memory="10Gi"), _cpu_node("n-02", cpu=8, memory="10Gi")]
    jobs = [
        _asks(
            job(f"c{i}", "vision", gpus_per_pod=0, submitted=T0 + timedelta(minutes=i)), cpu=3, memory="1Gi"
        )
        for i in range(4)
    ]
    cp = _pass(nodes, [], jobs)
    # binpack by CPU: the 4-core node first, then the 8-core one twice; the fourth finds 2 cores left anywhere
    assert [c.nodes for c in cp.considered] == [{"n-01": 1}, {"n-02": 1}, {"n-02": 1}, {}]
    assert cp.considered[-1].outcome == SP.NO_ROOM


def _cpu_queue(name: str, **cpu_memory: float) -> EntityState:
    q = queue(name, 8)
    q.state.update(cpu_memory)
    return q


def test_a_cpu_limit_holds_a_job_as_a_gpu_limit_does():
    nodes = [_cpu_node("n-01", cpu=100)]
    jobs = [
        _asks(job(f"w{i}", "vision", gpus_per_pod=1, submitted=T0 + timedelta(minutes=i)), cpu=2)
        for i in range(2)
    ]
    cp = _pass(nodes, [], jobs, [_cpu_queue("vision", limit_cpu_cores=2.5)])
    assert [c.outcome for c in cp.considered] == [SP.STARTS, SP.QUOTA]
    assert "CPU limit" in cp.considered[1].why and "vision" in cp.considered[1].why


def test_the_queue_with_the_smaller_dominant_share_is_served_first():
    # both queues deserve little CPU; vision already holds more of its CPU fair share than nlp does
    nodes = [_cpu_node("n-01", cpu=3000, memory="30G")]
    running = [_held("a", "vision", "n-01", 0, cpu=1000), _held("b", "nlp", "n-01", 0, cpu=800)]
    queues = [
        _cpu_queue("vision", quota_cpu_cores=1.5, quota_memory_bytes=1.5e9),
        _cpu_queue("nlp", quota_cpu_cores=1.5, quota_memory_bytes=1.5e9),
    ]
    waiting = [
        _asks(job("v", "vision", gpus_per_pod=0, submitted=T0), cpu=700),
        _asks(job("n", "nlp", gpus_per_pod=0, submitted=T0 + timedelta(minutes=1)), cpu=700),
    ]
    di = world(
        subjects=[],
        nodes=nodes,
        pods=[x for pair in running for x in pair if x.kind == "pod"],
        jobs=[x for pair in running for x in pair if x.kind == "job"] + waiting,
        queues=queues,
    )
    assert [j.name for j in QueueOrder(di, waiting)] == ["n", "v"]


# Property: whatever the waiting jobs ask, a pass never starts more CPU or memory on a node than it has left.
asks = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 6), st.integers(1, 3)), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(2, 12), min_size=1, max_size=3), asks)
def test_a_pass_never_gives_out_more_cpu_or_memory_than_a_node_has(cores, waiting):
    nodes = [_cpu_node(f"n-{i:02d}", gpus=4, cpu=c, memory=f"{c}Gi") for i, c in enumerate(cores, 1)]
    jobs = [
        _asks(
            job(f"w{i}", "vision", gpus_per_pod=g, pods=p, submitted=T0 + timedelta(minutes=i)),
            cpu=c,
            memory=f"{c}Gi",
        )
        for i, (g, c, p) in enumerate(waiting)
    ]
    cp = _pass(nodes, [], jobs)
    cpu: dict[str, float] = {}
    gpus: dict[str, int] = {}
    for c in cp.starts:
        per = c.job.get("gpus_per_pod")
        for n, k in c.nodes.items():
            cpu[n] = cpu.get(n, 0) + k * float(c.job.get("requests_per_pod")["cpu"])
            gpus[n] = gpus.get(n, 0) + k * per
        assert sum(c.nodes.values()) == c.job.get("pods")  # a gang starts whole or not at all
    for i, c in enumerate(cores, 1):
        assert cpu.get(f"n-{i:02d}", 0) <= c and gpus.get(f"n-{i:02d}", 0) <= 4


def test_a_pod_asking_no_gpu_goes_to_a_node_without_gpus_first():
    cpu_only = _cpu_node("c-01", gpus=0, cpu=64)
    cpu_only.state["labels"]["nvidia.com/gpu.count"] = "0"
    cp = _pass([_cpu_node("a-01", cpu=4), cpu_only], [], [_asks(job("w", "vision", gpus_per_pod=0), cpu=2)])
    assert cp.starts[0].nodes == {"c-01": 1}
