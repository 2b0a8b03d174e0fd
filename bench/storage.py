"""Benchmark: the two inventory stores (collectors.storage) on the same history.

Records a synthetic cluster's sweeps through ``record_states`` with each store (a first sweep that creates
every entity, one where a tenth of the pods changed, one where nothing did), then reads the pods on each node
and the jobs of each queue as of t through each store's ``versions_at``, and prints the times side by side.
The ORM store is the reference; the tuned one (COPY, hand-written SQL) needs PostgreSQL for its writes, so on
SQLite only the reads are compared.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_bench_storage .venv/bin/python bench/storage.py
    .venv/bin/python bench/storage.py --pods 2000          # SQLite: reads only

The database named is not touched: the runs go to a test database created and dropped around them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
os.environ.setdefault("RCAWEB_SECRET_KEY", "bench-only-secret-key")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import setup_databases, teardown_databases  # noqa: E402

from collectors import storage  # noqa: E402
from collectors.inventory import record_states  # noqa: E402
from collectors.models import Cluster  # noqa: E402
from collectors.observed import Observed  # noqa: E402
from collectors.storage import InventoryStore, OrmStore, TunedStore  # noqa: E402

T0 = datetime(2026, 11, 1, tzinfo=UTC)
PODS_PER_NODE = 20
QUEUES = 20


def sweep(pods: int, revision: int, changed_every: int) -> list[Observed]:
    """One sweep's nodes, jobs and pods; pods whose index is a multiple of ``changed_every`` carry ``revision``."""
    nodes = max(1, pods // PODS_PER_NODE)
    out = [
        Observed(kind="node", name=f"node-{n:05d}", state={"ready": True, "gpus": 8}, hot={"ready": True})
        for n in range(nodes)
    ]
    for i in range(pods):
        node, queue, job = f"node-{i % nodes:05d}", f"team-{(i // 2) % QUEUES:02d}", f"job-{i // 2:06d}"
        state = {
            "phase": "Running",
            "node": node,
            "queue": queue,
            "job": job,
            "containers": [{"name": "main", "image": "trainer:1", "env": {"RANK": str(i % 2)}}],
            "revision": revision if i % changed_every == 0 else 0,
        }
        hot = {"phase": "Running", "node": node, "queue": queue, "job": job, "namespace": "ml"}
        out.append(Observed(kind="pod", name=f"{job}-{i % 2}", namespace="ml", state=state, hot=hot))
        if i % 2 == 0:
            jstate = {"phase": "Running", "queue": queue, "pods": 2, "submitted": "2026-11-01T00:00:00Z"}
            out.append(
                Observed(
                    kind="job",
                    name=job,
                    namespace="ml",
                    state=jstate,
                    hot={"phase": "Running", "queue": queue},
                )
            )
    return out


def record(store: InventoryStore, pods: int) -> tuple[Cluster, dict[str, float]]:
    cluster = Cluster.objects.create(name=f"bench-{store.name}")
    times = {}
    for label, revision, every, minute in (
        ("first sweep", 0, 1, 0),
        ("a tenth changed", 1, 10, 5),
        ("unchanged", 1, 10, 10),
    ):
        started = time.perf_counter()
        record_states(
            cluster, sweep(pods, revision, every), T0 + timedelta(minutes=minute), batch=500, store=store
        )
        times[label] = time.perf_counter() - started
    return cluster, times


def reads(store: InventoryStore, cluster: Cluster, pods: int, samples: int) -> dict[str, float]:
    """Median seconds of one as-of read: the pods on a node, the jobs of a queue."""
    nodes = max(1, pods // PODS_PER_NODE)
    t = T0 + timedelta(minutes=7)
    out = {}
    for label, kinds, hot in (
        ("pods on a node", ["pod"], lambda i: {"node": f"node-{i % nodes:05d}"}),
        ("jobs of a queue", ["job"], lambda i: {"queue": f"team-{i % QUEUES:02d}"}),
    ):
        took = []
        for i in range(samples):
            started = time.perf_counter()
            found = store.versions_at(cluster, kinds, t, **hot(i))
            took.append(time.perf_counter() - started)
            assert found, (label, hot(i))
        out[label] = statistics.median(took)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=50, help="reads timed per figure")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = parser.parse_args()
    old = setup_databases(verbosity=0, interactive=False)
    figures: dict[str, float] = {}
    try:
        stores: list[InventoryStore] = [OrmStore(), TunedStore()]
        backend = connection.vendor
        print(
            f"{args.pods} pods, {max(1, args.pods // PODS_PER_NODE)} nodes, {args.pods // 2} jobs on {backend}"
        )
        writer = storage.inventory_store()
        cluster, times = record(writer, args.pods)
        for label, took in times.items():
            figures[f"record {label} ({writer.name}) s"] = round(took, 3)
        if backend == "postgresql":  # the reference's writes too, beside the tuned store's
            _, ref_times = record(OrmStore(), args.pods)
            for label, took in ref_times.items():
                figures[f"record {label} (orm) s"] = round(took, 3)
        if backend == "postgresql":  # the planner's statistics, as autovacuum keeps them on a live database
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        for store in stores:
            for label, took in reads(store, cluster, args.pods, args.samples).items():
                figures[f"read {label} ({store.name}) ms"] = round(took * 1000, 2)
    finally:
        teardown_databases(old, verbosity=0)
    for key, value in figures.items():
        print(f"{key}: {value}")
    if args.json:
        print(json.dumps({"bench": "storage", **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
