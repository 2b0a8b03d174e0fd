"""The queue replayed forward (incidents.diagnosis.replay) on KAI divides the fair shares again at each step from
what the queues then ask (QueueOrder.moved): a queue whose jobs ended asks less, and the share it leaves goes to
the others by their weight, which changes who goes first."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.durations import Basis
from incidents.diagnosis.eta import forecast
from incidents.diagnosis.queue_order import QueueOrder
from incidents.diagnosis.types import iso

from .dx_world import T0, job, node, pod, queue, world

T = T0 + timedelta(hours=1)
DAY = timedelta(hours=24)
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def _running(name, project, nodes, limit_h):
    j = job(name, project, phase="Running", pods=len(nodes), gpus_per_pod=8)
    j.state["started"] = iso(T0)
    j.state["submitted"] = iso(T0)
    j.state["active_deadline_seconds"] = limit_h * 3600
    return j, [pod(f"{name}-{i}", name, project, node_name=n, gpus=8) for i, n in enumerate(nodes)]


def _queue(name, weight):
    q = queue(name, None)
    q.state["over_quota_weight"] = weight
    return q


def _world():
    # 72 GPUs: n1 and n2 (H100, the only ones b and c select) and n9 (56, another model). a (weight 20) holds all
    # of them: a0 on n9 for a day, a1 on n1, n2 and n9 until 02:00. b (weight 1) waits with three 8-GPU jobs, c
    # (weight 2) with one. At t a asks 72 and b's fair share is 3, c's 6: wc goes first. Once a1 has ended a
    # asks 40, and the 72 GPUs cover what all ask: b's share is 24, c's 8, and b's jobs go first (8 / 24 and
    # 16 / 24 of their share, against c's 8 / 8) for the two H100 nodes a1 frees.
    a0, a0_pods = _running("a0", "a", ["n9"] * 5, 24)
    a1, a1_pods = _running("a1", "a", ["n1", "n2", "n9", "n9"], 2)
    waiting = [
        job(n, q, gpus_per_pod=8, node_selector=H100, submitted=T0 + timedelta(minutes=m))
        for n, q, m in (("wb1", "b", 20), ("wb2", "b", 21), ("wb3", "b", 22), ("wc", "c", 30))
    ]
    di = world(
        subjects=[],
        t=T,
        nodes=[node("n1"), node("n2"), node("n9", gpus=56, labels={"nvidia.com/gpu.product": "A100"})],
        pods=[*a0_pods, *a1_pods],
        jobs=[a0, a1, *waiting],
        queues=[_queue("a", 20), _queue("b", 1), _queue("c", 2)],
    )
    di.scheduler = "kai"
    return di


def test_the_shares_a_queue_leaves_as_its_jobs_end_go_to_the_others_and_change_who_goes_first():
    di = _world()
    with di.indexed():
        base = SP.cluster_pass(di)
    assert [c.label for c in base.considered][0] == "c/wc"  # the order at t
    starts = forecast(di, base, Basis(window=DAY)).likely_starts()
    at_two = T0 + timedelta(hours=2)
    assert starts["b/wb1"].at == at_two
    assert starts["b/wb2"].at == at_two
    assert "c/wc" not in starts or starts["c/wc"].at > at_two  # divided as at t, wc took one of the two


def test_a_moved_order_divides_the_fair_shares_again_from_what_the_queues_then_ask():
    di = _world()
    waiting = [j for j in di.jobs if j.name.startswith("w")]
    with di.indexed():
        order = QueueOrder(di, waiting)
        held = order.moved(waiting, {"a": (-32.0, (0.0, 0.0))})
        ended = order.moved(waiting, {"a": (-32.0, (0.0, 0.0))}, {"a": (-32.0, (0.0, 0.0))})
    assert [order.queue[q].fair for q in "abc"] == [63.0, 3.0, 6.0]
    assert [held.queue[q].fair for q in "abc"] == [63.0, 3.0, 6.0]  # what they hold moved, not what they ask
    assert [ended.queue[q].fair for q in "abc"] == [40.0, 24.0, 8.0]
    assert [j.name for j in held][:1] == ["wc"]
    assert [j.name for j in ended][:2] == ["wb1", "wb2"]
    assert order.queue["a"].demand == 72.0  # the order it was moved from is left as it was
