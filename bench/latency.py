"""Alert → diagnosed incident latency with a real Celery worker, on the 1,000-node simulated cluster.

Not a test: prints figures. What runs is what production runs: the simulator serves a 1,000-node /
8,000-GPU / 20,000-pod KAI cluster on loopback (the simulation driver, ``harness``, serves it and runs the
sweeps); one inventory sweep fills PostgreSQL; gunicorn serves
rcaweb; a real `celery worker` on Redis runs the tasks (grouping → evidence collection from the
simulator's Kubernetes and Prometheus APIs → diagnosis). Each alert (GPUJobPendingTooLong on a
different pending job) is posted to the webhook, and the clock stops when its incident has
``diagnosed_at`` set. Target: p95 ≤ 2 s at 1,213 nodes (issue 20; ≤ 5 s at 1,000 nodes before it).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_bench_latency REDIS_URL=redis://127.0.0.1:6379/5 \
        .venv/bin/python bench/latency.py [--nodes 1000] [--pods 20000] [--alerts 20]

``--evidence`` (issue 16 item 6, issue 20 item 4) measures what one incident costs once grouped: evidence
collection (the simulator's Kubernetes API for logs, its Prometheus for the DCGM series) plus the diagnosis,
per incident, in this process on PostgreSQL, at each size of ``--sizes`` (nodes; 20 pods per node). Alerts
of three kinds, ``--alerts`` of each: a pending job (GPUJobPendingTooLong), an idle allocated GPU
(GPUIdleAllocated, the pod's job), an Xid on a GPU that runs a pod (GPUXidError). The time per incident is
``diagnosed_at - collected_at`` (the collection stamps its start). Target: p95 <= 2 s at 1,000 nodes.
It also prints p50/p95 per stage: evidence from the inventory (alerts, states, events, changes), from
Kubernetes (previous logs), from Prometheus (DCGM series), storing the evidence; the diagnosis input, the
checks, storing the diagnosis; and the load average (the machine may be shared).

What is bounded, and how (docs/diagnosis.md "Bounded by the incident"): the evidence is the incident's
subjects and related objects, its GPUs' series in one query per metric, shared with the collections of the
same problem for RCAWEB_EVIDENCE_SHARE_S (Prometheus answers, pod logs). The diagnosis input reads the
fleet one query per kind, the rows the checks need of every node, GPU and unfinished pod, the incident's own
jobs in full and every other job by a few keys, and only the changes the checks can read; the fleet rows are
read once per sweep and shared by the diagnoses that follow. Each size starts from one sweep, so after the
first incident the fleet rows are shared; the first incident of each size pays for them.

        .venv/bin/python bench/latency.py --evidence [--sizes 200,1000] [--alerts 10]

``--evidence --rediagnose`` then times each open incident's re-diagnosis after a sweep, as
``rediagnose_changed`` runs it (a new moment, kept only if the answer differs). Target: p95 <= 1 s at 1,213 nodes
with 100 open incidents (``--sizes 1213 --alerts 34``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent
TOKEN = "bench-latency-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_database(url: str) -> None:
    import psycopg

    p = urlparse(url)
    name = p.path.lstrip("/")
    with psycopg.connect(
        host=p.hostname,
        port=p.port or 5432,
        user=p.username or "postgres",
        dbname="postgres",
        autocommit=True,
    ) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def analyze() -> None:
    """Planner statistics for the rows the first sweep bulk-loaded, as autovacuum keeps them in production: a
    server run with autovacuum off (some test machines) would otherwise plan every read blind."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE")


def evidence_bench(sizes: list[int], per_kind: int, as_json: bool, rediagnose: bool = False) -> int:
    """Evidence + diagnosis per incident, at each cluster size (in this process, Celery eager, sync)."""
    os.environ.update({"RCAWEB_CELERY_EAGER": "true", "RCAWEB_INLINE_PROCESSING": "sync"})
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    from collectors.models import Cluster
    from harness.driver import Harness
    from incidents import evidence
    from incidents.intake import ingest_alertmanager
    from incidents.models import Alert, Incident
    from simulator.engine.big import build_big_world

    call_command("migrate", verbosity=0)
    from incidents import batch_reads, diagnosis_run, pod_logs, telemetry

    diagnosis_s: dict[int, float] = {}  # incident -> seconds in the diagnosis (the rest is evidence)
    stage_s: dict[str, float] = {}  # stage -> seconds, for the incident being processed
    stage_cpu: dict[
        str, float
    ] = {}  # stage -> CPU seconds of this process (what a loaded machine inflates less)
    run_diagnosis = evidence.run_diagnosis

    def timed_diagnosis(incident_id: int) -> None:
        t0 = time.perf_counter()
        try:
            run_diagnosis(incident_id)
        finally:
            diagnosis_s[incident_id] = time.perf_counter() - t0

    def timed(module: object, name: str, stage: str) -> None:
        inner = getattr(module, name)

        def wrapper(*args: object, **kwargs: object) -> object:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                stage_s[stage] = stage_s.get(stage, 0.0) + time.perf_counter() - t0
                stage_cpu[stage] = stage_cpu.get(stage, 0.0) + time.process_time() - c0

        setattr(module, name, wrapper)

    evidence.run_diagnosis = timed_diagnosis
    # Where the time goes, per incident: each stage as the pipeline calls it (module globals, so patched there).
    for name in ("collect_alerts", "collect_states", "collect_events", "collect_changes"):
        timed(evidence, name, "evidence inventory")
    timed(pod_logs, "collect_logs", "evidence Kubernetes")
    timed(telemetry, "collect_dcgm", "evidence Prometheus")
    timed(evidence, "save", "evidence store")
    timed(diagnosis_run, "load_incident_input", "diagnosis input")
    timed(diagnosis_run, "run_checks", "diagnosis checks")
    timed(diagnosis_run, "persist", "diagnosis store")
    results = []
    for nodes in sizes:
        Incident.objects.all().delete()
        Alert.objects.all().delete()
        Cluster.objects.all().delete()
        t0 = time.perf_counter()
        world = build_big_world(nodes=nodes, pods=20 * nodes)
        print(
            f"{nodes} nodes: {sum(len(n.gpus) for n in world.nodes.values())} GPUs, {len(world.pods)} pods, "
            f"built in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        with Harness(world) as harness:
            harness.register()
            t0 = time.perf_counter()
            harness.sweep(events=True)
            print(f"  first sweep {time.perf_counter() - t0:.1f} s", flush=True)
            analyze()
            alerts = _bench_alerts(world, per_kind)
            per: dict[str, list[float]] = {}
            evid: list[float] = []
            diag: list[float] = []
            stages: dict[str, list[float]] = {}
            cpu: dict[str, list[float]] = {}
            for i, (kind, labels) in enumerate(alerts):
                body = {
                    "status": "firing",
                    "labels": {"cluster": world.cluster_name, **labels},
                    "annotations": {"summary": kind},
                    "startsAt": world.now.isoformat().replace("+00:00", "Z"),
                    "endsAt": "0001-01-01T00:00:00Z",
                    "generatorURL": "",
                    "fingerprint": f"{nodes:04x}{i:012x}",
                }
                payload = {
                    "version": "4",
                    "groupKey": f"bench:{nodes}:{i}",
                    "truncatedAlerts": 0,
                    "status": "firing",
                    "receiver": "rcaweb",
                    "groupLabels": {"alertname": labels["alertname"]},
                    "commonLabels": {},
                    "commonAnnotations": {},
                    "externalURL": "http://alertmanager.bench:9093",
                    "alerts": [body],
                }
                stage_s.clear()
                stage_cpu.clear()
                ingest_alertmanager(payload)  # grouping, evidence, diagnosis inline (sync)
                inc = Incident.objects.filter(alerts__fingerprint=body["fingerprint"]).first()
                if inc is None or inc.diagnosed_at is None or inc.collected_at is None:
                    print(f"  {kind} {i}: not diagnosed", flush=True)
                    continue
                took = (inc.diagnosed_at - inc.collected_at).total_seconds()
                per.setdefault(kind, []).append(took)
                dx = diagnosis_s.get(inc.pk, 0.0)
                evid.append(max(took - dx, 0.0))
                diag.append(dx)
                for stage, secs in stage_s.items():
                    stages.setdefault(stage, []).append(secs)
                    cpu.setdefault(stage, []).append(stage_cpu.get(stage, 0.0))
                print(
                    f"  {kind:22s} incident {inc.pk}: evidence+diagnosis {took:.2f} s (evidence "
                    f"{took - dx:.2f} s, diagnosis {dx:.2f} s; {inc.observations.count()} observations)",
                    flush=True,
                )
            redx: list[float] = []
            redx_cpu: list[float] = []
            if rediagnose:
                # The re-diagnosis that follows a sweep (incidents.diagnosis_run.rediagnose_changed): each open
                # incident diagnosed again as of a later moment, kept only if its answer differs. The world is not
                # advanced: what is timed is one incident's re-diagnosis over the fleet a sweep left.
                harness.sweep()
                later = world.now + timedelta(minutes=30)
                # One batch, as rediagnose_changed runs it: the fleet's history and changes are read once
                # (incidents.batch_reads), by the first waiting job's incident, whose time includes them.
                with batch_reads.shared_reads():
                    for inc_id in Incident.objects.exclude(status="resolved").values_list("pk", flat=True):
                        t0, c0 = time.perf_counter(), time.process_time()
                        diagnosis_run.diagnose_incident(
                            inc_id, later, trigger="recheck", only_if_changed=True
                        )
                        redx.append(time.perf_counter() - t0)
                        redx_cpu.append(time.process_time() - c0)
                print(
                    f"  re-diagnosis of {len(redx)} open incidents: p50 {percentile(redx, 50):.2f} s "
                    f"p95 {percentile(redx, 95):.2f} s (CPU p95 {percentile(redx_cpu, 95):.2f} s)",
                    flush=True,
                )
        every = [v for vs in per.values() for v in vs]
        row = {
            "rediagnosis_incidents": len(redx),
            "rediagnosis_p50_s": round(percentile(redx, 50), 2) if redx else None,
            "rediagnosis_p95_s": round(percentile(redx, 95), 2) if redx else None,
            "rediagnosis_cpu_p95_s": round(percentile(redx_cpu, 95), 2) if redx_cpu else None,
            "nodes": nodes,
            "incidents": len(every),
            "p50_s": round(percentile(every, 50), 2) if every else None,
            "p95_s": round(percentile(every, 95), 2) if every else None,
            "max_s": round(max(every), 2) if every else None,
            "evidence_p50_s": round(percentile(evid, 50), 2) if evid else None,
            "evidence_p95_s": round(percentile(evid, 95), 2) if evid else None,
            "diagnosis_p50_s": round(percentile(diag, 50), 2) if diag else None,
            "diagnosis_p95_s": round(percentile(diag, 95), 2) if diag else None,
            "stages": {
                k: {
                    "p50_s": round(percentile(v, 50), 3),
                    "p95_s": round(percentile(v, 95), 3),
                    "cpu_p50_s": round(percentile(cpu[k], 50), 3),
                    "cpu_p95_s": round(percentile(cpu[k], 95), 3),
                }
                for k, v in stages.items()
            },
            "load_average": round(os.getloadavg()[0], 1),
            "by_kind": {
                k: {"p50_s": round(percentile(v, 50), 2), "max_s": round(max(v), 2)} for k, v in per.items()
            },
        }
        results.append(row)
    if as_json:
        print(json.dumps({"bench": "evidence", "sizes": results}))
    else:
        print(
            "\nevidence + diagnosis per incident (PostgreSQL, simulator on loopback; target p95 <= 2 s at 1,000 nodes)"
        )
        for r in results:
            kinds = ", ".join(f"{k} p50 {v['p50_s']} s max {v['max_s']} s" for k, v in r["by_kind"].items())
            print(
                f"  {r['nodes']:>5} nodes: p50 {r['p50_s']} s   p95 {r['p95_s']} s   max {r['max_s']} s   "
                f"({r['incidents']} incidents; {kinds})"
            )
            print(
                f"         of which evidence p50 {r['evidence_p50_s']} s p95 {r['evidence_p95_s']} s, "
                f"diagnosis p50 {r['diagnosis_p50_s']} s p95 {r['diagnosis_p95_s']} s"
            )
            for stage, v in r["stages"].items():
                print(
                    f"         {stage:20s} p50 {v['p50_s']:.3f} s  p95 {v['p95_s']:.3f} s   "
                    f"(CPU of this process p50 {v['cpu_p50_s']:.3f} s  p95 {v['cpu_p95_s']:.3f} s)"
                )
            if r["rediagnosis_incidents"]:
                print(
                    f"         re-diagnosis after a sweep ({r['rediagnosis_incidents']} open incidents; target p95 <= "
                    f"1 s at 1,213 nodes with 100): p50 {r['rediagnosis_p50_s']} s p95 {r['rediagnosis_p95_s']} s "
                    f"(CPU p95 {r['rediagnosis_cpu_p95_s']} s)"
                )
            print(f"         load average (1m) after this size: {r['load_average']}")
        print(f"  load average (1m) {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0 if all(r["incidents"] for r in results) else 1


def _bench_alerts(world, per_kind: int) -> list[tuple[str, dict[str, str]]]:  # type: ignore[no-untyped-def]
    """Spread over the cluster: pending jobs, GPUs that run a pod (idle, Xid)."""
    pending = sorted((j for j in world.jobs.values() if j.state == "Pending"), key=lambda j: j.name)
    held = sorted(
        ((n, g) for n in world.nodes.values() for g in n.gpus if g.pod and g.pod in world.pods),
        key=lambda ng: (ng[0].name, ng[1].index),
    )
    out: list[tuple[str, dict[str, str]]] = []
    for j in pending[:: max(1, len(pending) // per_kind)][:per_kind]:
        out.append(
            (
                "pending job",
                {
                    "alertname": "GPUJobPendingTooLong",
                    "severity": "warning",
                    "namespace": j.namespace,
                    "job_name": j.name,
                    "project": j.project,
                    "queue": j.project,
                },
            )
        )
    step = max(1, len(held) // (2 * per_kind))
    picks = held[::step][: 2 * per_kind]
    for k, (node, gpu) in enumerate(picks):
        base = {"node": node.name, "Hostname": node.name, "gpu": str(gpu.index), "UUID": gpu.uuid}
        if k % 2 == 0:
            pod = world.pods[gpu.pod]
            job = world.jobs[pod.job]
            out.append(
                (
                    "idle allocated GPU",
                    {
                        "alertname": "GPUIdleAllocated",
                        "severity": "info",
                        **base,
                        "namespace": job.namespace,
                        "job_name": job.name,
                        "pod": pod.name,
                        "project": job.project,
                    },
                )
            )
        else:
            out.append(
                (
                    "Xid on a busy GPU",
                    {"alertname": "GPUXidError", "severity": "critical", **base, "xid": "48"},
                )
            )
    return out


def main() -> int:
    if "--evidence" in sys.argv:
        ap = argparse.ArgumentParser(description="evidence + diagnosis per incident")
        ap.add_argument("--evidence", action="store_true")
        ap.add_argument("--sizes", default="200,1000")
        ap.add_argument("--alerts", type=int, default=10, help="alerts of each kind per size")
        ap.add_argument("--json", action="store_true")
        ap.add_argument(
            "--rediagnose",
            action="store_true",
            help="then time each open incident's re-diagnosis after a sweep (issue 40: p95 <= 1 s at 1,213 nodes, "
            "100 incidents: --sizes 1213 --alerts 34)",
        )
        a = ap.parse_args()
        os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcaweb_bench_evidence")
        os.environ.update(
            {
                "DJANGO_SETTINGS_MODULE": "rcaweb.settings",
                "RCAWEB_LOG_LEVEL": "WARNING",
                "RCAWEB_SECRET_KEY": os.environ.get("RCAWEB_SECRET_KEY", "bench-only-secret"),
            }
        )
        ensure_database(os.environ["DATABASE_URL"])
        return evidence_bench([int(x) for x in a.sizes.split(",")], a.alerts, a.json, a.rediagnose)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--alerts", type=int, default=20)
    ap.add_argument(
        "--timeout", type=float, default=60.0, help="give up on one alert after this many seconds"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcaweb_bench_latency")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/5")
    if not os.environ["DATABASE_URL"].startswith("postgres"):
        print(
            "bench/latency.py measures the production path: DATABASE_URL must be PostgreSQL", file=sys.stderr
        )
        return 2
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "rcaweb.settings",
            "RCAWEB_SECRET_KEY": os.environ.get("RCAWEB_SECRET_KEY", "bench-only-secret"),
            "RCAWEB_WEBHOOK_TOKEN": TOKEN,
            "RCAWEB_CELERY_EAGER": "false",
            "RCAWEB_PLAIN_STATIC": "true",
            "RCAWEB_LOG_LEVEL": "WARNING",
        }
    )
    ensure_database(os.environ["DATABASE_URL"])

    import django

    django.setup()
    import redis
    from django.core.management import call_command

    from harness.driver import Harness
    from incidents.models import Alert, Incident
    from simulator.engine.big import build_big_world

    call_command("migrate", verbosity=0)
    Incident.objects.all().delete()
    Alert.objects.all().delete()
    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()

    t0 = time.perf_counter()
    world = build_big_world(nodes=args.nodes, pods=args.pods)
    print(
        f"world: {len(world.nodes)} nodes, {sum(len(n.gpus) for n in world.nodes.values())} GPUs, "
        f"{len(world.pods)} pods, built in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    procs: list[subprocess.Popen] = []
    harness = Harness(world).start()
    try:
        harness.register()
        t0 = time.perf_counter()
        summary = harness.sweep()
        assert summary is not None  # an inventory sweep was asked for
        print(f"first sweep: {time.perf_counter() - t0:.1f} s ({summary.line()})", flush=True)
        analyze()

        port = free_port()
        env = dict(os.environ)
        procs.append(
            subprocess.Popen(
                [
                    str(BIN / "gunicorn"),
                    "rcaweb.wsgi:application",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    "2",
                    "--log-level",
                    "warning",
                ],
                cwd=ROOT,
                env=env,
                start_new_session=True,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    str(BIN / "celery"),
                    "-A",
                    "rcaweb",
                    "worker",
                    "--concurrency",
                    "2",
                    "--loglevel",
                    "WARNING",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                cwd=ROOT,
                env=env,
                start_new_session=True,
            )
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("gunicorn did not come up")
                time.sleep(0.2)
        time.sleep(3)  # let the worker connect to the broker before the first alert

        pending = sorted((j for j in world.jobs.values() if j.state == "Pending"), key=lambda j: j.name)
        step = max(1, len(pending) // max(1, args.alerts))
        chosen = pending[::step][: args.alerts]
        latencies: list[float] = []
        failures = 0
        for i, job in enumerate(chosen):
            fp = f"{i:016x}"
            alert = {
                "status": "firing",
                "labels": {
                    "alertname": "GPUJobPendingTooLong",
                    "severity": "warning",
                    "cluster": world.cluster_name,
                    "namespace": job.namespace,
                    "job_name": job.name,
                    "project": job.project,
                },
                "annotations": {"summary": f"{job.namespace}/{job.name} pending"},
                "startsAt": world.now.isoformat().replace("+00:00", "Z"),
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus.bench:9090/graph",
                "fingerprint": fp,
            }
            payload = {
                "version": "4",
                "groupKey": f'{{}}:{{alertname="GPUJobPendingTooLong",n="{i}"}}',
                "truncatedAlerts": 0,
                "status": "firing",
                "receiver": "rcaweb",
                "groupLabels": {"alertname": "GPUJobPendingTooLong"},
                "commonLabels": alert["labels"],
                "commonAnnotations": alert["annotations"],
                "externalURL": "http://alertmanager.bench:9093",
                "alerts": [alert],
            }
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/api/v1/alerts/alertmanager",
                data=json.dumps(payload).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                method="POST",
            )
            start = time.perf_counter()
            urllib.request.urlopen(req, timeout=30).read()
            done = None
            while time.perf_counter() - start < args.timeout:
                inc = Incident.objects.filter(alerts__fingerprint=fp, diagnosed_at__isnull=False).first()
                if inc is not None:
                    done = time.perf_counter() - start
                    break
                time.sleep(0.05)
            if done is None:
                failures += 1
                print(f"  alert {i}: not diagnosed within {args.timeout:g} s", flush=True)
            else:
                latencies.append(done)
                print(f"  alert {i}: {job.namespace}/{job.name} diagnosed in {done:.2f} s", flush=True)
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=15)
            except Exception:
                os.killpg(p.pid, signal.SIGKILL)
        harness.close()

    result = {
        "bench": "latency",
        "nodes": args.nodes,
        "pods": args.pods,
        "alerts": len(latencies),
        "failures": failures,
        "p50_s": round(percentile(latencies, 50), 2) if latencies else None,
        "p95_s": round(percentile(latencies, 95), 2) if latencies else None,
        "max_s": round(max(latencies), 2) if latencies else None,
        "mean_s": round(statistics.mean(latencies), 2) if latencies else None,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"\nalert -> diagnosed incident ({args.nodes} nodes, real Celery worker on Redis, PostgreSQL)")
        print(
            f"  p50 {result['p50_s']} s   p95 {result['p95_s']} s   max {result['max_s']} s   "
            f"({len(latencies)} alerts, {failures} not diagnosed)   target p95 <= 2 s at 1,213 nodes "
            f"(issue 20; <= 5 s at 1,000 before it): {'meets' if latencies and result['p95_s'] <= 2 else 'misses'}"
        )
    return 0 if latencies and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
