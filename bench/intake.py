"""Benchmark the Alertmanager intake under concurrent load (not a test; prints figures).

Serves rcaweb with gunicorn on a free loopback port against PostgreSQL, posts
Alertmanager webhook payloads of 10 alerts each from several concurrent
clients, and prints accepted alerts per second and p50/p95/p99 latency. The
floor is plain psycopg inserts of the same rows (10 per transaction, same
number of concurrent connections) into the same table on the same database;
the ratio says what Django, validation, auth and the enqueue cost on top.
Target: >= 1,000 alerts/s on a 2-core machine and >= 40 % of the floor.

The intake enqueues ``process_alerts`` to Redis (``REDIS_URL``, db 15 by
default) with no worker consuming, so the figure is the intake alone
(store first + enqueue), not grouping; the queued messages are deleted after.
``--no-redis`` uses Celery's in-memory transport instead (enqueue costs ~0).

gunicorn runs gthread workers with keep-alive by default, as Alertmanager (a Go HTTP client) keeps its
connections open; ``--worker-class sync`` (a new TCP connection per request) costs about 40 % more CPU
per alert. Besides wall-clock rates, which depend on whatever else the machine runs, it prints the CPU
milliseconds per alert of every process involved and the rate they project on idle cores.

    .venv/bin/python bench/intake.py [--requests 2000] [--clients 8] [--workers 3 --worker-class gthread --threads 4] [--json]

Storm mode (issue 17): one notification with N distinct alerts, timed from the POST until every alert is
grouped into an incident, with gunicorn (1 worker) and one real Celery worker on Redis (db 14 by default,
flushed) against its own database (rcaweb_bench_storm, incidents emptied first); then it waits for the
evidence collections the storm queued (up to --max-seconds) and counts the ones the worker ran. Alerts name
GPUs no inventory knows (``unknown``, one incident each) or the GPUs of a seeded 625-node cluster (``gpu``,
one incident per node; h100-00 is not in the inventory, so its 8 alerts stay unresolved). ``--eager`` runs
the inline path instead (demo, tests: the webhook's own request groups and collects). Target: 5,000
alerts grouped in <= 60 s with one worker on a 2-core machine.

    .venv/bin/python bench/intake.py --storm 5000 [--storm-kind unknown|gpu] [--concurrency 1] [--eager] [--json]

Inline mode (issue 16): no broker, no worker, as the demo runs. This Django app on a threaded WSGI server (the
demo's) with a fresh SQLite file in WAL mode (the demo's database; ``--inline-db postgres://…`` for PostgreSQL) and a seeded cluster of ``--inline-nodes``
8-GPU nodes; one client posts ``--inline-requests`` notifications one after the other on a kept-alive
connection, each an Xid alert on a GPU of a different node (a new incident each, so every one queues grouping,
evidence and a diagnosis). Prints the webhook's p50/p95/max latency, then how long the processing took to
drain after the last answer. ``--inline-mode thread`` (the default: the in-process worker thread processes
after the answer) or ``sync`` (everything inside the request, as before: the figure to compare with). Target:
p95 <= 100 ms in thread mode. ``--inline-backlog N`` first posts one notification of N alerts on GPUs no
inventory knows (N incidents to group, collect and diagnose), so the timed notifications arrive while the
thread works that backlog: on SQLite the webhook then shares the one writer with it. It also prints the
answers other than 200 and the warnings the app logged meanwhile (a batch-grouping fallback, "database is
locked"): any is a failed run (exit 1), as is an alert left ungrouped or an incident left undiagnosed.

    .venv/bin/python bench/intake.py --inline [--inline-mode thread|sync] [--inline-requests 200] [--inline-nodes 100] [--inline-backlog 300]

Where the time went (2026-12-02, thread mode, 200 notifications after a 300-alert backlog): at load average
~3 the webhook answered in p50 6 / p95 12 ms on SQLite (before: p50 68 / p95 139 ms: 40 ms of each answer
was Nagle's algorithm holding the demo server's body until the client's delayed ACK, and the insert waited
p95 71 ms, up to 319 ms, for the process' write lock behind whole grouping runs). What is left on a loaded
machine is the wait for the one background transaction in progress, bounded by the grouping's 50 ms batches
but not by the diagnosis' write of its run (``incidents/diagnosis_run.py``, p95 ~110 ms at load average 15).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("BENCH_PG_ADMIN", "postgres://postgres@127.0.0.1:5432/postgres")
DB_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcaweb_bench")
REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
TOKEN = "bench-webhook-token"
ALERTS_PER_PAYLOAD = 10
APP_NAME = (
    f"rcaweb-bench-intake-{os.getpid()}"  # PGAPPNAME of the served app: other benches share the database
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_database() -> None:
    name = DB_URL.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def env(redis: bool) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PYTEST_VERSION")}
    e.update(
        DATABASE_URL=DB_URL,
        RCAWEB_SECRET_KEY="bench-secret-key-" + uuid.uuid4().hex,
        RCAWEB_WEBHOOK_TOKEN=TOKEN,
        RCAWEB_CELERY_EAGER="false",
        RCAWEB_LOG_LEVEL="WARNING",
        RCAWEB_PLAIN_STATIC="true",
        PGAPPNAME=APP_NAME,
    )
    if redis:
        e["REDIS_URL"] = REDIS
    return e


def migrate(redis: bool) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env(redis), check=True
    )


def payloads(run: str, count: int, start: datetime) -> list[bytes]:
    """Distinct GPU alerts (a new fingerprint each) so every request stores 10 new rows."""
    out = []
    for i in range(count):
        alerts = []
        for j in range(ALERTS_PER_PAYLOAD):
            n = i * ALERTS_PER_PAYLOAD + j
            labels = {
                "alertname": "GPUXidError",
                "severity": "critical",
                "cluster": "bench",
                "Hostname": f"h100-{n % 1000:03d}",
                "gpu": str(n % 8),
                "UUID": f"GPU-{run}-{n:08d}",
                "xid": "79",
            }
            alerts.append(
                {
                    "status": "firing",
                    "labels": labels,
                    "annotations": {"summary": f"Xid 79 on GPU {n % 8} of h100-{n % 1000:03d}"},
                    "startsAt": (start + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    "endsAt": "0001-01-01T00:00:00Z",
                    "generatorURL": "http://prometheus:9090/graph?g0.expr=x",
                    "fingerprint": f"{run}{n:08x}"[:16],
                }
            )
        body = {
            "version": "4",
            "groupKey": '{}:{alertname="GPUXidError", cluster="bench"}',
            "truncatedAlerts": 0,
            "status": "firing",
            "receiver": "rcaweb",
            "groupLabels": {"alertname": "GPUXidError", "cluster": "bench"},
            "commonLabels": {"alertname": "GPUXidError", "cluster": "bench"},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093",
            "alerts": alerts,
        }
        out.append(json.dumps(body).encode())
    return out


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("gunicorn did not become ready")


def post_all(
    port: int, bodies: list[bytes], clients: int, max_seconds: float
) -> tuple[list[float], int, int, float]:
    """Each client posts its share; returns latencies (s), accepted alerts, failures, wall time."""
    lat: list[float] = []
    accepted = [0]
    failed = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + max_seconds

    def client(share: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine: list[float] = []
        ok = bad = 0
        for body in share:
            if time.monotonic() > deadline:
                break
            t0 = time.perf_counter()
            try:
                conn.request(
                    "POST",
                    "/api/v1/alerts/alertmanager",
                    body=body,
                    headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
                )
                resp = conn.getresponse()
                resp.read()
                status = resp.status
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                status = 0
            mine.append(time.perf_counter() - t0)
            if status == 200:
                ok += ALERTS_PER_PAYLOAD
            else:
                bad += 1
        with lock:
            lat.extend(mine)
            accepted[0] += ok
            failed[0] += bad

    threads = [threading.Thread(target=client, args=(bodies[i::clients],)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, accepted[0], failed[0], time.perf_counter() - t0


def floor(bodies: list[bytes], clients: int, *, pipelined: bool) -> tuple[int, float, dict[str, float]]:
    """Plain psycopg: the same rows, 10 per transaction, ``clients`` concurrent connections.

    ``pipelined=False`` is the floor the issue names (one INSERT per row, a commit per notification);
    ``pipelined=True`` (executemany in pipeline mode) is the tightest reference, printed next to it.
    """
    rows_per_body = []
    now = datetime.now(UTC)
    for body in bodies:
        rows = []
        for a in json.loads(body)["alerts"]:
            fp = ("p" if pipelined else "f") + a["fingerprint"][1:]
            rows.append(
                (
                    fp,
                    a["labels"]["alertname"],
                    "firing",
                    "critical",
                    "bench",
                    Jsonb(a["labels"]),
                    Jsonb(a["annotations"]),
                    a["startsAt"],
                    None,
                    a["generatorURL"],
                    "g",
                    "rcaweb",
                    Jsonb(a),
                    now,
                    now,
                )
            )
        rows_per_body.append(rows)
    sql = (
        "INSERT INTO incidents_alert (fingerprint, name, status, severity, cluster_name, labels, annotations, starts_at,"
        " ends_at, generator_url, group_key, receiver, raw, received_at, updated_at) VALUES "
        "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    url = DB_URL.replace("postgres://", "postgresql://", 1)
    done = [0]
    lock = threading.Lock()
    conns = [psycopg.connect(url) for _ in range(clients)]
    backends = [c.info.backend_pid for c in conns]

    def worker(conn: psycopg.Connection, share: list[list[tuple]]) -> None:
        n = 0
        for rows in share:
            with conn.transaction(), conn.cursor() as cur:
                if pipelined:
                    cur.executemany(sql, rows)  # psycopg >= 3.1 sends these in pipeline mode: one round trip
                else:
                    for row in rows:
                        cur.execute(sql, row)
            n += len(rows)
        with lock:
            done[0] += n

    threads = [
        threading.Thread(target=worker, args=(conns[i], rows_per_body[i::clients])) for i in range(clients)
    ]
    cpu0, pg0 = time.process_time(), cpu_of(backends)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu = {"client": time.process_time() - cpu0, "postgres": cpu_of(backends) - pg0}
    for c in conns:
        c.close()
    return done[0], wall, cpu


#
# CPU accounting: on a shared machine wall-clock rates depend on everyone else's load; CPU seconds spent per
# alert (by the app's workers, PostgreSQL's backends, Redis and the client) do not, and give the projection.
#

TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pids: list[int]) -> float:
    """utime + stime (seconds) of these processes; vanished ones count 0."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of proc(5))
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def children_of(ppid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int(d.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1]) == ppid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def db_backends() -> list[int]:
    """The PostgreSQL backends serving our gunicorn workers (by application_name), not other clients'."""
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP_NAME,)
        ).fetchall()
    return [r[0] for r in rows]


def redis_pids() -> list[int]:
    return [
        int(d.name)
        for d in Path("/proc").iterdir()
        if d.name.isdigit()
        and d.joinpath("comm").exists()
        and d.joinpath("comm").read_text().strip() == "redis-server"
    ]


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1] if len(values) > 1 else values[0]
    )


def cleanup(run: str, redis: bool) -> None:
    url = DB_URL.replace("postgres://", "postgresql://", 1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM incidents_alert WHERE cluster_name = 'bench' AND labels->>'UUID' LIKE %s",
            (f"GPU-{run}-%",),
        )
    if redis:
        try:
            import redis as redis_lib

            redis_lib.Redis.from_url(REDIS).delete(
                "celery"
            )  # the queued process_alerts messages (no worker ran)
        except Exception as exc:  # the figures stand; say what was left behind
            print(f"note: could not purge the Redis queue: {exc}", file=sys.stderr)


#
# Storm mode: one notification with N distinct alerts, timed until every alert is grouped into an incident
#

STORM_DB_URL = os.environ.get(
    "BENCH_STORM_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcaweb_bench_storm"
)
STORM_REDIS = os.environ.get("BENCH_STORM_REDIS_URL", "redis://127.0.0.1:6379/14")
STORM_CLUSTER = "storm"
STORM_START = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


def storm_alerts(kind: str, count: int) -> list[dict]:
    """``count`` distinct firing alerts on GPUs, as lean as dcgm-exporter's labels allow (no UUID, no annotations)
    so that 5,000 fit in the webhook's 1 MiB: on nodes no inventory knows (``unknown``: one incident each, the attack's storm) or
    on the seeded cluster's nodes (``gpu``: the 8 GPUs of a node share it, one incident per node)."""
    out = []
    prefix = "h100" if kind == "gpu" else "a100"
    for n in range(count):
        out.append(
            {
                "status": "firing",
                "labels": {"alertname": "XidError", "Hostname": f"{prefix}-{n // 8:02d}", "gpu": str(n % 8)},
                "startsAt": (STORM_START + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "",
                "fingerprint": f"{n:016x}",
            }
        )
    return out


def storm_body(alerts: list[dict]) -> dict:
    return {
        "version": "4",
        "groupKey": '{}:{alertname="XidError"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "rcaweb",
        "groupLabels": {"alertname": "XidError"},
        "commonLabels": {"alertname": "XidError"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": alerts,
    }


def storm_setup(kind: str, count: int, *, eager: bool) -> dict[str, str]:
    """Point this process's Django at the storm database, migrate, empty the incidents, seed the inventory."""
    e = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PYTEST_VERSION")}
    e.update(
        DATABASE_URL=STORM_DB_URL,
        DJANGO_SETTINGS_MODULE="rcaweb.settings",
        RCAWEB_SECRET_KEY="bench-secret-key-" + uuid.uuid4().hex,
        RCAWEB_WEBHOOK_TOKEN=TOKEN,
        RCAWEB_CELERY_EAGER="true" if eager else "false",
        RCAWEB_LOG_LEVEL="WARNING",
        RCAWEB_PLAIN_STATIC="true",
        RCAWEB_DEBUG="false",
    )
    if not eager:
        e["REDIS_URL"] = STORM_REDIS
    os.environ.clear()
    os.environ.update(e)
    name = STORM_DB_URL.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from collectors.models import Cluster
    from incidents.models import Alert, Incident

    call_command("migrate", verbosity=0)
    Incident.objects.all().delete()
    Alert.objects.all().delete()
    if kind == "gpu":
        from tests.incidents.fixtures.alertmanager import small_world

        cluster, created = Cluster.objects.get_or_create(name=STORM_CLUSTER, defaults={"scheduler": "kai"})
        nodes = (count + 7) // 8
        if created or not cluster.entities.filter(kind="node", name=f"h100-{nodes - 1:02d}").exists():
            small_world(cluster, STORM_START, nodes=nodes, pending_job=False)
    return e


def storm_eager(kind: str, count: int) -> dict:
    """The eager path (demo, tests): the webhook's own transaction groups and collects inline."""
    storm_setup(kind, count, eager=True)
    from django.db import connection

    from incidents.intake import ingest_alertmanager
    from incidents.models import Alert, Incident

    body = storm_body(storm_alerts(kind, count))
    t0 = time.perf_counter()
    ingest_alertmanager(body)  # on commit: process_alerts inline, then each incident's collection inline
    wall = time.perf_counter() - t0
    grouped = Alert.objects.filter(incident__isnull=False).count()
    connection.close()
    return {
        "mode": "eager",
        "kind": kind,
        "alerts": count,
        "grouped": grouped,
        "incidents": Incident.objects.count(),
        "wall_s": round(wall, 2),
        "collections": Incident.objects.filter(collected_at__isnull=False).count(),
    }


def storm_worker(kind: str, count: int, concurrency: int, timeout: float) -> dict:
    """gunicorn + one Celery worker on Redis: post the notification, poll until every alert has its incident."""
    import tempfile

    e = storm_setup(kind, count, eager=False)
    import redis as redis_lib

    from incidents.models import Alert, Incident

    redis_lib.Redis.from_url(STORM_REDIS).flushdb()
    port = free_port()
    log_fd, log_name = tempfile.mkstemp(prefix="storm-worker-", suffix=".log")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "rcaweb.wsgi",
                "-b",
                f"127.0.0.1:{port}",
                "-w",
                "1",
                "--log-level",
                "warning",
                "--timeout",
                "120",
            ],
            cwd=ROOT,
            env=e,
            start_new_session=True,
        ),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "rcaweb",
                "worker",
                "--concurrency",
                str(concurrency),
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=e,
            stdout=log_fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ),
    ]
    result: dict = {"mode": "worker", "kind": kind, "alerts": count, "worker_concurrency": concurrency}
    os.close(log_fd)
    try:
        wait_ready(port, procs[0])
        deadline = time.monotonic() + 30
        while "ready." not in Path(log_name).read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        body = json.dumps(storm_body(storm_alerts(kind, count)), separators=(",", ":")).encode()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        t0 = time.perf_counter()
        conn.request(
            "POST",
            "/api/v1/alerts/alertmanager",
            body=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        resp.read()
        result["webhook_status"] = resp.status
        result["webhook_s"] = round(time.perf_counter() - t0, 2)
        if resp.status != 200:
            raise SystemExit(f"the webhook answered {resp.status} to {len(body)} bytes")
        grouped = 0
        last_print = 0.0
        while time.perf_counter() - t0 < timeout:
            grouped = Alert.objects.filter(incident__isnull=False, processed_at__isnull=False).count()
            if grouped >= count:
                break
            if time.perf_counter() - last_print > 10:
                last_print = time.perf_counter()
                print(
                    f"  {time.perf_counter() - t0:6.1f} s: {grouped} of {count} grouped",
                    file=sys.stderr,
                    flush=True,
                )
            time.sleep(0.2)
        result["grouped"] = grouped
        result["drained_s"] = round(time.perf_counter() - t0, 2) if grouped >= count else None
        result["incidents"] = Incident.objects.count()
        while time.perf_counter() - t0 < timeout:  # then the evidence the burst queued
            if not Incident.objects.filter(collection_state__in=("pending", "running")).exists():
                break
            time.sleep(0.5)
        left = Incident.objects.filter(collection_state__in=("pending", "running")).count()
        result["evidence_done_s"] = None if left else round(time.perf_counter() - t0, 2)
        result["collections_pending_at_timeout"] = left
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=20)
            except Exception:
                os.killpg(p.pid, signal.SIGKILL)
    text = Path(log_name).read_text()
    result["collect_evidence_tasks"] = len(
        re.findall(r"incidents\.tasks\.collect_evidence\[[0-9a-f-]+\] succeeded", text)
    )
    result["process_alerts_tasks"] = len(
        re.findall(r"incidents\.tasks\.process_alerts\[[0-9a-f-]+\] succeeded", text)
    )
    result["worker_log"] = log_name
    result["cpus"] = os.cpu_count()
    result["load_average_1m"] = round(os.getloadavg()[0], 2)
    return result


def inline_main(args: argparse.Namespace) -> int:
    """The webhook without workers: latency per notification, then the drain of what it queued."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="rcaweb-bench-inline-")
    e = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PYTEST_VERSION", "DATABASE_URL")}
    e.update(
        DATABASE_URL=args.inline_db or f"sqlite:///{tmp}/inline.sqlite3",
        DJANGO_SETTINGS_MODULE="rcaweb.settings",
        RCAWEB_SECRET_KEY="bench-secret-key-" + uuid.uuid4().hex,
        RCAWEB_WEBHOOK_TOKEN=TOKEN,
        RCAWEB_CELERY_EAGER="true",
        RCAWEB_INLINE_PROCESSING=args.inline_mode,
        RCAWEB_LOG_LEVEL="WARNING",
        RCAWEB_PLAIN_STATIC="true",
        RCAWEB_DEBUG="false",
    )
    os.environ.clear()
    os.environ.update(e)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from collectors.models import Cluster
    from harness.database import sqlite_wal
    from harness.webserver import WebServer
    from incidents import inline_worker
    from incidents.models import Alert, Incident
    from tests.incidents.fixtures.alertmanager import gpu_uuid, small_world

    if args.inline_db:
        name = args.inline_db.rsplit("/", 1)[1]
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                admin.execute(f'CREATE DATABASE "{name}"')
    sqlite_wal()
    call_command("migrate", verbosity=0)
    Incident.objects.all().delete()
    Alert.objects.all().delete()
    Cluster.objects.filter(name=STORM_CLUSTER).delete()
    cluster = Cluster.objects.create(name=STORM_CLUSTER, scheduler="kai")
    small_world(cluster, STORM_START, nodes=args.inline_nodes, pending_job=False)
    connection.close()
    import logging

    class Warnings(logging.Handler):
        """Every warning or error the app logs meanwhile (a batch-grouping fallback, "database is locked")."""

        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(f"{record.name}: {record.getMessage()[:200]}")

    warnings = Warnings()
    logging.getLogger().addHandler(warnings)
    port = free_port()
    httpd = WebServer(f"127.0.0.1:{port}").start()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    latencies: list[float] = []
    backlog_ms = None
    not_ok = 0
    try:
        if args.inline_backlog:
            # One notification of alerts on GPUs no inventory knows (one incident each: grouping, evidence and
            # a diagnosis apiece), answered first; the timed notifications then arrive while the thread works it.
            backlog = storm_alerts("unknown", args.inline_backlog)
            for n, a in enumerate(backlog):
                a["fingerprint"] = f"b{n:015x}"  # not the timed alerts' identities
            t0 = time.perf_counter()
            conn.request(
                "POST",
                "/api/v1/alerts/alertmanager",
                body=json.dumps(storm_body(backlog)).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
            )
            resp = conn.getresponse()
            resp.read()
            backlog_ms = round((time.perf_counter() - t0) * 1000, 1)
            if resp.status != 200:
                print(f"  backlog notification: HTTP {resp.status}", file=sys.stderr)
        for i in range(args.inline_requests):
            node = f"h100-{i % args.inline_nodes + 1:02d}"
            index = (i // args.inline_nodes) % 8
            labels = {
                "alertname": "XidError",
                "severity": "critical",
                "cluster": STORM_CLUSTER,
                "Hostname": node,
                "UUID": gpu_uuid(node, index),
                "gpu": str(index),
                "xid": "79",
            }
            a = {
                "status": "firing",
                "labels": labels,
                "annotations": {"summary": "Xid 79"},
                "startsAt": (STORM_START + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "",
                "fingerprint": f"{i:016x}",
            }
            body = json.dumps(storm_body([a])).encode()
            t0 = time.perf_counter()
            conn.request(
                "POST",
                "/api/v1/alerts/alertmanager",
                body=body,
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
            )
            resp = conn.getresponse()
            resp.read()
            latencies.append(time.perf_counter() - t0)
            if resp.status != 200:
                not_ok += 1
                print(f"  request {i}: HTTP {resp.status}", file=sys.stderr)
        posted = time.perf_counter()
        drained = inline_worker.drain(timeout=args.max_seconds * 10)
        drain_s = time.perf_counter() - posted
    finally:
        conn.close()
        httpd.stop()
    result = {
        "mode": f"inline-{args.inline_mode}",
        "requests": len(latencies),
        "nodes": args.inline_nodes,
        "p50_ms": round(pct(latencies, 50) * 1000, 1),
        "p95_ms": round(pct(latencies, 95) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "backlog": args.inline_backlog,
        "backlog_answer_ms": backlog_ms,
        "drain_s": round(drain_s, 2) if drained else None,
        "grouped": Alert.objects.filter(incident__isnull=False).count(),
        "incidents": Incident.objects.count(),
        "diagnosed": Incident.objects.filter(diagnosed_at__isnull=False).count(),
        "not_200": not_ok,
        "warnings_logged": len(warnings.messages),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"webhook without workers ({args.inline_mode}): {result['requests']} notifications, one client, "
            f"{connection.vendor}, {args.inline_nodes}-node inventory"
            + (
                f", after a backlog of {args.inline_backlog} alerts (answered in {backlog_ms} ms)"
                if args.inline_backlog
                else ""
            )
        )
        print(
            f"  latency p50 {result['p50_ms']} ms   p95 {result['p95_ms']} ms   max {result['max_ms']} ms"
            f"   (target p95 <= 100 ms in thread mode)"
        )
        print(
            f"  then drained in {result['drain_s']} s: {result['grouped']} alerts grouped into "
            f"{result['incidents']} incidents, {result['diagnosed']} diagnosed"
        )
        print(
            f"  {result['not_200']} answers other than 200, {result['warnings_logged']} warnings logged; "
            f"load average (1 min) {result['load_average_1m']} on {result['cpus']} cores"
        )
        for message in warnings.messages[:5]:
            print(f"    {message}")
    ok = (
        not not_ok
        and not warnings.messages
        and (
            result["grouped"] == len(latencies) + args.inline_backlog
            and result["diagnosed"] == result["incidents"]
        )
    )
    return 0 if drained and ok else 1


def storm_main(args: argparse.Namespace) -> int:
    if args.eager:
        result = storm_eager(args.storm_kind, args.storm)
    else:
        result = storm_worker(args.storm_kind, args.storm, args.concurrency, args.max_seconds)
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"storm ({result['mode']}): one notification with {result['alerts']} distinct {result['kind']} alerts, PostgreSQL"
    )
    if result["mode"] == "eager":
        print(
            f"  grouped {result['grouped']} into {result['incidents']} incidents, {result['collections']} "
            f"collected, in {result['wall_s']} s (the webhook's own request, inline)"
        )
        return 0 if result["grouped"] == result["alerts"] else 1
    drained = result["drained_s"]
    print(f"  webhook answered {result['webhook_status']} in {result['webhook_s']} s")
    print(
        f"  grouped {result['grouped']} of {result['alerts']} into {result['incidents']} incidents in "
        f"{drained if drained is not None else '> ' + str(args.max_seconds)} s with one Celery worker "
        f"(concurrency {result['worker_concurrency']}) on Redis   (target <= 60 s)"
    )
    print(
        f"  evidence: {result['collect_evidence_tasks']} collections ran, all done at {result['evidence_done_s']} s; "
        f"{result['process_alerts_tasks']} process_alerts messages"
    )
    print(
        f"  load average (1m) {result['load_average_1m']} on {result['cpus']} cores; worker log {result['worker_log']}"
    )
    return 0 if drained is not None else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000, help="payloads to post (10 alerts each)")
    ap.add_argument(
        "--clients", type=int, default=8, help="concurrent client threads (and floor connections)"
    )
    ap.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    ap.add_argument(
        "--worker-class",
        default="gthread",
        choices=["sync", "gthread", "asgi"],
        help="gunicorn worker class (asgi: rcaweb.asgi, as deploy/serve runs it; 4 threads per worker)",
    )
    ap.add_argument(
        "--threads", type=int, default=4, help="threads per gthread worker (keep-alive connections)"
    )
    ap.add_argument("--max-seconds", type=float, default=120.0, help="stop posting after this long")
    ap.add_argument(
        "--no-redis", action="store_true", help="enqueue to Celery's in-memory transport, not Redis"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument(
        "--storm",
        type=int,
        default=0,
        metavar="N",
        help="storm mode: one notification with N distinct alerts, timed until all are grouped",
    )
    ap.add_argument(
        "--storm-kind",
        default="unknown",
        choices=["unknown", "gpu"],
        help="storm alerts on GPUs no inventory knows, or on a seeded cluster's GPUs",
    )
    ap.add_argument("--eager", action="store_true", help="storm mode: the inline path, no broker or worker")
    ap.add_argument("--concurrency", type=int, default=1, help="storm mode: the Celery worker's processes")
    ap.add_argument("--inline", action="store_true", help="inline mode: no broker or worker, SQLite, latency")
    ap.add_argument("--inline-mode", default="thread", choices=["thread", "sync"])
    ap.add_argument("--inline-requests", type=int, default=200)
    ap.add_argument("--inline-nodes", type=int, default=100)
    ap.add_argument(
        "--inline-backlog",
        type=int,
        default=0,
        metavar="N",
        help="inline mode: first post one notification of N alerts, so the timed ones arrive while it is processed",
    )
    ap.add_argument(
        "--inline-db", default="", help="inline mode on this PostgreSQL URL instead of a fresh SQLite file"
    )
    args = ap.parse_args()
    if args.inline:
        return inline_main(args)
    if args.storm:
        return storm_main(args)
    redis = not args.no_redis
    ensure_database()
    migrate(redis)
    run = uuid.uuid4().hex[:6]
    bodies = payloads(run, args.requests, datetime(2026, 11, 29, tzinfo=UTC))
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "rcaweb.asgi:application" if args.worker_class == "asgi" else "rcaweb.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            str(args.workers),
            "--worker-class",
            args.worker_class,
            *(["--asgi-lifespan", "off"] if args.worker_class == "asgi" else ["--threads", str(args.threads)]),
            "--keep-alive",
            "5",
            "--log-level",
            "warning",
            "--backlog",
            "512",
        ],
        cwd=ROOT,
        env=env(redis),
    )
    try:
        wait_ready(port, proc)
        post_all(port, bodies[: min(50, len(bodies))], args.clients, 30)  # warm-up: imports, connections
        cleanup(run, redis)
        workers = children_of(proc.pid)
        backends = db_backends()
        rpids = redis_pids() if redis else []
        c0 = (time.process_time(), cpu_of(workers), cpu_of(backends), cpu_of(rpids))
        lat, accepted, failed, wall = post_all(port, bodies, args.clients, args.max_seconds)
        c1 = (time.process_time(), cpu_of(workers), cpu_of(backends), cpu_of(rpids))
        app_cpu = dict(
            zip(
                ("client", "gunicorn", "postgres", "redis"),
                (b - a for a, b in zip(c0, c1, strict=True)),
                strict=True,
            )
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    floor_rows, floor_wall, floor_cpu = floor(bodies[: len(lat)], args.clients, pipelined=False)
    pipe_rows, pipe_wall, pipe_cpu = floor(bodies[: len(lat)], args.clients, pipelined=True)
    cleanup(run, redis)
    app_rate = accepted / wall if wall else 0.0
    floor_rate = floor_rows / floor_wall if floor_wall else 0.0
    result = {
        "requests": len(lat),
        "alerts_accepted": accepted,
        "failed_requests": failed,
        "clients": args.clients,
        "gunicorn_workers": args.workers,
        "gunicorn_worker_class": args.worker_class,
        "gunicorn_threads": args.threads,
        "broker": "redis" if redis else "memory",
        "wall_s": round(wall, 2),
        "alerts_per_s": round(app_rate, 1),
        "p50_ms": round(pct(lat, 50) * 1000, 1),
        "p95_ms": round(pct(lat, 95) * 1000, 1),
        "p99_ms": round(pct(lat, 99) * 1000, 1),
        "floor_alerts_per_s": round(floor_rate, 1),
        "ratio_to_floor": round(app_rate / floor_rate, 3) if floor_rate else None,
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        # CPU milliseconds per alert, and what they project on this machine's cores when nothing else runs.
        "app_cpu_ms_per_alert": {k: round(v * 1000 / max(accepted, 1), 3) for k, v in app_cpu.items()},
        "floor_cpu_ms_per_alert": {k: round(v * 1000 / max(floor_rows, 1), 3) for k, v in floor_cpu.items()},
    }
    app_cost = sum(app_cpu.values()) / max(accepted, 1)
    floor_cost = sum(floor_cpu.values()) / max(floor_rows, 1)
    cores = os.cpu_count() or 1
    result["projected_alerts_per_s"] = round(cores / app_cost, 1) if app_cost else None
    result["projected_floor_alerts_per_s"] = round(cores / floor_cost, 1) if floor_cost else None
    result["projected_ratio"] = round(floor_cost / app_cost, 3) if app_cost and floor_cost else None
    pipe_rate = pipe_rows / pipe_wall if pipe_wall else 0.0
    pipe_cost = sum(pipe_cpu.values()) / max(pipe_rows, 1)
    result["pipelined_floor_alerts_per_s"] = round(pipe_rate, 1)
    result["ratio_to_pipelined_floor"] = round(app_rate / pipe_rate, 3) if pipe_rate else None
    result["projected_pipelined_floor_alerts_per_s"] = round(cores / pipe_cost, 1) if pipe_cost else None
    result["projected_ratio_to_pipelined"] = (
        round(pipe_cost / app_cost, 3) if app_cost and pipe_cost else None
    )
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"intake: {accepted} alerts in {len(lat)} requests ({failed} failed) from {args.clients} clients, "
            f"gunicorn {args.workers} {args.worker_class} workers x {args.threads} threads, broker {result['broker']}, PostgreSQL"
        )
        print(f"  accepted alerts/s   {app_rate:10.1f}   (target >= 1000)")
        print(
            f"  latency p50/p95/p99 {result['p50_ms']:.1f} / {result['p95_ms']:.1f} / {result['p99_ms']:.1f} ms"
        )
        print(
            f"  psycopg floor       {floor_rate:10.1f} alerts/s (10 rows per transaction, {args.clients} connections)"
        )
        print(f"  ratio to floor      {result['ratio_to_floor']:.1%}   (target >= 40 %)")
        print(
            f"  pipelined floor     {pipe_rate:10.1f} alerts/s (executemany in pipeline mode); "
            f"ratio {result['ratio_to_pipelined_floor']:.1%}"
        )
        print(
            f"  load average (1m)   {result['load_average_1m']} on {cores} cores: the wall-clock rates above share "
            "the machine with whatever else runs"
        )
        print(
            f"  CPU per alert       app {result['app_cpu_ms_per_alert']} ms; floor {result['floor_cpu_ms_per_alert']} ms"
        )
        print(
            f"  projected, idle     {result['projected_alerts_per_s']} alerts/s vs floor "
            f"{result['projected_floor_alerts_per_s']} alerts/s = {result['projected_ratio']:.1%} "
            f"(all CPU of {cores} cores / CPU per alert)"
        )
        print(
            f"                      pipelined floor {result['projected_pipelined_floor_alerts_per_s']} alerts/s = "
            f"{result['projected_ratio_to_pipelined']:.1%}"
        )
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
