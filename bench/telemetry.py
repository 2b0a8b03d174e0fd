"""Benchmark one telemetry sweep on the bench/sim.py --pipeline cluster (prints figures; not a test).

Two parts, so the simulator's share and the collector's share show apart:

- ``server``: the simulated Prometheus answering the sweep's seven ``query_range`` calls (one per DCGM
  field, 5-minute points over the last hour) in-process, without HTTP: CPU time and a digest of the answers
  (equal digests before and after a change: the simulator answers the same).
- ``sweep``: ``sweep_telemetry`` over loopback HTTP into the database of DATABASE_URL (default
  postgres://postgres@127.0.0.1:5432/rcaweb_trace; created, migrated and emptied first): a 1-hour backfill,
  then an incremental sweep 10 minutes later; wall and process CPU (the simulator's thread included) and a
  digest of the stored points. The simulation driver (``harness``) serves the cluster, moves its clock and
  runs the inventory sweep the points attach to.

``server`` and ``instant`` measure the simulator alone: its Prometheus source and request handler
(``simulator.prometheus``) over a world moved by the engine (``simulator``'s public ``World``), in this
process, without a server.

    .venv/bin/python bench/telemetry.py [--nodes 200] [--hours 2] [--variant classic|current|scraped]
    .venv/bin/python bench/telemetry.py --part server --profile     # cProfile of the simulator's side
    .venv/bin/python bench/telemetry.py --part instant [--sweeps 20]  # the inventory sweep's instant queries
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _served(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The --pipeline cluster's world ``--hours`` in, its simulated Prometheus source (as SimServer builds it)
    and a stand-in for the request handler that the handler's methods run on, without HTTP."""
    from simulator import World, load_scenario
    from simulator.prometheus import DcgmSource

    world = World.from_scenario(load_scenario(_scenario(args)))
    world.advance_to(world.start + timedelta(hours=args.hours))
    source = DcgmSource(world, args.variant, retention_s=world.telemetry.retention_s)
    sim = SimpleNamespace(source=source, world=world, lock=threading.RLock())
    return world, source, SimpleNamespace(sim=sim, _now=lambda: world.now.timestamp())


def server_part(args: argparse.Namespace) -> None:
    from collectors.sources import promql
    from simulator.prometheus import PrometheusHandler

    world, source, handler = _served(args)
    at = world.now
    end = at.timestamp() // promql.TELEMETRY_STEP_S * promql.TELEMETRY_STEP_S
    start = end - 3600 + promql.TELEMETRY_STEP_S
    profile = cProfile.Profile()
    digest = hashlib.sha256()
    wall, cpu = time.perf_counter(), time.process_time()
    for metric in promql.TELEMETRY_METRICS:
        one = {"query": promql.telemetry(metric), "start": str(start), "end": str(end), "step": "300"}
        source.begin()
        if args.profile:
            profile.enable()
        data = PrometheusHandler._query_range(handler, one)  # type: ignore[arg-type]
        if args.profile:
            profile.disable()
        source.end()
        digest.update(json.dumps(data, sort_keys=True).encode())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"server: {len(promql.TELEMETRY_METRICS)} query_range over {len(source.gpus())} GPU series, "
        f"wall {wall:.1f} s, CPU {cpu:.1f} s, answers {digest.hexdigest()[:16]}, load {_load()}"
    )
    if args.profile:
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def instant_part(args: argparse.Namespace) -> None:
    """The inventory sweep's instant queries (GPU list, Xid, ECC) at ``--sweeps`` moments 3 minutes apart, as
    the pipeline's sweeps ask them: the simulator's CPU per sweep and a digest of the answers."""
    from collectors.sources import promql
    from simulator.prometheus import PrometheusHandler

    world, source, handler = _served(args)
    at = world.now
    queries = [promql.GPU_INVENTORY, *promql.GPU_STATE_QUERIES.values()]
    digest = hashlib.sha256()
    cpu = 0.0
    for i in range(args.sweeps):
        world.advance_to(at + timedelta(minutes=3 * i))
        started = time.process_time()
        for query in queries:
            source.begin()
            data = PrometheusHandler._query(handler, {"query": query})  # type: ignore[arg-type]
            source.end()
            digest.update(json.dumps(data, sort_keys=True).encode())
        cpu += time.process_time() - started
    print(
        f"instant: {len(queries)} queries × {args.sweeps} sweeps over {len(source.gpus())} GPUs, "
        f"CPU {cpu / args.sweeps * 1000:.0f} ms per sweep, answers {digest.hexdigest()[:16]}, load {_load()}"
    )


def sweep_part(args: argparse.Namespace) -> None:
    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcaweb_trace")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
    os.environ.setdefault("RCAWEB_SECRET_KEY", "bench-only-secret")
    from stages import ensure_database

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    from collectors.models import TelemetrySample
    from collectors.sweep import sweep_telemetry
    from harness.driver import Harness
    from simulator import World, load_scenario

    call_command("migrate", verbosity=0, interactive=False)
    call_command("flush", verbosity=0, interactive=False)
    world = World.from_scenario(load_scenario(_scenario(args)))
    with Harness(world) as harness:
        harness.register()
        at = world.start + timedelta(hours=args.hours)
        harness.advance_to(at)
        harness.sweep()  # the GPUs the points attach to
        for label, t in (("backfill (1 h)", at), ("incremental (10 min)", at + timedelta(minutes=10))):
            harness.advance_to(t)
            wall, cpu = time.perf_counter(), time.process_time()
            summary = sweep_telemetry(world.cluster_name, t)  # the sweep measured, as the product calls it
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(
                f"sweep {label}: wall {wall:.1f} s, process CPU {cpu:.1f} s, {summary.samples_written} points, "
                f"{len(summary.errors)} errors, load {_load()}"
            )
    digest = hashlib.sha256()
    rows = TelemetrySample.objects.order_by("gpu__name", "metric", "time").values_list(
        "gpu__name", "metric", "time", "value"
    )
    for row in rows.iterator(chunk_size=20000):
        digest.update(repr(row).encode())
    print(f"stored {TelemetrySample.objects.count()} points, digest {digest.hexdigest()[:16]}")


def _scenario(args: argparse.Namespace) -> str:
    """bench/sim.py's --pipeline cluster (8 h at least: its faults are dated up to 7 h), in ``--variant``."""
    from sim import pipeline_scenario

    text = pipeline_scenario(args.nodes, max(8, args.hours + 1), 2000)
    return text.replace("  scheduler: kai\n", f"  scheduler: kai\n  dcgm_labels: {args.variant}\n", 1)


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200, help="8 GPUs each (default 200: 1,600 GPUs)")
    ap.add_argument("--hours", type=int, default=2, help="simulated time before the sweep")
    ap.add_argument("--variant", default="classic", choices=("classic", "current", "scraped"))
    ap.add_argument("--part", default="both", choices=("both", "server", "instant", "sweep"))
    ap.add_argument("--sweeps", type=int, default=20, help="instant part: how many sweeps")
    ap.add_argument("--profile", action="store_true", help="server part: print the cProfile table")
    args = ap.parse_args()
    if args.part in ("both", "server"):
        server_part(args)
    if args.part == "instant":
        instant_part(args)
    if args.part in ("both", "sweep"):
        sweep_part(args)


if __name__ == "__main__":
    main()
