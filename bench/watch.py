"""Benchmark: what collecting a quiet cluster costs with the watch, against the periodic sweep.

A 1,213-node simulated cluster (bench/collect.py's big world, which the simulation driver, ``harness``, serves
from a process of its own) is listed once by a watch session; then nothing changes for ``--quiet`` seconds
while the session keeps its watches open (bookmarks about every minute) and polls the GPUs from Prometheus
every RCAWEB_SWEEP_INVENTORY_S, as a worker would. The figure is this process's CPU over that window as a
share of one core, and the rows it wrote (target: <= 5 % of one core, 0 rows). For comparison, one unchanged
re-sweep's CPU spread over the sweep interval: what the sweep path pays for the same quiet cluster.

    .venv/bin/python bench/watch.py                         # 1,213 nodes, 20,000 pods, 60 s quiet
    .venv/bin/python bench/watch.py --nodes 200 --pods 4000 --quiet 30
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_bench .venv/bin/python bench/watch.py
    BENCH_PROFILE_POLL=tottime .venv/bin/python bench/watch.py   # then profile one unchanged GPU poll

The simulated Prometheus answers slowly (it evaluates every series in Python), so fewer GPU polls fit in the
window than a real one would allow: the headline figure is the open watches' share plus one poll's CPU per
RCAWEB_SWEEP_INVENTORY_S.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CLUSTER = "gpu-bench-watch"


class _Count(logging.Handler):
    """Counts record_states' "refusing out-of-order state" warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.n = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "out-of-order" in record.getMessage():
            self.n += 1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1213)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument(
        "--quiet", type=float, default=60.0, help="seconds of an unchanged cluster to measure"
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
    os.environ.setdefault("RCAWEB_DEBUG", "true")
    # the simulated Prometheus evaluates ~10,000 series in Python (see collect.py)
    os.environ.setdefault("RCAWEB_SOURCE_TIMEOUT_S", "120")
    sys.path.insert(0, str(ROOT / "bench"))
    from collect import (  # bench/collect.py: same database, same world
        big_cluster,
        cpu_s,
        ensure_database,
        rss_mb,
    )

    where = ensure_database()
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    logging.getLogger("collectors").setLevel(logging.WARNING)
    call_command("migrate", verbosity=0)
    from collectors.models import Change, EntityVersion, SourceRun
    from collectors.sweep import sweep_cluster
    from collectors.sweep.watch import WatchSession

    started = time.monotonic()
    harness, pods = big_cluster(args.nodes, args.pods, CLUSTER)
    try:
        print(
            f"simulator: {args.nodes} nodes, {pods} pods, built and served in "
            f"{time.monotonic() - started:.1f} s (child process); database: {where}"
        )
        cluster = harness.cluster
        sim_pid = harness.simulator_pid
        sim_now = harness.world.now

        def clock() -> datetime:
            # The served world stands still, and so does its time: its Prometheus has no samples after it
            # (a clock running ahead would see every GPU vanish). A state that changed at the same moment
            # would be refused, not written: the refusals are counted below, so none can hide.
            return sim_now

        refused = _Count()
        logging.getLogger("collectors.inventory").addHandler(refused)

        # inventory rows: what "writes nothing" is about (SourceRun rows are counted apart)
        def rows() -> int:
            return sum(m.objects.filter(cluster=cluster).count() for m in (EntityVersion, Change))

        def runs() -> int:
            return SourceRun.objects.filter(cluster=cluster).count()

        session = WatchSession(CLUSTER, clock=clock)
        c0, s0, t0 = time.process_time(), cpu_s(sim_pid), time.monotonic()
        assert session.start(), "another session holds the bench cluster"
        print(
            f"list once:    {time.monotonic() - t0:6.1f} s ({time.process_time() - c0:.1f} s CPU here, "
            f"{cpu_s(sim_pid) - s0:.1f} s in the simulator)   peak RSS {rss_mb():.0f} MB   "
            f"{len(session.kept.items)} listings watched, {sum(map(len, session.kept.items.values())):,} objects kept"
        )
        written, ran = rows(), runs()
        c0, s0, t0 = time.process_time(), cpu_s(sim_pid), time.monotonic()
        try:
            while time.monotonic() - t0 < args.quiet:
                session.step(timeout=1.0)
            if os.environ.get("BENCH_PROFILE_POLL"):  # where an unchanged GPU poll's CPU goes (this thread)
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.runcall(session.poll_gpus)
                pstats.Stats(prof).sort_stats(os.environ["BENCH_PROFILE_POLL"]).print_stats(25)
        finally:
            quiet_s = time.monotonic() - t0
            quiet_cpu, quiet_sim = time.process_time() - c0, cpu_s(sim_pid) - s0
            stats = session.stats
            session.stop()
        quiet_rows = rows() - written
        # The simulated Prometheus answers slowly (it evaluates every series in Python), so fewer polls fit
        # in the window than a real one allows: the figure is scaled to one poll per interval.
        every = settings.RCAWEB_SWEEP_INVENTORY_S
        polls_cpu = stats.gpu_poll_cpu_s
        per_poll = polls_cpu / stats.gpu_polls if stats.gpu_polls else 0.0
        idle = 100 * max(0.0, quiet_cpu - polls_cpu) / quiet_s
        share = idle + 100 * per_poll / every
        print(
            f"quiet:        {quiet_s:6.1f} s   {quiet_cpu:.2f} s CPU here ({100 * quiet_cpu / quiet_s:.2f} % of one "
            f"core; {quiet_sim:.1f} s in the simulator): the open watches {idle:.2f} %, {stats.gpu_polls} GPU "
            f"polls {per_poll:.2f} s CPU each ({stats.gpu_polls_unchanged} unchanged, not mapped)\n"
            f"              = {share:.2f} % of one core at one GPU poll every {every} s   "
            f"events {stats.events} (Kubernetes Events {stats.kube_events}), bookmarks {stats.bookmarks}, "
            f"applies {stats.applies}, "
            f"inventory rows written {quiet_rows} (SourceRun rows of the GPU polls: {runs() - ran})   "
            f"errors {len(stats.errors)}"
        )
        for err in stats.errors:
            print("  error:", err)
        c0, t0 = time.process_time(), time.monotonic()
        resweep = sweep_cluster(CLUSTER, clock())
        sweep_cpu = time.process_time() - c0
        print(
            f"sweep path:   one unchanged re-sweep {time.monotonic() - t0:.1f} s, {sweep_cpu:.1f} s CPU here; "
            f"every {every} s that is {100 * sweep_cpu / every:.1f} % of one core "
            f"(versions opened {resweep.opened}: the watch left nothing to correct)"
        )
        print(f"out-of-order states refused (changes a standing clock would hide): {refused.n}")
        ok = share <= 5.0 and quiet_rows == 0 and resweep.opened == 0 and refused.n == 0
        print(
            "target (quiet cluster <= 5 % of one core, 0 inventory rows, 0 versions to correct):",
            "met" if ok else "NOT met",
            f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)",
        )
    finally:
        harness.close()


if __name__ == "__main__":
    main()
