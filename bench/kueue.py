"""Benchmark Kueue admission with written-out ClusterQueues (not a test; prints figures).

A cluster of ``--queues`` ClusterQueues in ``--cohorts`` cohorts, each with two flavors (on-demand with a
borrowing limit, spot with a lending limit) and preemption within the queue and in the cohort, gets
``--jobs`` workloads of mixed sizes and priorities, a third of them pinned to a flavor, arriving over the first
half hour; the run simulates ``--minutes`` of ticks. Prints the engine time per tick (mean and worst), how
many workloads were admitted and evicted, and a digest of the end state (same arguments, same digest).

    .venv/bin/python bench/kueue.py [--queues 40] [--cohorts 4] [--jobs 4000] [--minutes 60]

It times the simulator's engine alone, so it uses it directly: ``World`` and ``load_scenario`` (its public
API) and the flavor a workload was admitted to (``simulator.engine.kueue``); no server, no sweep.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator import World, load_scenario  # noqa: E402
from simulator.engine.kueue import assigned_flavor  # noqa: E402


def scenario(queues: int, cohorts: int, jobs: int, minutes: int, seed: int) -> str:
    rnd = random.Random(seed)
    cqs, projects, out, prios = [], [], [], {}
    for i in range(queues):
        name = f"q{i:03d}"
        projects.append({"name": name, "quota": {"gpu": 24}})
        cqs.append(
            {
                "project": name,
                "cohort": f"c{i % cohorts}",
                "flavors": [
                    {"flavor": "on-demand", "nominal": 16, "borrowing_limit": 16},
                    {"flavor": "spot", "nominal": 8, "lending_limit": 4},
                ],
                "preemption": {"within_cluster_queue": "LowerPriority", "reclaim_within_cohort": "Any"},
            }
        )
    for n in range(jobs):
        job = {
            "name": f"w{n:05d}",
            "project": f"q{rnd.randrange(queues):03d}",
            "submit": f"{rnd.randrange(minutes * 30)}s",
            "pods": 1,
            "gpus_per_pod": rnd.choice((1, 1, 2, 4, 8)),
            "runtime": f"{rnd.randrange(5, 40)}m",
        }
        if n % 3 == 0:
            job["node_selector"] = {"instance-type": rnd.choice(("on-demand", "spot"))}
        if n % 4 == 0:
            prios[job["name"]] = rnd.choice((-1, 1, 10))
        out.append(job)
    pools = [
        {
            "name": f,
            "nodes": queues * 2,
            "gpus_per_node": 8,
            "gpu_product": "NVIDIA-A100-SXM4-80GB",
            "labels": {"instance-type": f},
        }
        for f in ("on-demand", "spot")
    ]
    doc = {
        "format": 1,
        "name": "bench-kueue",
        "start": "2026-12-01T00:00:00Z",
        "duration": f"{minutes}m",
        "seed": seed,
        "cluster": {"name": "bench", "scheduler": "kueue", "nodepools": pools},
        "projects": projects,
        "jobs": out,
        "kueue": {
            "flavors": [{"name": f, "node_labels": {"instance-type": f}} for f in ("on-demand", "spot")],
            "cluster_queues": cqs,
            "priorities": prios,
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queues", type=int, default=40)
    ap.add_argument("--cohorts", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    world = World.from_scenario(load_scenario(scenario(a.queues, a.cohorts, a.jobs, a.minutes, a.seed)))
    ticks: list[float] = []
    t = world.start
    while t < world.end:
        t += timedelta(seconds=world.tick_seconds)
        began = time.perf_counter()
        world.advance_to(t)
        ticks.append(time.perf_counter() - began)
    state = sorted((n, j.state, assigned_flavor(world, j) or "") for n, j in world.jobs.items())
    digest = hashlib.sha256(repr(state).encode()).hexdigest()[:16]
    print(f"{a.queues} ClusterQueues, {a.cohorts} cohorts, {a.jobs} workloads, {len(ticks)} ticks")
    print(f"engine per tick: mean {sum(ticks) / len(ticks) * 1000:.0f} ms, worst {max(ticks) * 1000:.0f} ms")
    admitted = sum(1 for j in world.jobs.values() if j.admitted_at is not None)
    print(f"ever admitted: {admitted}, evictions: {len(world.preemptions)}, end-state digest {digest}")


if __name__ == "__main__":
    main()
