"""End to end: a scenario runs in the simulator, the real collectors sweep it over HTTP, and the fleet
funnel as of t equals the counts computed directly from the simulator's own state at t.

Checked at t well after the jobs started: "active" is SM activity over the 10 minutes before t, so right
after a start it mixes idle and busy points (by design, not a mismatch)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from collectors.sweep import sweep_cluster, sweep_telemetry
from rcaweb.cursor import Cursor
from simulator.engine.world import World
from simulator.scenario import load_scenario
from tests.collectors.simhelpers import register, served
from web.console import fleet, funnel, gpu_activity

pytestmark = pytest.mark.django_db

SCENARIO = """
format: 1
name: console-fleet
summary: busy, half-used and idle jobs on two pools while GPUs and nodes fail
start: 2026-11-29T00:00:00Z
duration: 3h
seed: 11
cluster:
  name: gpu-prod
  scheduler: kai
  nodepools:
    - {name: h100, nodes: 3, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3}
    - {name: a100, nodes: 2, gpus_per_node: 4, gpu_product: NVIDIA-A100-SXM4-80GB}
projects:
  - {name: vision, quota: {gpu: 24}}
  - {name: nlp, quota: {gpu: 16}}
jobs:
  - {name: busy, project: vision, submit: 5m, pods: 1, gpus_per_pod: 8, sm_activity: 0.85}
  - {name: middling, project: vision, submit: 6m, pods: 1, gpus_per_pod: 4, sm_activity: 0.3,
     node_selector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
  - {name: notebook, project: nlp, submit: 7m, pods: 1, gpus_per_pod: 2, sm_activity: 0.02,
     node_selector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
  - {name: a100-job, project: nlp, submit: 8m, pods: 1, gpus_per_pod: 2, sm_activity: 0.6,
     node_selector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}}
events:
  - {at: 30m, xid: {node: h100-03, gpu: 3, code: 48}}
  - {at: 35m, xid: {node: h100-03, gpu: 5, code: 79}}
  - {at: 40m, device_plugin: {node: a100-02, healthy: false}}
"""


def truth(world: Any) -> dict[str, int]:
    """The funnel from the simulator's objects: what each GPU is, and how busy its job makes it."""
    sm_of_pod = {}
    for job in world.jobs.values():
        for pod in world.pods_of(job):
            sm_of_pod[f"{pod.namespace}/{pod.name}"] = job.sm_activity
    out = dict.fromkeys(funnel.STAGES, 0)
    for node in world.nodes.values():
        for g in node.gpus:
            out["total"] += 1
            healthy = node.ready and node.device_plugin_healthy and g.present and g.healthy
            if not healthy:
                continue
            out["healthy"] += 1
            if not g.pod:
                continue
            out["allocated"] += 1
            sm = sm_of_pod[g.pod]
            out["active"] += sm > gpu_activity.ACTIVE_SM
            out["well_used"] += sm > gpu_activity.WELL_USED_SM
    return out


def test_the_funnel_equals_the_simulators_state_at_t() -> None:
    world = World.from_scenario(load_scenario(SCENARIO))
    with served(world) as sim:
        cluster = register(sim)
        for minutes in (32, 60):
            t = world.start + timedelta(minutes=minutes)
            sim.advance_to(t)
            sweep_cluster(cluster.name, t)
            sweep_telemetry(cluster.name, t)
            want = truth(world)
            got = fleet.compute(Cursor(at=t, window=timedelta(minutes=30)), cluster)
            assert {s: getattr(got.funnel, s) for s in funnel.STAGES} == want, minutes
    # The story happened: a faulty GPU, a missing one, a node whose device plugin is down, idle and busy GPUs.
    assert want["total"] == 32 and want["healthy"] == 32 - 2 - 4
    assert want["allocated"] > want["active"] > want["well_used"] > 0
    states = [c.state for r in got.rows for c in r.cells]
    assert {"free", "allocated", "idle", "faulty", "missing"} <= set(states)
    assert [c.job for c in got.idle] == ["notebook", "notebook"]
