"""Handoff page and exports with 100 open incidents: /handoffs/, /handoffs.md and one incident's handoff.md.

Not a test: prints figures (median and p95 per page, and query counts). Builds, once, a 200-node / 1,600-GPU
cluster and 100 open incidents the way production makes them: each a GPUJobPendingTooLong alert through the
intake and grouping (so each pending job's incident carries its project, queue, pods and up to 64 candidate
nodes with their GPUs as related objects, ~600 rows), with ranked hypotheses, a diagnosis run and actions;
two incidents in three have a handoff note, half of those edited. Then renders each page through the
Django test client, logged in, as of the newest onset. Target (issue 15): p95 ≤ 300 ms on PostgreSQL.
The data set is ANALYZEd once built (a bulk load leaves the planner without statistics; autovacuum keeps
them in production): without statistics the ordering subqueries are planned from the wrong side.

    createdb -h 127.0.0.1 -U postgres rcaweb_console
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_console .venv/bin/python bench/handoffs.py [--rebuild]
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

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)
CLUSTER = "bench-handoffs"
NODES = 200
INCIDENTS = 100


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def build() -> None:
    """The fleet, 100 pending jobs, their alerts through intake and grouping, diagnoses and notes."""
    from collectors.inventory import Observed, record_states
    from collectors.models import Cluster
    from incidents.grouping import group_alert
    from incidents.handoffs import services
    from incidents.intake import ingest_alertmanager
    from incidents.models import Alert, DiagnosisRun, Hypothesis, Incident, ProposedAction

    cluster = Cluster.objects.create(name=CLUSTER, scheduler="kai")
    obs: list[Observed] = []
    for i in range(NODES):
        name = f"h100-{i:03d}"
        obs.append(
            Observed(
                "node",
                name,
                {
                    "ready": True,
                    "unschedulable": False,
                    "taints": [],
                    "labels": {"nodepool": "h100"},
                    "capacity": {"nvidia.com/gpu": 8},
                    "allocatable": {"nvidia.com/gpu": 8},
                },
                hot={"phase": "Ready", "ready": True, "gpus": 8, "gpus_allocatable": 8, "node": name},
            )
        )
        for g in range(8):
            uuid = f"GPU-{i:04d}{g:04d}-0000-0000-0000-000000000000"
            obs.append(
                Observed(
                    "gpu", uuid, {"node": name, "index": g, "uuid": uuid}, hot={"node": name, "phase": "ok"}
                )
            )
    for p in ("vision", "nlp", "speech", "recsys"):
        st = {"project": p, "queue": p, "namespace": p, "quota_gpus": 64, "limit_gpus": 96}
        obs += [
            Observed("project", p, st, hot={"project": p, "queue": p}),
            Observed("queue", p, st, hot={"project": p}),
        ]
    projects = ("vision", "nlp", "speech", "recsys")
    for j in range(INCIDENTS):
        ns = projects[j % 4]
        name = f"train-{j:03d}"
        obs.append(
            Observed(
                "job",
                name,
                {
                    "phase": "Pending",
                    "queue": ns,
                    "project": ns,
                    "pods": 2,
                    "gpus_per_pod": 8,
                    "gpus_total": 16,
                    "priority_class": "inference" if j % 10 == 0 else "train",
                },
                namespace=ns,
                hot={"phase": "Pending", "queue": ns, "project": ns, "gpus": 16},
            )
        )
        for k in range(2):
            obs.append(
                Observed(
                    "pod",
                    f"{name}-{k}",
                    {"phase": "Pending", "job": name},
                    namespace=ns,
                    hot={"phase": "Pending", "job": name, "queue": ns, "project": ns, "gpus": 8},
                )
            )
    record_states(cluster, obs, T0 - timedelta(hours=3))
    from django.contrib.auth.models import User

    alice, _ = User.objects.get_or_create(username="bench-alice")
    for j in range(INCIDENTS):
        ns, name = projects[j % 4], f"train-{j:03d}"
        starts = T0 + timedelta(minutes=j)
        labels = {
            "alertname": "GPUJobPendingTooLong",
            "severity": "critical" if j % 7 == 0 else "warning",
            "cluster": CLUSTER,
            "namespace": ns,
            "job_name": name,
        }
        body = {
            "status": "firing",
            "labels": labels,
            "annotations": {"summary": "GPU job pending too long"},
            "startsAt": starts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus/graph",
            "fingerprint": f"bench{j:011d}",
        }
        ingest_alertmanager(
            {
                "version": "4",
                "groupKey": "{}:{}",
                "truncatedAlerts": 0,
                "status": "firing",
                "receiver": "rcaweb",
                "groupLabels": {},
                "commonLabels": {},
                "commonAnnotations": {},
                "externalURL": "http://alertmanager",
                "alerts": [body],
            }
        )
        inc = group_alert(Alert.objects.get(fingerprint=body["fingerprint"]))
        run = DiagnosisRun.objects.create(
            incident=inc,
            at=starts,
            made_at=starts,
            top_code="project_quota_exhausted",
            top_statement=f"project {ns} uses 64 of 64 GPUs of quota",
            supported=1,
        )
        codes = [
            "project_quota_exhausted",
            "recent_change",
            "gpu_capacity_shortage",
            "gpu_fragmentation",
            "untolerated_taint",
            "node_selector_mismatch",
            "queue_priority",
            "gpu_node_unavailable",
        ]
        Hypothesis.objects.bulk_create(
            [
                Hypothesis(
                    incident=inc,
                    run=run,
                    code=c,
                    rank=r,
                    confidence=0.9 - r / 10,
                    status="supported" if r < 2 else "refuted",
                    statement=f"{c} statement " * 20,
                    next_questions=["Who cut the quota?"],
                    why="" if r < 2 else "ruled out " * 10,
                )
                for r, c in enumerate(codes)
            ]
        )
        ProposedAction.objects.create(
            incident=inc,
            run=run,
            title=f"Restore project {ns}'s quota",
            impact="i",
            verify="v",
            rollback="r",
            rank=1,
        )
        if j % 3:
            note = services.create_handoff(
                inc,
                alice,
                {
                    "summary": f"{name} waits on quota",
                    "checked": "- quota: supported",
                    "missing": "",
                    "next_steps": "- ask platform-admin",
                    "owner": "alice",
                },
            )
            if j % 2:
                services.edit_handoff(
                    note,
                    alice,
                    {
                        "summary": f"{name} still waits",
                        "checked": "- quota: supported",
                        "missing": "- audit log",
                        "next_steps": "",
                        "owner": "alice",
                    },
                )
    print(f"built {Incident.objects.filter(cluster=cluster).count()} incidents", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcaweb_console")
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "rcaweb.settings",
            "RCAWEB_PLAIN_STATIC": "true",
            "RCAWEB_SECRET_KEY": os.environ.get("RCAWEB_SECRET_KEY", "bench-only-secret"),
            "RCAWEB_LOG_LEVEL": "WARNING",
            "RCAWEB_SECURE_COOKIES": "false",
        }
    )
    os.environ.pop("REDIS_URL", None)
    if os.environ["DATABASE_URL"].startswith("postgres"):
        sys.path.insert(0, str(ROOT / "bench"))
        from latency import ensure_database

        ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from collectors.models import Cluster
    from incidents.models import Incident, IncidentSubject
    from rcaweb.cursor import format_t

    settings.ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
    call_command("migrate", verbosity=0)
    if args.rebuild:
        Incident.objects.filter(cluster__name=CLUSTER).delete()
        Cluster.objects.filter(name=CLUSTER).delete()
    if not Cluster.objects.filter(name=CLUSTER).exists():
        t0 = time.perf_counter()
        build()
        if connection.vendor == "postgresql":  # planner statistics, as autovacuum keeps them in production
            with connection.cursor() as cur:
                cur.execute("ANALYZE")
        print(f"data set: {time.perf_counter() - t0:.0f} s", flush=True)
    user, _ = User.objects.get_or_create(username="bench", defaults={"is_staff": True})
    client = Client()
    client.force_login(user)
    newest = Incident.objects.filter(cluster__name=CLUSTER).order_by("-onset").first()
    t = format_t(newest.onset + timedelta(minutes=5))
    open_at_t = Incident.objects.filter(onset__lte=newest.onset).exclude(status="resolved").count()
    related = IncidentSubject.objects.filter(incident__cluster__name=CLUSTER).count()
    pages = {
        "handoffs": "/handoffs/",
        "handoffs.md": "/handoffs.md",
        "handoff.md": f"/incidents/{newest.pk}/handoff.md",
        "handoff panel": f"/incidents/{newest.pk}/handoff/",
    }

    def measure(path: str) -> tuple[float, float, int, int]:
        url = f"{path}?t={t}&w=2h"
        client.get(url)  # warm
        times = []
        for _ in range(args.samples):
            t0 = time.perf_counter()
            r = client.get(url)
            times.append(time.perf_counter() - t0)
            assert r.status_code == 200, (url, r.status_code)
        with CaptureQueriesContext(connection) as ctx:
            r = client.get(url)
        return statistics.median(times), percentile(times, 95), len(ctx.captured_queries), len(r.content)

    rows = {name: measure(path) for name, path in pages.items()}
    result = {
        "bench": "handoffs",
        "database": connection.vendor,
        "open_incidents": open_at_t,
        "incident_subject_rows": related,
        "pages": {
            k: {
                "median_ms": round(v[0] * 1000, 1),
                "p95_ms": round(v[1] * 1000, 1),
                "queries": v[2],
                "bytes": v[3],
            }
            for k, v in rows.items()
        },
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"database: {connection.vendor}; {open_at_t} open incidents ({related} subject/related rows); t={t}"
        )
        print(f"{'page':14} {'median ms':>10} {'p95 ms':>8} {'queries':>8} {'bytes':>9}")
        for name, (med, p95, q, size) in rows.items():
            print(f"{name:14} {med * 1000:10.1f} {p95 * 1000:8.1f} {q:8} {size:9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
