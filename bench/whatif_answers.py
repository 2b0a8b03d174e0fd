"""Time per answer of a waiting job's "what would start it" and "when" (issue 44 items 2 and 4) at 1,213 nodes.

Not a test: prints figures. Records once, into the database of DATABASE_URL (cluster ``bench-whatif``), a busy
KAI fleet: ``--nodes`` nodes of 8 GPUs in two pools (2 % cordoned, 1 % NotReady, 1 % with a device plugin down),
every other node full with one running job (1 × 8, started over the last 6 hours; a tenth with a runtime
limit), 40
projects and queues (quota 200, limit 320), ``--waiting`` waiting jobs of mixed shapes (1 × 8,
2 × 8, 1 × 4, 1 × 16 and a pool selector), and ``--finished`` finished jobs over the last day (the ETA's basis).
Then, for ``--samples`` waiting jobs spread over the order, times what the why-pending panel computes: its
input (``load_job_input``) and the ETA's basis (``eta_input.load_basis``), the pass at t, the smallest edits
(``edits.smallest_edits``, at most ``edits.MAX_PASSES`` passes) and the ETA (``eta.eta``, at most 2 ×
``eta.MAX_STEPS`` passes). Prints p50/p95/max per stage, wall clock and CPU, passes per answer, the cycle
collector's pauses (rcaweb's processes run it rarely, ``rcaweb.gc_policy``: an answer that left its state in
cycles paid for it in a later answer, half a second at a time), and the load average (the machine may be shared); one answer first, not counted (a process's first answer also pays its
imports); ``--profile N``: the N costliest functions over the timed answers. Target (issue 44): every answer
<= 1 s at 1,213 nodes.

    createdb -h 127.0.0.1 -U postgres rcaweb_bench_whatif
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_bench_whatif RCAWEB_DEBUG=true \\
        .venv/bin/python bench/whatif_answers.py [--nodes 1213] [--waiting 400] [--samples 20] [--rebuild] [--profile 30 [--sort cumulative]]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLUSTER = "bench-whatif"
PROJECTS = 40
SHAPES = [(1, 8, {}), (2, 8, {}), (1, 4, {}), (1, 8, {}), (1, 16, {}), (1, 8, {"run.ai/node-pool": "a100"})]


def _record(cluster: object, nodes: int, waiting: int, finished: int) -> None:
    from collectors.inventory import record_states
    from tests.collectors.factories import (
        T0,
        gpu_obs,
        iso,
        job_obs,
        node_obs,
        pod_obs,
        project_obs,
        queue_obs,
    )

    t = T0 + timedelta(hours=24)
    obs = []
    for p in range(PROJECTS):
        obs += [
            project_obs(f"p{p:02d}", quota=200, limit=320),
            queue_obs(f"p{p:02d}", project=f"p{p:02d}", quota=200, limit=320),
        ]
    for n in range(nodes):
        name = f"n{n:04d}"
        pool = "a100" if n % 5 == 0 else "h100"
        cordoned, sick, plugin = n % 50 == 7, n % 100 == 13, n % 100 == 29
        obs.append(
            node_obs(
                name, unschedulable=cordoned, ready=not sick, allocatable=4 if plugin else None, nodepool=pool
            )
        )
        obs += [gpu_obs(name, i) for i in range(8)] if cordoned or sick or plugin else []
        if cordoned or sick or plugin:
            continue  # drained: room an uncordon or a repair would give back
        ns, job = f"p{n % PROJECTS:02d}", f"run-{n}"
        started = t - timedelta(minutes=20 + (n * 37) % 360)
        running = job_obs(
            ns, job, queue=ns, phase="Running", pods=1, gpus_per_pod=8, submitted=started, active=1
        )
        running.state["started"] = iso(started)
        if n % 10 == 0:
            running.state["active_deadline_seconds"] = 8 * 3600
        obs += [running, pod_obs(ns, f"{job}-0", job=job, queue=ns, gpus=8, phase="Running", node=name)]
        obs += [gpu_obs(name, i, pod=f"{ns}/{job}-0") for i in range(8)]
    for w in range(waiting):
        ns, job = f"p{(w * 7) % PROJECTS:02d}", f"wait-{w}"
        pods, per, selector = SHAPES[w % len(SHAPES)]
        j = job_obs(ns, job, queue=ns, phase="Pending", pods=pods, gpus_per_pod=per,
                    submitted=t - timedelta(minutes=waiting - w))  # fmt: skip
        j.state["node_selector"] = dict(selector)
        obs.append(j)
        obs += [pod_obs(ns, f"{job}-{k}", job=job, queue=ns, gpus=per, phase="Pending") for k in range(pods)]
    record_states(cluster, obs, t - timedelta(minutes=1))
    for f in range(finished):
        ns = f"p{f % PROJECTS:02d}"
        start = t - timedelta(hours=23) + timedelta(minutes=f % 600)
        j = job_obs(ns, f"done-{f}", queue=ns, phase="Succeeded", pods=1, gpus_per_pod=8, submitted=start)
        j.state.update(started=iso(start), completed=iso(start + timedelta(minutes=90 + (f * 13) % 240)))
        record_states(cluster, [j], start + timedelta(minutes=90 + (f * 13) % 240))


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1213)
    ap.add_argument("--waiting", type=int, default=400)
    ap.add_argument("--finished", type=int, default=600)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print the N costliest functions")
    ap.add_argument(
        "--sort", default="tottime", choices=("tottime", "cumulative", "ncalls"), help="the profile's order"
    )
    args = ap.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
    import django

    django.setup()
    from collectors.models import Cluster, Entity, EntityVersion
    from tests.collectors.factories import T0

    if args.rebuild:
        Cluster.objects.filter(name=CLUSTER).delete()
    cluster, created = Cluster.objects.get_or_create(name=CLUSTER, defaults={"scheduler": "kai"})
    if created or not EntityVersion.objects.filter(cluster=cluster, kind="node").exists():
        t0 = time.monotonic()
        _record(cluster, args.nodes, args.waiting, args.finished)
        print(f"recorded {args.nodes} nodes, {args.waiting} waiting jobs in {time.monotonic() - t0:.1f} s")
    t = T0 + timedelta(hours=24)
    waiting = list(
        Entity.objects.filter(cluster=cluster, kind="job", name__startswith="wait-").order_by("name")
    )
    step = max(len(waiting) // args.samples, 1)
    sample = waiting[::step][: args.samples]
    stages: dict[str, list[float]] = {k: [] for k in STAGES}
    cpu: dict[str, list[float]] = {k: [] for k in STAGES}
    passes: list[int] = []
    kinds: dict[str, int] = {}
    # One answer first, not counted: a process's first answer also pays its imports (the kubernetes package's
    # quantity parser, 1-2 s), which a console process pays once, not per answer.
    answer(cluster, sample[0], t)
    pauses = collector_pauses()
    profiler = cProfile.Profile() if args.profile else None
    for entity in sample:
        if profiler is not None:
            profiler.enable()
        wall, used, u, e = answer(cluster, entity, t)
        if profiler is not None:
            profiler.disable()
        for name in STAGES:
            stages[name].append(wall[name])
            cpu[name].append(used[name])
        passes.append(1 + u.passes + e.passes)
        for a in u.answers:
            kinds[a.kind] = kinds.get(a.kind, 0) + 1
        kinds["refusal"] = kinds.get("refusal", 0) + len(u.refusals)
        kinds["eta known"] = kinds.get("eta known", 0) + (0 if e.unknown else 1)
        print(f"  {entity.namespace}/{entity.name}: {wall['answer']:5.2f} s ({used['answer']:4.2f} s CPU; pass "
              f"{wall['pass']:.2f}, eta {wall['eta']:.2f}), {1 + u.passes + e.passes} passes; "
              f"{len(u.answers)} edit(s); {e.words[:72]}")  # fmt: skip
    print(f"\n{len(sample)} waiting jobs at {args.nodes} nodes ({args.waiting} waiting); seconds:")
    for name, vals in stages.items():
        c = cpu[name]
        print(
            f"  {name:7s} p50 {statistics.median(vals):6.3f}  p95 {pct(vals, 0.95):6.3f}  max {max(vals):6.3f}"
            f"   CPU p50 {statistics.median(c):6.3f}  p95 {pct(c, 0.95):6.3f}  max {max(c):6.3f}"
        )
    print("  (CPU: this process's time, less sensitive to a shared machine's load than the wall clock)")
    print(f"  passes per answer: p50 {statistics.median(passes):g}, max {max(passes)}")
    print(f"  answers by kind: {dict(sorted(kinds.items()))}")
    long = [p for p in pauses if p > 0.01]
    gc.callbacks.clear()
    print(
        f"  cycle collector: {len(pauses)} collections over the timed answers, {len(long)} over 10 ms"
        + (f" (longest {max(long):.3f} s)" if long else "")
        + " (an answer's state freed by reference counting leaves it nothing to walk)"
    )
    print(f"  load average: {os.getloadavg()}")
    print("  target: every answer (pass + edits + eta, the input loaded) <= 1 s at 1,213 nodes")
    if profiler is not None:
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.profile)
    return 0


def collector_pauses() -> list[float]:
    """The cycle collector's pauses from now on, in seconds (filled as it runs)."""
    pauses: list[float] = []
    began: list[float] = []

    def note(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            began[:] = [time.perf_counter()]
        elif began:
            pauses.append(time.perf_counter() - began[0])

    gc.callbacks.append(note)
    return pauses


STAGES = ("input", "basis", "pass", "edits", "eta", "answer")


def answer(cluster: Any, entity: Any, t: datetime) -> tuple[dict[str, float], dict[str, float], Any, Any]:
    """What the why-pending panel computes for one waiting job, timed per stage: wall clock and CPU seconds."""
    from incidents.diagnosis.edits import smallest_edits
    from incidents.diagnosis.eta import eta
    from incidents.diagnosis.scheduling_pass import cluster_pass
    from incidents.diagnosis_input import load_job_input
    from incidents.eta_input import load_basis

    marks = [(time.perf_counter(), time.process_time())]
    di, job = load_job_input(entity, t)
    marks.append((time.perf_counter(), time.process_time()))
    basis = load_basis(cluster, t)
    marks.append((time.perf_counter(), time.process_time()))
    assert job is not None
    with di.indexed():
        base = cluster_pass(di)
        marks.append((time.perf_counter(), time.process_time()))
        u = smallest_edits(di, job, base)
        marks.append((time.perf_counter(), time.process_time()))
        e = eta(di, job, base, basis)  # as ``explain.explain_job`` answers: in the pass's index
    marks.append((time.perf_counter(), time.process_time()))
    wall = {name: marks[i + 1][0] - marks[i][0] for i, name in enumerate(STAGES[:-1])}
    used = {name: marks[i + 1][1] - marks[i][1] for i, name in enumerate(STAGES[:-1])}
    wall["answer"], used["answer"] = marks[-1][0] - marks[2][0], marks[-1][1] - marks[2][1]
    return wall, used, u, e


if __name__ == "__main__":
    raise SystemExit(main())
