"""The placer's indexes pick what a scan of every node picks (simulator/ENGINE.md, "Speed").

The reference below is the scan the indexes replaced: every node passing the filters, the fit of one pod
on it, the lowest (score, node order). Worlds with shared GPUs, counted CPU/memory, selectors and taints are
advanced a few ticks, then many job shapes are placed both ways on the same placer state.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from simulator.engine.fit import fit_pod, take
from simulator.engine.fit import fit_score as _score
from simulator.engine.placement import Placer
from simulator.engine.world import World
from simulator.scenario import load_scenario

SCENARIO = """
format: 1
name: placement-index
start: 2026-11-29T00:00:00Z
duration: 2h
seed: {seed}
cluster:
  name: c
  scheduler: kai
  nodepools:
    - {{name: big, nodes: 5, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3{resources}}}
    - {{name: small, nodes: 6, gpus_per_node: 2, gpu_product: Tesla-T4, labels: {{tier: small}}{sharing}{resources}}}
    - {{name: tainted, nodes: 3, gpus_per_node: 4, gpu_product: NVIDIA-L40S{sharing},
       taints: [{{key: dedicated, value: infer, effect: NoSchedule}}]}}
projects:
  - {{name: p, quota: {{gpu: 64}}}}
jobs:
{jobs}
"""


def _scenario(seed: int, sharing: bool, resources: bool) -> str:
    rng = random.Random(seed)
    jobs = []
    for i in range(40):
        gpus = rng.choice([0, 1, 1, 2, 4, 8] + ([0.25, 0.5, 0.3, 0.75] if sharing else []))
        pods = 1 if isinstance(gpus, float) else rng.choice([1, 1, 2])
        extra = f", cpu_per_pod: {rng.choice([1, 4, 16])}, memory_per_pod: {rng.choice([1, 8, 64])}Gi"
        jobs.append(
            f"  - {{name: j{i:02d}, project: p, submit: {rng.randrange(0, 3600)}s, pods: {pods}, "
            f"gpus_per_pod: {gpus}, runtime: {rng.choice(['10m', '30m', '1h'])}{extra if resources else ''}}}"
        )
    return SCENARIO.format(
        seed=seed,
        sharing=", sharing: true" if sharing else "",
        resources=", cpu: 64, memory: 512Gi" if resources else "",
        jobs="\n".join(jobs),
    )


def scan(placer: Placer, job: Any) -> list[tuple[str, Any]] | None:
    """The reference: the rooms scan, or (without rooms) the free-count scan."""
    filt = placer.filters(job)
    ok = [n for n, r in filt.items() if r is None]
    if placer.counts_resources or job.shared or job.mig_profile:
        rooms = placer.rooms()
        tent: dict[str, Any] = {}
        out = []
        for _ in range(job.pods):
            best = None
            for n in ok:
                room = tent.get(n) or rooms[n]
                alloc, _why = fit_pod(job, placer.world.nodes[n], room)
                if alloc is None:
                    continue
                score = (_score(job, room, alloc), placer.order[n])
                if best is None or score < best[0]:
                    best = (score, n, alloc)
            if best is None:
                return None
            _s, n, alloc = best
            room = tent.get(n)
            if room is None:
                room = tent[n] = rooms[n].copy()
            take(job, placer.world.nodes[n], room, alloc)
            out.append((n, alloc))
        return out
    counts = {n: len(placer.free[n]) for n in ok}
    chosen = []
    for _ in range(job.pods):
        cands = [n for n in ok if counts[n] >= job.gpus_per_pod]
        if not cands:
            return None
        best = min(cands, key=lambda n: (counts[n], placer.order[n]))
        counts[best] -= job.gpus_per_pod
        chosen.append(best)
    taken: dict[str, int] = {}
    out = []
    for n in chosen:
        pool = sorted(placer.free[n])
        at = taken.get(n, 0)
        out.append((n, pool[at : at + job.gpus_per_pod]))
        taken[n] = at + job.gpus_per_pod
    return out


def shapes(world: World, rng: random.Random, sharing: bool) -> list[Any]:
    base = next(iter(world.jobs.values()))
    out = []
    for _ in range(60):
        job = copy.copy(base)
        job.node_selector = rng.choice([{}, {}, {"tier": "small"}])
        job.tolerations = rng.choice(
            [[], [], [{"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}]]
        )
        frac = rng.choice([None, None] + ([0.2, 0.5, 0.45, 0.9] if sharing else []))
        job.gpu_fraction, job.gpu_memory_mib, job.mig_profile = frac, None, None
        job.gpus_per_pod = frac if frac is not None else rng.choice([0, 1, 2, 3, 4, 8])
        job.pods = 1 if frac is not None else rng.choice([1, 2, 3])
        job.cpu_millis = rng.choice([0, 1000, 30000])
        job.memory_bytes = rng.choice([0, 2**30, 200 * 2**30])
        out.append(job)
    return out


@pytest.mark.parametrize(
    "seed,sharing,resources",
    [(1, False, False), (2, False, True), (3, True, True), (4, True, False), (5, True, True)],
)
def test_the_indexes_choose_what_the_scan_chooses(seed: int, sharing: bool, resources: bool) -> None:
    world = World.from_scenario(load_scenario(_scenario(seed, sharing, resources)))
    rng = random.Random(seed)
    compared = placed = 0
    for _tick in range(8):
        world.advance_to(world.now + (world.end - world.start) / 10)
        placer = Placer(world)
        for job in shapes(world, rng, sharing):
            want = scan(placer, job)
            got, _n, _counts = placer.place(job)
            assert got == want, (job.gpus_per_pod, job.pods, job.node_selector, job.tolerations)
            compared += 1
            if got is not None and rng.random() < 0.5:  # move the placer on, as the scheduler does
                placer.commit(got, job)
                placed += 1
    assert compared == 480 and placed > 20
