"""The queue replayed forward (incidents.diagnosis.replay) counts CPU and memory as the pass at t does: a node
with free GPUs but no CPU left takes no pod, and a job's end gives back the cores its pods held
(incidents.diagnosis.replay_resources)."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.durations import Basis
from incidents.diagnosis.eta import forecast
from incidents.diagnosis.types import iso

from .dx_world import T0, job, node, pod, queue, world

T = T0 + timedelta(hours=1)


def _node(name, cores=64, memory="512Gi"):
    n = node(name)
    n.state["allocatable"].update(cpu=str(cores), memory=memory)
    return n


def _running(name, node_name, gpus, cores, limit_h, minutes=0):
    j = job(name, "vision", phase="Running", gpus_per_pod=gpus)
    at = iso(T0 + timedelta(minutes=minutes))
    j.state.update(started=at, submitted=at, active_deadline_seconds=limit_h * 3600)
    p = pod(f"{name}-0", name, "vision", node_name=node_name, gpus=gpus)
    p.state["requests"] = {"cpu": str(cores), "memory": "64Gi"}
    return j, p


def _world(running, nodes=None, gpus=4):
    w = job("w", "vision", gpus_per_pod=gpus, submitted=T0 + timedelta(minutes=30))
    w.state["requests_per_pod"] = {"cpu": "16", "memory": "64Gi"}
    return world(
        subjects=[],
        t=T,
        nodes=nodes or [_node("n1"), _node("n2")],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), w],
        queues=[queue("vision", 16)],
    )


def _start(di):
    with di.indexed():
        base = SP.cluster_pass(di)
    assert base.find("vision", "w").outcome == SP.NO_ROOM
    s = forecast(di, base, Basis(window=timedelta(hours=24))).likely_starts().get("vision/w")
    return None if s is None else (s.at, s.nodes)


def test_free_gpus_on_a_node_with_no_cpu_left_start_nothing_until_a_node_with_both_frees():
    # hog holds 4 of n1's GPUs and all its 64 cores until 04:00; r2 holds n2 until 02:00
    di = _world([_running("hog", "n1", 4, 64, 4), _running("r2", "n2", 8, 8, 2)])
    assert _start(di) == (T0 + timedelta(hours=2), {"n2": 1})


def test_the_cores_a_job_held_come_back_at_its_end():
    # hog ends at 01:30: its cores come back, and n1's 4 free GPUs with them take w
    di = _world([_running("hog", "n1", 4, 64, 1.5), _running("r2", "n2", 8, 8, 2)])
    assert _start(di) == (T0 + timedelta(hours=1, minutes=30), {"n1": 1})


def test_a_job_moved_out_of_the_way_goes_only_where_its_cores_fit():
    # w (1 x 8) fits n2 once r2 (4 GPUs, 8 cores) moves out of its way; n1's 4 free GPUs would take r2, but hog
    # holds all of n1's cores: nothing is moved, and w starts when r2 ends (03:05)
    di = _world([_running("hog", "n1", 4, 64, 4), _running("r2", "n2", 4, 8, 3, minutes=5)], gpus=8)
    assert _start(di) == (T0 + timedelta(hours=3, minutes=5), {"n2": 1})
