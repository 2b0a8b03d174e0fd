"""Benchmark: a full inventory sweep of the 1,000-node / 8,000-GPU / 20,000-pod simulated cluster.

The simulation driver (``harness``) runs the simulator in a process of its own (so the figures are the
collector's own: wall time, peak RSS of this process, rows written), the sweep writes into the configured
database, then an unchanged re-sweep runs.

    .venv/bin/python bench/collect.py                                   # SQLite (var/bench/collect.sqlite3)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_bench .venv/bin/python bench/collect.py
    .venv/bin/python bench/collect.py --nodes 200 --pods 4000           # smaller

Targets: first sweep <= 30 s and <= 600 MB peak RSS; re-sweep <= 10 s writing 0 versions.
A PostgreSQL database named in DATABASE_URL is created if missing.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CLUSTER = "gpu-bench-collect"


def big_cluster(nodes: int, pods: int, name: str) -> tuple[Any, int]:
    """The simulation driver (``harness``) serving the big world (``simulator.engine.big``) from a process of
    its own, two ticks in (its placed pods Running), registered as the Cluster ``name`` with no data yet; and
    how many pods it holds. Close it (``Harness.close``) when done."""
    import dataclasses

    from harness.driver import Harness, simulator_process
    from simulator.engine.big import big_scenario

    scenario = big_scenario(nodes=nodes, pods=pods)
    scenario = dataclasses.replace(scenario, cluster=dataclasses.replace(scenario.cluster, name=name))
    harness = Harness(None, process=simulator_process(scenario)).start()
    try:
        harness.advance_to(harness.world.now + 2 * harness.tick)
        harness.register(replace=True)
    except BaseException:
        harness.close()
        raise
    return harness, sum(job.pods for job in scenario.jobs)  # every job is submitted at the start


def ensure_database() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url:
        path = ROOT / "var" / "bench" / "collect.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        os.environ["RCAWEB_SQLITE_PATH"] = str(path)
        return f"sqlite {path}"
    if url.startswith(("postgres://", "postgresql://")):
        from urllib.parse import urlparse

        import psycopg

        parsed = urlparse(url)
        name = parsed.path.lstrip("/")
        admin = url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
    return url.split("@")[-1]


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of another process (the simulator), from /proc; NaN when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def now_rss_mb() -> float:
    """This process' resident memory now (Linux: /proc/self/statm), against ``rss_mb``'s peak."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="print when each phase of each sweep ended, and the memory then",
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
    os.environ.setdefault("RCAWEB_DEBUG", "true")
    # The simulated Prometheus evaluates 8,000 series in Python: give it time (a real one answers in ms).
    os.environ.setdefault("RCAWEB_SOURCE_TIMEOUT_S", "120")
    where = ensure_database()
    import django

    django.setup()
    import logging

    from django.core.management import call_command

    logging.getLogger("collectors").setLevel(logging.WARNING)
    call_command("migrate", verbosity=0)
    from collectors.models import Change, Entity, EntityVersion, SourceRun
    from collectors.sweep import sweep_cluster

    progress = None
    mark = [time.monotonic()]
    if args.timeline:

        def progress(what: str, n: int) -> None:
            now = time.monotonic()
            print(
                f"    {now - mark[0]:5.2f} s  RSS {now_rss_mb():5.0f} MB (peak {rss_mb():5.0f})  {what} ({n:,})"
            )
            mark[0] = now

    started = time.monotonic()
    harness, pods = big_cluster(args.nodes, args.pods, CLUSTER)
    try:
        print(
            f"simulator: {args.nodes} nodes, {pods} pods, built and served in {time.monotonic() - started:.1f} s "
            f"(child process); database: {where}"
        )
        cluster = harness.cluster
        sim_pid = harness.simulator_pid
        at = harness.world.now

        def rows() -> int:
            return sum(
                m.objects.filter(cluster=cluster).count() for m in (Entity, EntityVersion, Change, SourceRun)
            )

        # One-time cost of a fresh process (a Celery worker pays it once): importing the kubernetes client's
        # generated API modules. Measured and printed, then excluded from the sweep figures.
        t0 = time.monotonic()
        from collectors.sources.kubernetes import KubeSource

        KubeSource(cluster).close()
        print(f"warm-up:      {time.monotonic() - t0:6.1f} s   (kubernetes client import, once per process)")
        rss_before = rss_mb()
        # The sweeps measured are the product's own calls (the driver only serves the cluster here).
        c0, s0 = time.process_time(), cpu_s(sim_pid)
        t0 = mark[0] = time.monotonic()
        if os.environ.get("BENCH_PROFILE"):
            import cProfile
            import pstats

            prof = cProfile.Profile()
            first = prof.runcall(sweep_cluster, CLUSTER, at)
            pstats.Stats(prof).sort_stats(os.environ["BENCH_PROFILE"]).print_stats(25)
        else:
            first = sweep_cluster(CLUSTER, at, progress=progress)
        first_s = time.monotonic() - t0
        first_cpu, first_sim = time.process_time() - c0, cpu_s(sim_pid) - s0
        rss_first = rss_mb()
        written = rows()
        print(
            f"first sweep:  {first_s:6.1f} s ({first_cpu:.1f} s CPU here, {first_sim:.1f} s in the simulator)   peak RSS {rss_first:6.0f} MB (before: {rss_before:.0f} MB)   "
            f"rows written {written:,} ({first.created:,} entities, {first.opened:,} versions, {first.changes:,} changes)"
            f"   errors {len(first.errors)}"
        )
        c0, s0 = time.process_time(), cpu_s(sim_pid)
        t0 = mark[0] = time.monotonic()
        if os.environ.get("BENCH_PROFILE2"):
            import cProfile
            import pstats

            prof = cProfile.Profile()
            second = prof.runcall(sweep_cluster, CLUSTER, at + timedelta(seconds=30))
            pstats.Stats(prof).sort_stats(os.environ["BENCH_PROFILE2"]).print_stats(
                os.environ.get("BENCH_PROFILE_FILTER", ""), 40
            )
        else:
            second = sweep_cluster(CLUSTER, at + timedelta(seconds=30), progress=progress)
        second_s = time.monotonic() - t0
        second_cpu, second_sim = time.process_time() - c0, cpu_s(sim_pid) - s0
        print(
            f"re-sweep:     {second_s:6.1f} s ({second_cpu:.1f} s CPU here, {second_sim:.1f} s in the simulator)   peak RSS {rss_mb():6.0f} MB   versions opened {second.opened}, "
            f"changes {second.changes}, rows written {rows() - written:,} (SourceRun rows only)   errors {len(second.errors)}"
        )
        for err in first.errors + second.errors:
            print("  error:", err)
        ok = first_s <= 30 and rss_first <= 600 and second_s <= 10 and second.opened == 0
        print(
            "targets (first <= 30 s, <= 600 MB; re-sweep <= 10 s, 0 versions):",
            "met" if ok else "NOT met",
            f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)",
        )
    finally:
        harness.close()


if __name__ == "__main__":
    main()
