"""Kueue admission keeps Kueue's quota invariants on random clusters of written-out ClusterQueues.

After every tick, for every ClusterQueue and flavor: what it holds stays within what Kueue would ever let it
hold (nominal + borrowing limit, and the cohort's lendable pool); what a cohort's members hold beyond what they
keep fits in what they lend; every admitted workload holds quota in a flavor of its own ClusterQueue that its
node selector allows.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
import yaml

from simulator import World, load_scenario
from simulator.engine.kueue import assigned_flavor, ledger_of

FLAVORS = ("on-demand", "spot")


def _scenario(seed: int) -> dict[str, Any]:
    rnd = random.Random(seed)
    queues, projects, jobs, prios = [], [], [], {}
    for i in range(rnd.randint(2, 5)):
        name = f"q{i}"
        flavors = []
        for f in FLAVORS[: rnd.randint(1, 2)]:
            nominal = rnd.randint(0, 8)
            fq: dict[str, Any] = {"flavor": f, "nominal": nominal}
            if rnd.random() < 0.5:
                fq["borrowing_limit"] = rnd.randint(0, 8)
            if rnd.random() < 0.4:
                fq["lending_limit"] = rnd.randint(0, nominal)
            flavors.append(fq)
        queue: dict[str, Any] = {"project": name, "flavors": flavors}
        if rnd.random() < 0.8:
            queue["cohort"] = f"c{rnd.randint(0, 1)}"
        queue["preemption"] = {
            "within_cluster_queue": rnd.choice(("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
            "reclaim_within_cohort": rnd.choice(("Never", "LowerPriority", "Any")),
            "borrow_within_cohort": rnd.choice(("Never", "LowerPriority")),
        }
        queue["flavor_fungibility"] = {
            "when_can_borrow": rnd.choice(("MayStopSearch", "TryNextFlavor")),
            "when_can_preempt": rnd.choice(("MayStopSearch", "TryNextFlavor")),
        }
        queue["queueing_strategy"] = rnd.choice(("BestEffortFIFO", "StrictFIFO"))
        queues.append(queue)
        projects.append({"name": name, "quota": {"gpu": sum(f["nominal"] for f in flavors)}})
    for n in range(rnd.randint(5, 30)):
        job: dict[str, Any] = {
            "name": f"w{n}",
            "project": rnd.choice(projects)["name"],
            "submit": f"{rnd.randint(0, 20)}m",
            "pods": 1,
            "gpus_per_pod": rnd.choice((1, 2, 3, 4, 8)),
            "runtime": f"{rnd.randint(3, 25)}m",
        }
        if rnd.random() < 0.2:
            job["node_selector"] = {"instance-type": rnd.choice(FLAVORS)}
        if rnd.random() < 0.5:
            prios[job["name"]] = rnd.randint(-2, 2)
        jobs.append(job)
    pools = [
        {
            "name": f,
            "nodes": 6,
            "gpus_per_node": 8,
            "gpu_product": "NVIDIA-A100-SXM4-80GB",
            "labels": {"instance-type": f},
        }
        for f in FLAVORS
    ]
    return {
        "format": 1,
        "name": f"kueue-random-{seed}",
        "start": "2026-12-01T00:00:00Z",
        "duration": "30m",
        "seed": seed,
        "cluster": {"name": "k", "scheduler": "kueue", "nodepools": pools},
        "projects": projects,
        "jobs": jobs,
        "kueue": {
            "flavors": [{"name": f, "node_labels": {"instance-type": f}} for f in FLAVORS],
            "cluster_queues": queues,
            "priorities": prios,
        },
    }


def _check(world: World) -> None:
    spec = world.scenario.kueue
    assert spec is not None
    ledger = ledger_of(world, spec)
    for q in spec.cluster_queues:
        for fq in q.flavors:
            used = ledger.used(q.project, fq.flavor)
            assert used <= ledger.potential(q.project, fq.flavor), (q.project, fq.flavor, used)
            if fq.borrowing_limit is not None and q.cohort is not None:
                assert used <= fq.nominal + fq.borrowing_limit, (q.project, fq.flavor, used)
            if q.cohort is None:
                assert used <= fq.nominal
    for cohort in {q.cohort for q in spec.cluster_queues if q.cohort}:
        for f in FLAVORS:
            lent = held = 0
            for q in (q for q in spec.cluster_queues if q.cohort == cohort):
                fq = ledger.quota(q.project, f)
                if fq is not None:
                    kept = fq.nominal - fq.lending_limit if fq.lending_limit is not None else 0
                    lent += fq.nominal - kept
                    held += max(0, ledger.used(q.project, f) - kept)
            assert held <= lent, (cohort, f, held, lent)
    for job in world.jobs.values():
        flavor = assigned_flavor(world, job)
        if job.admitted and job.state in ("Pending", "Running"):
            assert flavor in {fq.flavor for fq in spec.queue(job.project).flavors}, job.name
            own = next(j for j in world.scenario.jobs if j.name == job.name).node_selector
            assert own.get("instance-type", flavor) == flavor, job.name


@pytest.mark.parametrize("seed", range(40))
def test_it_keeps_kueues_quota_invariants(seed: int) -> None:
    world = World.from_scenario(load_scenario(yaml.safe_dump(_scenario(seed), sort_keys=False)))
    t = world.start
    while t < world.end:
        t += timedelta(minutes=1)
        world.advance_to(t)
        _check(world)
