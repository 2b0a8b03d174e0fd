"""Who KAI would evict for a waiting job (incidents.diagnosis.reclaim.victims): preemption within its queue,
reclaim from queues over their fair share; KAI's own cases run in test_model_kai_cases.py."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis.reclaim import PREEMPT, RECLAIM, victims
from incidents.diagnosis.types import Ref

from .dx_world import T0, job, node, pod, queue, world


def _running(name, project, node_name, gpus, minutes, priority_class="train"):
    j = job(name, project, phase="Running", gpus_per_pod=gpus, priority_class=priority_class)
    j.state["submitted"] = (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    p = pod(f"{name}-0", name, project, node_name=node_name, gpus=gpus, priority_class=priority_class)
    return j, p


def _cluster(running, waiting, queues):
    return world(
        subjects=[Ref("job", waiting.name, waiting.namespace)],
        nodes=[node("n1", gpus=4)],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), waiting],
        queues=queues,
    )


def test_an_inference_job_preempts_the_newest_train_job_of_its_own_queue():
    running = [_running("old", "vision", "n1", 2, 0), _running("new", "vision", "n1", 2, 5)]
    waiting = job(
        "serve", "vision", gpus_per_pod=2, priority_class="inference", submitted=T0 + timedelta(hours=1)
    )
    di = _cluster(running, waiting, [queue("vision", 4)])
    ev = victims(di, waiting)
    assert ev is not None and [(v.label, v.action) for v in ev.victims] == [("vision/new", PREEMPT)]
    assert ev.nodes == {"n1": 1}


def test_a_queue_below_its_share_reclaims_from_the_queue_over_it_never_from_one_within_it():
    running = [
        _running("a1", "a", "n1", 2, 0),
        _running("b1", "b", "n1", 1, 1),
        _running("b2", "b", "n1", 1, 2),
    ]
    waiting = job("c1", "c", gpus_per_pod=1, submitted=T0 + timedelta(hours=1))
    # a holds 2 of its quota 2; b holds 2 of its quota 1 (over it); c holds nothing of its quota 1. a's lower
    # queue priority puts its job first among the victims, but a is within its share: it is not taken
    di = _cluster(running, waiting, [queue("a", 2, priority=0), queue("b", 1, priority=5), queue("c", 1)])
    ev = victims(di, waiting)
    assert ev is not None and [(v.label, v.action) for v in ev.victims] == [("b/b2", RECLAIM)]


def test_nothing_is_evicted_for_a_job_its_own_quota_keeps_out_or_for_non_preemptible_victims():
    running = [_running("svc", "b", "n1", 4, 0, priority_class="inference")]
    waiting = job("c1", "c", gpus_per_pod=1, submitted=T0 + timedelta(hours=1))
    di = _cluster(running, waiting, [queue("b", 1), queue("c", 1)])
    assert victims(di, waiting) is None  # b is over its quota, but an inference job is not preemptible
    running = [_running("t1", "b", "n1", 4, 0)]
    capped = job("c2", "c", gpus_per_pod=2, priority_class="inference", submitted=T0 + timedelta(hours=1))
    di = _cluster(running, capped, [queue("b", 1), queue("c", 1)])
    assert victims(di, capped) is None  # 2 inference GPUs over c's quota of 1: no eviction lets it in
