"""Benchmark ``load_scenario``: the largest bundled scenario and a generated trace-sized file (prints figures).

The trace-sized file has the shape ``simulator.openb.scenario_text`` writes for Alibaba's whole
cluster-trace-gpu-v2023 (1,213 GPU nodes in flow-mapping nodepools, 8,152 flow-mapping jobs with whole and
fractional GPUs, CPU and memory), from a fixed random seed, so it needs no download. CPU time
(``time.process_time``) is the figure to compare on a shared machine; wall time and the load average are
printed beside it.

    .venv/bin/python bench/scenario_load.py
    .venv/bin/python bench/scenario_load.py --jobs 8000 --rounds 9

It times the simulator's scenario loader alone, so it uses it directly: ``load_scenario`` (its public API)
and the trace's file shape (``simulator.openb``); no server, no sweep.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def trace_sized_text(jobs: int, nodes: int = 1213, seed: int = 1) -> str:
    """A scenario in the openb trace's shape with ``jobs`` jobs (names, sizes and times from ``seed``)."""
    from simulator.openb import PRODUCTS, Pod, Shape, scenario_text

    rng = random.Random(seed)
    models = list(PRODUCTS)
    shapes = [(f"n{i}", Shape(models[i % len(models)], 8, 96000, 393216)) for i in range(nodes)]
    pods = []
    for i in range(jobs):
        gpus = rng.choice([0, 1, 1, 2, 8])
        milli = rng.choice([250, 500, 1000]) if gpus == 1 else (1000 if gpus else 0)
        pods.append(
            Pod(
                f"pod-{i:05d}",
                rng.randint(1, 64) * 1000,
                rng.randint(1, 256) * 1024,
                gpus,
                milli,
                i * 3,
                None,
            )
        )
    return scenario_text(shapes, pods)


def measure(path: Path, rounds: int) -> str:
    from simulator import load_scenario

    cpu, wall = [], []
    for _ in range(rounds):
        c0, w0 = time.process_time(), time.perf_counter()
        scenario = load_scenario(path)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return (
        f"{path.name}: {len(scenario.jobs)} jobs, {path.stat().st_size / 1e6:.2f} MB; "
        f"CPU median {statistics.median(cpu) * 1000:.0f} ms (min {min(cpu) * 1000:.0f}); "
        f"wall median {statistics.median(wall) * 1000:.0f} ms; {rounds} rounds"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--jobs", type=int, default=8152, help="jobs of the generated file (default: the trace's)"
    )
    ap.add_argument("--rounds", type=int, default=5, help="loads of each file (default 5)")
    args = ap.parse_args()
    bundled = max((ROOT / "simulator/scenarios").glob("*.yaml"), key=lambda p: p.stat().st_size)
    print(measure(bundled, args.rounds * 6))
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / f"trace-{args.jobs}-jobs.yaml"
        big.write_text(trace_sized_text(args.jobs), encoding="utf-8")
        print(measure(big, args.rounds))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
