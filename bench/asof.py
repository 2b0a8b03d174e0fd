"""Benchmark: entity pages "as of t" on a large history, against a one-query floor.

Builds (once; reused while its row counts match) 1,000 nodes, 8,000 GPUs, 20,000 pods and 10,000 jobs,
50 versions each (jobs: 10), plus their changes and events, on the configured database
(DATABASE_URL; default SQLite file var/bench/asof.sqlite3) with bulk inserts. Then, logged in through
the Django test Client (full middleware stack), it times the node page and the job page as of random t
and a trivial one-query view (the floor), in rounds of one request each, and prints medians, ratios and
query counts.

    .venv/bin/python bench/asof.py                       # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_bench .venv/bin/python bench/asof.py
    .venv/bin/python bench/asof.py --rebuild --samples 50
    .venv/bin/python bench/asof.py --breakdown 40          # then: where each page's time goes

Target: each page <= 5x the floor, and query counts constant (the same for every sampled page).
The job page's why-pending panel (incidents.diagnosis, loaded lazily from .../why/) is timed on its own
with --diagnosis-samples requests: it reads the whole cluster as of t.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if not os.environ.get("DATABASE_URL"):
    (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RCAWEB_SQLITE_PATH", str(ROOT / "var" / "bench" / "asof.sqlite3"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
os.environ.setdefault("RCAWEB_SECRET_KEY", "bench-only-secret-key")
os.environ.setdefault("RCAWEB_PLAIN_STATIC", "true")
os.environ.setdefault("RCAWEB_SECURE_COOKIES", "false")
os.environ["RCAWEB_ALLOWED_HOSTS"] = (
    os.environ.get("RCAWEB_ALLOWED_HOSTS", "127.0.0.1,localhost") + ",testserver"
)

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import clear_url_caches, path  # noqa: E402

from collectors.models import Change, Cluster, Entity, EntityVersion, KubeEvent  # noqa: E402

logger = logging.getLogger(__name__)

NODES, GPUS_PER_NODE, PODS_PER_NODE, PODS_PER_JOB = 1000, 8, 20, 2
VERSIONS, JOB_VERSIONS = 50, 10
STEP = timedelta(minutes=10)
B0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
CLUSTER = "bench"
NODE_CHUNK = 25  # nodes (with their GPUs, pods, jobs) built per transaction
QUEUES = [f"team-{i:02d}" for i in range(20)]


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


#
# Build
#


def expected_counts() -> dict[str, int]:
    pods = NODES * PODS_PER_NODE
    return {"node": NODES, "gpu": NODES * GPUS_PER_NODE, "pod": pods, "job": pods // PODS_PER_JOB}


def built(cluster: Cluster | None) -> bool:
    if cluster is None:
        return False
    have = dict(Entity.objects.filter(cluster=cluster).values_list("kind").annotate(n=Count("id")))
    return have == expected_counts() and EntityVersion.objects.filter(cluster=cluster).count() > 1_000_000


def _versions(entity: Entity, cluster: Cluster, n: int, offset: timedelta, make: Callable) -> list[dict]:
    """Row dicts of n consecutive versions; the last stays open (valid_to NULL)."""
    out = []
    span = STEP * (VERSIONS // n)
    for k in range(n):
        state, hot = make(k)
        out.append(
            {
                "entity_id": entity.pk,
                "cluster_id": cluster.pk,
                "kind": entity.kind,
                "valid_from": B0 + k * span + offset,
                "valid_to": None if k == n - 1 else B0 + (k + 1) * span + offset,
                "state": state,
                **hot,
            }
        )
    return out


def build(cluster: Cluster) -> None:
    rnd = random.Random(7)
    t_start = time.perf_counter()
    rows = 0
    for first in range(0, NODES, NODE_CHUNK):
        with transaction.atomic():
            rows += _build_chunk(cluster, range(first, min(first + NODE_CHUNK, NODES)), rnd)
        done = min(first + NODE_CHUNK, NODES)
        if done % 100 == 0:
            el = time.perf_counter() - t_start
            print(f"  built {done}/{NODES} nodes, {rows:,} rows, {el:.0f}s", flush=True)


def _build_chunk(cluster: Cluster, node_ids: range, rnd: random.Random) -> int:
    entities: list[Entity] = []
    plan: list[tuple[Entity, dict]] = []
    for n in node_ids:
        node = f"node-{n:04d}"
        e = Entity(cluster=cluster, kind="node", name=node, first_seen=B0, last_seen=B0)
        entities.append(e)
        plan.append((e, {"node": node}))
        for g in range(GPUS_PER_NODE):
            ge = Entity(
                cluster=cluster,
                kind="gpu",
                name=f"GPU-{n:04d}{g:02d}00-0000-0000-0000-000000000000",
                first_seen=B0,
                last_seen=B0,
            )
            entities.append(ge)
            plan.append((ge, {"node": node, "index": g}))
        for j in range(PODS_PER_NODE // PODS_PER_JOB):
            ns = QUEUES[(n + j) % len(QUEUES)]
            job = f"job-{n:04d}-{j:02d}"
            je = Entity(cluster=cluster, kind="job", namespace=ns, name=job, first_seen=B0, last_seen=B0)
            entities.append(je)
            plan.append((je, {"queue": ns}))
            for p in range(PODS_PER_JOB):
                pe = Entity(
                    cluster=cluster, kind="pod", namespace=ns, name=f"{job}-{p}", first_seen=B0, last_seen=B0
                )
                entities.append(pe)
                plan.append(
                    (
                        pe,
                        {
                            "node": node,
                            "job": job,
                            "queue": ns,
                            "gpu": (j * PODS_PER_JOB + p) % GPUS_PER_NODE,
                        },
                    )
                )
    Entity.objects.bulk_create(entities, batch_size=2000)
    if entities[0].pk is None:  # backends without RETURNING: read the ids back
        ids = {
            (e.kind, e.namespace, e.name): e.pk
            for e in Entity.objects.filter(cluster=cluster, name__in=[x.name for x in entities])
        }
        for e in entities:
            e.pk = e.id = ids[(e.kind, e.namespace, e.name)]
    versions: list[dict] = []
    changes: list[dict] = []
    events: list[dict] = []
    for e, info in plan:
        offset = timedelta(seconds=rnd.randrange(int(STEP.total_seconds())))
        if e.kind == "node":
            vs = _versions(e, cluster, VERSIONS, offset, lambda k, i=info: _node_state(i["node"], k))
        elif e.kind == "gpu":
            vs = _versions(e, cluster, VERSIONS, offset, lambda k, i=info: _gpu_state(i, k))
        elif e.kind == "job":
            vs = _versions(e, cluster, JOB_VERSIONS, offset, lambda k, ent=e, i=info: _job_state(ent, i, k))
        else:
            vs = _versions(e, cluster, VERSIONS, offset, lambda k, ent=e, i=info: _pod_state(ent, i, k))
        versions.extend(vs)
        # one change per version of nodes and jobs, every fifth of pods and GPUs (what sweeps would write)
        every = 1 if e.kind in ("node", "job") else 5
        changes.extend(
            {
                "cluster_id": cluster.pk,
                "entity_id": e.pk,
                "kind": e.kind,
                "time": v["valid_from"],
                "field": "revision",
                "old": k - 1,
                "new": k,
            }
            for k, v in enumerate(vs)
            if k % every == 0
        )
        if e.kind == "pod":
            t = B0 + rnd.randrange(VERSIONS) * STEP
            events.append(
                {
                    "cluster_id": cluster.pk,
                    "uid": f"ev-{e.pk}",
                    "namespace": e.namespace,
                    "involved_kind": "Pod",
                    "involved_namespace": e.namespace,
                    "involved_name": e.name,
                    "reason": "FailedScheduling",
                    "message": "0/1000 nodes are available: 1000 Insufficient nvidia.com/gpu.",
                    "type": "Warning",
                    "first_time": t,
                    "last_time": t + timedelta(minutes=5),
                }
            )
    fast_insert(EntityVersion, versions)
    fast_insert(Change, changes)
    fast_insert(KubeEvent, events)
    return len(entities) + len(versions) + len(changes) + len(events)


def fast_insert(model: type, rows: list[dict]) -> None:
    """Rows (column -> Python value) without model instances: COPY on PostgreSQL, one executemany on SQLite.

    bulk_create spends most of its time building model instances and, on SQLite, sends ~60 rows per
    INSERT (999-parameter limit); building a million versions that way takes many minutes.
    """
    if not rows:
        return
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    cols = [f.column for f in fields]
    defaults = {f.column: f.get_default() for f in fields}
    jsons = {f.column for f in fields if f.get_internal_type() == "JSONField"}
    times = {f.column for f in fields if f.get_internal_type() == "DateTimeField"}
    pg = connection.vendor == "postgresql"

    def value(col: str, row: dict) -> Any:
        v = row.get(col, defaults[col])
        if col in jsons:
            return None if v is None and col != "state" else json.dumps(v)
        if col in times and v is not None and not pg:
            return _sqlite_time(v)
        return v

    data = [[value(c, r) for c in cols] for r in rows]
    with connection.cursor() as cur:
        if pg:
            with cur.cursor.copy(f"COPY {model._meta.db_table} ({', '.join(cols)}) FROM STDIN") as copy:
                for row in data:
                    copy.write_row(row)
        else:
            marks = ", ".join(["%s"] * len(cols))
            cur.executemany(f"INSERT INTO {model._meta.db_table} ({', '.join(cols)}) VALUES ({marks})", data)


@functools.lru_cache(maxsize=200_000)
def _sqlite_time(v: datetime) -> str:
    return connection.ops.adapt_datetimefield_value(v)


def _node_state(node: str, k: int) -> tuple[dict, dict]:
    ready = k % 17 != 16
    alloc = 8 if k % 23 != 22 else 0
    state = {
        "ready": ready,
        "ready_reason": "KubeletReady",
        "unschedulable": k % 29 == 28,
        "taints": [],
        "labels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "run.ai/node-pool": "h100",
            "rev": str(k),
        },
        "gpu_product": "NVIDIA-H100-80GB-HBM3",
        "nodepool": "h100",
        "capacity": {"nvidia.com/gpu": 8},
        "allocatable": {"nvidia.com/gpu": alloc},
        "conditions": {"Ready": {"status": str(ready), "reason": "KubeletReady", "since": iso(B0)}},
    }
    return state, {
        "phase": "Ready" if ready else "NotReady",
        "ready": ready,
        "gpus": 8,
        "gpus_allocatable": alloc,
        "node": node,
    }


def _gpu_state(info: dict, k: int) -> tuple[dict, dict]:
    n = int(info["node"].split("-")[1])
    pod = f"{QUEUES[n % len(QUEUES)]}/job-{n:04d}-{(info['index'] + k) % 10:02d}-0" if k % 3 else ""
    state = {
        "node": info["node"],
        "index": info["index"],
        "model": "NVIDIA H100 80GB HBM3",
        "present": True,
        "pod": pod or None,
        "xid_last": 0,
        "ecc_dbe_total": 0,
        "ecc_sbe_total": k,
    }
    return state, {"node": info["node"], "pod": pod, "phase": "ok"}


def _job_state(e: Entity, info: dict, k: int) -> tuple[dict, dict]:
    phase = "Running" if k % 4 else "Pending"
    per_pod = 1 + (k % 2)
    state = {
        "phase": phase,
        "queue": info["queue"],
        "project": info["queue"],
        "pods": PODS_PER_JOB,
        "gpus_per_pod": per_pod,
        "gpus_total": PODS_PER_JOB * per_pod,
        "priority_class": "train",
        "submitted": iso(B0),
        "scheduling": {"source": "kai", "type": "PodScheduled", "status": "True"},
    }
    return state, {
        "phase": phase,
        "queue": info["queue"],
        "project": info["queue"],
        "gpus": PODS_PER_JOB * per_pod,
        "namespace": e.namespace,
    }


def _pod_state(e: Entity, info: dict, k: int) -> tuple[dict, dict]:
    phase = "Running" if k % 4 else "Pending"
    node = info["node"] if phase == "Running" else ""
    state = {
        "phase": phase,
        "node": node or None,
        "job": info["job"],
        "queue": info["queue"],
        "gpus": 1,
        "containers": [
            {
                "name": "main",
                "image": f"registry.local/{info['queue']}:{k}",
                "gpus": 1,
                "state": {"running": {}},
                "restart_count": k // 10,
            }
        ],
        "conditions": {"PodScheduled": {"status": "True" if node else "False"}},
    }
    return state, {
        "phase": phase,
        "node": node,
        "job": info["job"],
        "queue": info["queue"],
        "project": info["queue"],
        "gpus": 1,
        "namespace": e.namespace,
    }


#
# Measure
#


def floor_view(request: HttpRequest) -> HttpResponse:
    """The floor: the same middleware (session, auth, cursor), and one query."""
    c = Cluster.objects.filter(name=CLUSTER).first()
    return HttpResponse(f"ok {c.pk if c else '-'}")


def install_floor() -> None:
    import rcaweb.urls

    rcaweb.urls.urlpatterns.insert(0, path("bench-floor/", floor_view))
    clear_url_caches()


def measure(client: Client, url: str) -> tuple[float, int]:
    with CaptureQueriesContext(connection) as ctx:
        t0 = time.perf_counter()
        r = client.get(url)
        el = time.perf_counter() - t0
    if r.status_code != 200:
        raise SystemExit(f"{url} answered {r.status_code}: {r.content[:300]!r}")
    return el, len(ctx.captured_queries)


def sample(client: Client, into: tuple[list[float], set[int]], make: Callable[[], str]) -> None:
    """One request of a page kind: its time and query count added to ``into``."""
    el, q = measure(client, make())
    into[0].append(el)
    into[1].add(q)


def report(how: str, samples: dict[str, tuple[list[float], set[int]]]) -> None:
    """Medians, ratios to the floor and query counts of one way of measuring, and whether the target is met."""
    floor = statistics.median(samples["floor (1-query view)"][0])
    print(f"\nmeasured {how}:\n{'':22} {'median ms':>10} {'min ms':>8} {'x floor':>8}  queries", flush=True)
    for label, (times, queries) in samples.items():
        qs = ",".join(str(q) for q in sorted(queries))
        flag = "" if len(queries) == 1 else "  (varies!)"
        med = statistics.median(times)
        print(f"{label:22} {med * 1000:10.1f} {min(times) * 1000:8.1f} {med / floor:8.1f}  {qs}{flag}", flush=True)
    mine = [statistics.median(samples[k][0]) / floor for k in ("node page", "job page, running", "job page, pending")]
    constant = all(len(q) == 1 for _, q in samples.values())
    panel = samples.get("why-pending panel")
    print(
        f"target: entity pages <= 5x floor -> {'met' if max(mine) <= 5 else 'MISSED'} (worst {max(mine):.1f}x); "
        + (f"the lazy why-pending panel {statistics.median(panel[0]) / floor:.1f}x; " if panel else "")
        + f"queries constant -> {'yes' if constant else 'NO'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rebuild", action="store_true", help="drop and rebuild the bench cluster")
    ap.add_argument("--samples", type=int, default=40, help="requests per page kind")
    ap.add_argument(
        "--diagnosis-samples", type=int, default=5, help="requests of the page with the diagnosis"
    )
    ap.add_argument(
        "--breakdown",
        type=int,
        default=0,
        metavar="N",
        help="after the figures, N more requests per page kind split into template rendering, SQL "
        "compilation, database calls and the rest (instrumented: not comparable with the figures)",
    )
    args = ap.parse_args()

    db = connection.settings_dict
    print(f"database: {db['ENGINE'].rsplit('.', 1)[-1]} {db['NAME']}")
    call_command("migrate", verbosity=0)
    cluster = Cluster.objects.filter(name=CLUSTER).first()
    if args.rebuild and cluster is not None:
        print("dropping the old bench cluster…", flush=True)
        cluster.delete()
        cluster = None
    if not built(cluster):
        if cluster is not None:
            cluster.delete()
        cluster = Cluster.objects.create(name=CLUSTER, scheduler="kai")
        print(
            f"building {expected_counts()} with {VERSIONS} versions each (jobs {JOB_VERSIONS})…", flush=True
        )
        t0 = time.perf_counter()
        build(cluster)
        with connection.cursor() as cur:
            # planner statistics for the fresh tables (both backends); on PostgreSQL also the visibility map
            # that index-only scans need, as autovacuum would set it on a live database
            cur.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
        print(f"built in {time.perf_counter() - t0:.0f}s")
    counts = {
        "entities": Entity.objects.filter(cluster=cluster).count(),
        "versions": EntityVersion.objects.filter(cluster=cluster).count(),
        "changes": Change.objects.filter(cluster=cluster).count(),
        "events": KubeEvent.objects.filter(cluster=cluster).count(),
    }
    print("rows: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))

    install_floor()
    user, _ = User.objects.get_or_create(username="bench")
    client = Client()
    client.force_login(user)
    rnd = random.Random(11)
    hi = B0 + (VERSIONS - 1) * STEP

    def rand_t() -> str:
        return iso(
            B0
            + timedelta(hours=1)
            + timedelta(seconds=rnd.randrange(int((hi - B0 - timedelta(hours=1)).total_seconds())))
        )

    def node_url() -> str:
        return f"/c/{CLUSTER}/nodes/node-{rnd.randrange(NODES):04d}/?t={rand_t()}&w=1h"

    def job_url(pending: bool, suffix: str = "") -> Callable[[], str]:
        """A random job at a t inside one of its versions that is Pending (k % 4 == 0) or Running."""
        span = STEP * (VERSIONS // JOB_VERSIONS)
        ks = [k for k in range(1, JOB_VERSIONS) if (k % 4 == 0) == pending]

        def make() -> str:
            n, j, k = rnd.randrange(NODES), rnd.randrange(PODS_PER_NODE // PODS_PER_JOB), rnd.choice(ks)
            # version k spans [k*span + offset, (k+1)*span + offset) with offset < STEP
            t = B0 + k * span + STEP + timedelta(seconds=rnd.randrange(int((span - STEP).total_seconds())))
            ns = QUEUES[(n + j) % len(QUEUES)]
            return f"/c/{CLUSTER}/jobs/{ns}/job-{n:04d}-{j:02d}/{suffix}?t={iso(t)}&w=1h"

        return make

    def floor_url() -> str:
        return f"/bench-floor/?t={rand_t()}&w=1h"

    pages: list[tuple[str, Callable[[], str], int]] = [
        ("floor (1-query view)", floor_url, args.samples),
        ("node page", node_url, args.samples),
        ("job page, running", job_url(False), args.samples),
        ("job page, pending", job_url(True), args.samples),
        ("why-pending panel", job_url(True, "why/"), args.diagnosis_samples),
    ]
    for _, make, n in pages:  # warm caches and templates
        for _ in range(3 if n == args.samples else 1):
            measure(client, make())
    # Two ways, both printed. In batches (all requests of one kind, then the next kind: how this bench has
    # always measured) the floor runs in a tight loop of one tiny code path, caches hot. In rounds (one
    # request of each kind per round) every request follows other kinds of requests, as in a server, and a
    # machine slowing down or speeding up during the run moves the floor and the pages alike.
    batch: dict[str, tuple[list[float], set[int]]] = {label: ([], set()) for label, _, _ in pages}
    for label, make, n in pages:
        for _ in range(n):
            sample(client, batch[label], make)
    per_round = [(label, make) for label, make, n in pages if n == args.samples]
    rounds: dict[str, tuple[list[float], set[int]]] = {label: ([], set()) for label, _ in per_round}
    for _ in range(args.samples):
        for label, make in per_round:
            sample(client, rounds[label], make)
    report("in batches, one page kind after another", batch)
    report("in rounds, one request of each kind per round", rounds)
    if args.breakdown:
        breakdown(client, [(label, make) for label, make, n in pages if n == args.samples], args.breakdown)


def breakdown(client: Client, pages: list[tuple[str, Callable[[], str]]], n: int) -> None:
    """Median ms per request of each part: Django template rendering (``Template.render``, the view's
    own Python inside it included), SQL compilation (``SQLCompiler.as_sql``), database calls (cursor
    execute: round trip, server time, adapting parameters) and the rest (middleware, view Python,
    ORM row and model building, the test client)."""
    from django.db.models.sql.compiler import SQLCompiler
    from django.template.backends.django import Template

    acc = {"render": 0.0, "compile": 0.0, "db": 0.0}
    depth = {"compile": 0, "render": 0}  # queries run while rendering count as rendering
    orig_render, orig_as_sql = Template.render, SQLCompiler.as_sql

    def render(self: Any, *a: Any, **k: Any) -> Any:
        depth["render"] += 1
        t0 = time.perf_counter()
        try:
            return orig_render(self, *a, **k)
        finally:
            depth["render"] -= 1
            if not depth["render"]:
                acc["render"] += time.perf_counter() - t0

    def as_sql(self: Any, *a: Any, **k: Any) -> Any:
        depth["compile"] += 1
        t0 = time.perf_counter()
        try:
            return orig_as_sql(self, *a, **k)
        finally:
            depth["compile"] -= 1
            if not depth["compile"] and not depth["render"]:  # subqueries compile inside their query
                acc["compile"] += time.perf_counter() - t0

    def db(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            if not depth["render"]:
                acc["db"] += time.perf_counter() - t0

    Template.render, SQLCompiler.as_sql = render, as_sql  # type: ignore[method-assign]
    try:
        print(f"\nbreakdown, median ms of {n} instrumented requests (queries run while rendering count as")
        print("rendering; the rest is middleware, view Python, ORM query building, rows and models):")
        print(f"{'':22} {'total':>7} {'render':>7} {'compile':>8} {'db':>6} {'rest':>6}")
        with connection.execute_wrapper(db):
            for label, make in pages:
                rows = []
                for _ in range(n):
                    url = make()
                    for key in acc:
                        acc[key] = 0.0
                    t0 = time.perf_counter()
                    client.get(url)
                    total = time.perf_counter() - t0
                    rows.append((total, acc["render"], acc["compile"], acc["db"]))
                med = [statistics.median(col) * 1000 for col in zip(*rows, strict=True)]
                rest = med[0] - med[1] - med[2] - med[3]
                print(f"{label:22} {med[0]:7.1f} {med[1]:7.1f} {med[2]:8.1f} {med[3]:6.1f} {rest:6.1f}")
    finally:
        Template.render, SQLCompiler.as_sql = orig_render, orig_as_sql  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
