"""What the simulated API server's per-tick sync (``Store.sync``) costs, and a digest of what it serves.

Not a test: prints figures. Builds the world of ``bench/sim.py --pipeline`` (``pipeline_scenario``: 200 nodes,
~2,000 jobs over 12 h; or a bundled scenario of simulator/scenarios/ with ``--scenario``), syncs a
``Store`` as the simulator's server does, then advances the world tick by tick (``--tick`` s, ``--hours``
simulated hours, or the scenario's end) and syncs after each tick. Prints the CPU time spent in the syncs
(``time.process_time``, the world's own ticks excluded), per tick, the changes written, and a sha256 digest
of everything the store serves: every tick's new history entries (resourceVersion, resource, type, bytes),
every tick's listing (keys in order and their resourceVersions) and at the end every entry in full (bytes,
labels, fields). Two versions of the store serve the same thing exactly when their digests are equal.

    .venv/bin/python bench/store_sync.py [--nodes 200] [--jobs 2000] [--hours 12] [--tick 60]
    .venv/bin/python bench/store_sync.py --kueue                          # the same cluster under Kueue
    .venv/bin/python bench/store_sync.py --scenario node-not-ready        # a bundled scenario, to its end
    BENCH_PROFILE=tottime .venv/bin/python bench/store_sync.py            # then the syncs' profile

It measures the simulator alone, so it uses it directly: ``World`` and ``load_scenario`` (its public API) and
the API server's ``Store`` (``simulator.apiserver.store``), in this process, with no server.
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from simulator import World, load_scenario  # noqa: E402
from simulator.apiserver.store import Store  # noqa: E402

SCENARIOS = ROOT / "simulator" / "scenarios"


def _digest_tick(h: hashlib._Hash, store: Store, since: int) -> None:
    """This tick's history entries and listing, into ``h``."""
    start = bisect.bisect_right(store.history_rvs, since)
    for rv, resource, kind, data, _ in store.history[start:]:
        h.update(f"{rv} {resource} {kind} ".encode())
        h.update(data)
    snap = store.snapshot()
    h.update(f"rv {snap.rv}".encode())
    for resource in sorted(snap.order):
        entries = snap.entries[resource]
        h.update(resource.encode())
        h.update(repr([(key, entries[key].rv) for key in snap.order[resource]]).encode())
        if sorted(entries) != snap.order[resource]:
            h.update(b"order out of step with entries")


def _digest_final(h: hashlib._Hash, store: Store) -> None:
    snap = store.snapshot()
    for resource in sorted(snap.entries):
        for key in snap.order[resource]:
            e = snap.entries[resource][key]
            h.update(repr((resource, key, e.rv, sorted(e.labels.items()), sorted(e.fields.items()))).encode())
            h.update(e.data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", help="a bundled scenario's name (or a file); default: the pipeline cluster")
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument(
        "--hours", type=float, default=12, help="simulated hours (a bundled scenario: to its end)"
    )
    ap.add_argument("--tick", type=int, default=60, help="seconds per tick")
    ap.add_argument("--kueue", action="store_true", help="the pipeline cluster scheduled by Kueue, not KAI")
    args = ap.parse_args()
    if "PYTHONHASHSEED" not in os.environ:
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})

    if args.scenario:
        path = Path(args.scenario)
        if not path.exists():
            path = SCENARIOS / f"{args.scenario.removesuffix('.yaml')}.yaml"
        scenario = load_scenario(str(path), now=datetime(2026, 11, 29, tzinfo=UTC))  # for those without start
        label = path.stem
    else:
        from sim import pipeline_scenario

        text = pipeline_scenario(args.nodes, 12, args.jobs)
        if args.kueue:
            text = text.replace("scheduler: kai", "scheduler: kueue")
        scenario = load_scenario(text)
        label = f"pipeline {args.nodes} nodes, {args.jobs} jobs, {'Kueue' if args.kueue else 'KAI'}"
    world = World.from_scenario(scenario)
    end = world.end if args.scenario else min(world.end, world.now + timedelta(hours=args.hours))

    profiler = None
    if os.environ.get("BENCH_PROFILE"):
        import cProfile

        profiler = cProfile.Profile()
    store = Store()
    h = hashlib.sha256()
    cpu = 0.0
    ticks = changes = 0
    while True:
        since = store.rv
        if profiler is not None:
            profiler.enable()
        t = time.process_time()
        changes += store.sync(world)
        cpu += time.process_time() - t
        if profiler is not None:
            profiler.disable()
        _digest_tick(h, store, since)
        if world.now >= end:
            break
        world.advance_to(world.now + timedelta(seconds=args.tick))
        ticks += 1
    _digest_final(h, store)
    items = sum(len(v) for v in store.entries.values())
    print(f"{label}: {ticks} ticks of {args.tick} s, {items} objects at the end, resourceVersion {store.rv}")
    print(
        f"sync CPU {cpu:.2f} s over {ticks + 1} syncs: {cpu / (ticks + 1) * 1000:.1f} ms per sync; "
        f"{changes} changes"
    )
    print(f"digest {h.hexdigest()}")
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats(os.environ["BENCH_PROFILE"]).print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
