"""Scheduler gaps the property test found (hypothesis, 2026-11-29), kept as strict xfails.

The second gap it found is transient and not pinned here: Kueue admits in one pass, so a job judged
before a reclaim later in the same pass frees quota waits one more cycle (one simulated minute).

They pass the day the engine is fixed (and then must lose their xfail). Until then the property test
runs derandomized so CI does not fail by drawing one of them.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml

from collectors.sim import World, load_scenario
from collectors.sim.engine.placement import Placer


def _world(scheduler: str, projects: list[dict], jobs: list[dict]) -> World:
    spec = {
        "format": 1,
        "name": "gap",
        "start": "2026-11-29T00:00:00Z",
        "duration": "30m",
        "seed": 0,
        "cluster": {
            "name": "c",
            "scheduler": scheduler,
            "nodepools": [
                {"name": "a", "nodes": 1, "gpus_per_node": 4, "gpu_product": "NVIDIA-H100-80GB-HBM3"},
                {"name": "b", "nodes": 1, "gpus_per_node": 4, "gpu_product": "NVIDIA-H100-80GB-HBM3"},
            ],
        },
        "projects": projects,
        "jobs": jobs,
        "events": [],
    }
    w = World.from_scenario(load_scenario(yaml.safe_dump(spec, sort_keys=False)))
    w.advance_to(w.start + timedelta(minutes=5))
    return w


@pytest.mark.xfail(
    strict=True,
    reason="KAI over-quota is not work-conserving here: a 1-GPU job of an over-quota "
    "queue with no limit waits although its node has 3 idle GPUs (fair-share cap applied to idle capacity)",
)
def test_kai_places_an_over_quota_job_on_idle_gpus():
    w = _world(
        "kai",
        [
            {"name": "p0", "quota": {"gpu": 1}},
            {"name": "p1", "quota": {"gpu": 0}, "priority": 1},
            {"name": "p2", "quota": {"gpu": 0}},
        ],
        [
            {
                "name": "j0",
                "project": "p0",
                "submit": "0m",
                "pods": 1,
                "gpus_per_pod": 1,
                "node_selector": {"rcaweb.sim/nodepool": "a"},
            },
            {"name": "j1", "project": "p1", "submit": "0m", "pods": 2, "gpus_per_pod": 2},
            {
                "name": "j2",
                "project": "p1",
                "submit": "0m",
                "pods": 1,
                "gpus_per_pod": 1,
                "node_selector": {"rcaweb.sim/nodepool": "a"},
            },
        ],
    )
    assert w.jobs["j2"].state == "Pending"
    assert Placer(w).place(w.jobs["j2"])[0] is None, "j2 fits on an idle GPU but waits"
