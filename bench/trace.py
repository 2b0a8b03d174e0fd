"""Benchmark the whole pipeline on Alibaba's public GPU cluster trace (prints figures; not a test).

Reads the trace's node and pod CSVs from a directory (nothing is fetched at run time), writes a scenario
from them (``simulator.openb``: the real node shapes and GPU products, the real pods as jobs in
creation order with their real whole, fractional, CPU and memory requests), then fast-forwards it through
the whole pipeline exactly as ``manage.py run_scenario FILE --database configured --sim-process --json`` does
(``--in-process``: without ``--sim-process``; the peaks of both processes are printed, and judged together), on
PostgreSQL: simulator on loopback HTTP, sweeps, the simulator's Alertmanager posting to the webhook,
intake, grouping, evidence and diagnosis. On a server whose autovacuum is off, the tables autovacuum would
analyze are ANALYZEd after each sweep (production plans with statistics). Prints wall time, peak memory, incidents, the time per stage
(bench/stages.py) and the load average. Targets (issue 20): a quarter of the cluster (306 nodes) in
≤ 10 minutes, the whole trace (1,213 nodes) in ≤ 30 minutes, peak ≤ 1.5 GB.

Getting the data (about 14 MB; never commit it), from github.com/alibaba/clusterdata:

    git clone --depth 1 --filter=blob:none --sparse https://github.com/alibaba/clusterdata.git
    cd clusterdata && git sparse-checkout set cluster-trace-gpu-v2023/csv
    # the CSVs are plain git blobs (not LFS): cluster-trace-gpu-v2023/csv/openb_node_list_gpu_node.csv
    # (1,213 GPU nodes, 6,212 GPUs) and .../openb_pod_list_default.csv (8,152 pods, 44 % of the GPU pods
    # fractional)

Then:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_trace \\
      .venv/bin/python bench/trace.py --csv clusterdata/cluster-trace-gpu-v2023/csv --fraction 0.25
    .venv/bin/python bench/trace.py --csv DIR                      # the whole trace
    .venv/bin/python bench/trace.py --csv DIR --write-only out.yaml   # just the scenario file

The database named in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/rcaweb_trace) is created if
missing, migrated and emptied before the run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcaweb_trace")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
os.environ.setdefault("RCAWEB_SECRET_KEY", "bench-only-secret")

NODES_CSV = "openb_node_list_gpu_node.csv"
PODS_CSV = "openb_pod_list_default.csv"


def analyze_after_sweeps() -> list[int]:
    """On a server whose autovacuum is off, ANALYZE after each sweep the tables autovacuum would (more rows
    changed since their last statistics than 50 + 10 % of their rows: its default thresholds), so the run is
    planned as in production rather than blind on tables that grew from empty. Returns a one-item list
    counting the ANALYZEs, empty when autovacuum is on (nothing to stand in for)."""
    from django.db import connection

    import collectors.sweep as sweep

    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cur:
        cur.execute("SHOW autovacuum")
        if cur.fetchone()[0] == "on":
            return []
    count = [0]

    def analyze() -> None:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT relname FROM pg_stat_user_tables WHERE n_mod_since_analyze > 50 + 0.1 * n_live_tup"
            )
            for (table,) in cur.fetchall():
                cur.execute(f'ANALYZE "{table}"')
                count[0] += 1

    for name in ("sweep_cluster", "sweep_events"):
        inner = getattr(sweep, name)

        def wrapper(*args: object, _inner: object = inner, **kwargs: object) -> object:
            try:
                return _inner(*args, **kwargs)  # type: ignore[operator]
            finally:
                analyze()

        setattr(sweep, name, wrapper)
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", required=True, help=f"directory holding {NODES_CSV} and {PODS_CSV}")
    ap.add_argument("--fraction", type=float, default=1.0, help="share of every node shape and of the pods")
    ap.add_argument("--hours", type=int, default=6, help="simulated span (default 6 h: 360 ticks)")
    ap.add_argument("--write-only", metavar="FILE", help="write the scenario file and stop")
    ap.add_argument("--json", action="store_true", help="print one JSON line of figures at the end")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="the simulator in this process (default: run_scenario --sim-process, its own process)",
    )
    ap.add_argument(
        "--progress", type=float, default=60, metavar="S", help="print stage times every S s (0: off)"
    )
    args = ap.parse_args()

    from simulator.openb import TraceError, trace_scenario

    csv_dir = Path(args.csv)
    try:
        text = trace_scenario(
            csv_dir / NODES_CSV, csv_dir / PODS_CSV, fraction=args.fraction, hours=args.hours
        )
    except (OSError, TraceError) as exc:
        print(f"bench/trace.py: {exc}", file=sys.stderr)
        return 2
    out = Path(args.write_only) if args.write_only else ROOT / "var" / "bench" / "openb-trace.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    if args.write_only:
        print(f"wrote {out} ({len(text) / 1e6:.1f} MB)")
        return 0

    sys.path.insert(0, str(ROOT / "bench"))
    from stages import children_usage, ensure_database, load, pipeline_stages

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    call_command("flush", verbosity=0, interactive=False)
    analyzes = analyze_after_sweeps()
    stages = pipeline_stages()
    print(f"scenario {out}; load average {load()}", flush=True)
    reporter = (
        stages.report_every(args.progress, lambda line: print(line, flush=True)) if args.progress else None
    )
    buf = io.StringIO()
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    own = [] if args.in_process else ["--sim-process"]
    call_command("run_scenario", str(out), "--database", "configured", "--json", *own, stdout=buf)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    sim_cpu, sim_peak = children_usage()
    if reporter is not None:
        reporter.set()
    stages.restore()
    doc = json.loads(buf.getvalue())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    from simulator.scenario import load_scenario

    sc = load_scenario(str(out))
    nodes = sum(p.nodes for p in sc.cluster.nodepools)
    gpus = sum(p.nodes * p.gpus_per_node for p in sc.cluster.nodepools)
    diagnosed = sum(1 for i in doc["incidents"] if i["diagnosed_at"])
    print(
        f"{doc['scenario']}: {nodes} nodes, {gpus} GPUs, {len(sc.jobs)} jobs over {args.hours} h -> "
        f"{len(doc['incidents'])} incidents ({diagnosed} diagnosed)"
    )
    sim_peak = sim_peak if own else 0.0
    print(f"wall {wall:.0f} s (process CPU {cpu:.0f} s), peak memory {peak:.0f} MiB, load average {load()}")
    if own:
        print(
            f"simulator process: CPU {sim_cpu:.0f} s, peak memory {sim_peak:.0f} MiB; "
            f"both processes' peaks together {peak + sim_peak:.0f} MiB"
        )
    if analyzes:
        print(f"planner statistics (autovacuum is off on this server): {analyzes[0]} ANALYZE after sweeps")
    print(f"{'stage':40} {'seconds':>8} {'calls':>7}")
    for name, secs, calls in stages.table():
        print(f"{name:40} {secs:8.1f} {calls:7d}")
    target_s = 600 if args.fraction <= 0.25 else 1800
    verdict = "meets" if wall <= target_s and peak + sim_peak <= 1536 else "misses"
    print(f"target: ≤ {target_s // 60} min, peak ≤ 1.5 GB (both processes together) -> {verdict}")
    if args.json:
        print(
            json.dumps(
                {
                    "bench": "trace",
                    "nodes": nodes,
                    "jobs": len(sc.jobs),
                    "wall_s": round(wall, 1),
                    "cpu_s": round(cpu, 1),
                    "peak_mib": round(peak),
                    "sim_process_peak_mib": round(sim_peak),
                    "sim_process_cpu_s": round(sim_cpu, 1),
                    "incidents": len(doc["incidents"]),
                    "stages_s": {n: round(s, 1) for n, s, _c in stages.table()},
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
