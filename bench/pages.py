"""Page render times with 100 open incidents on a 200-node / 1,600-GPU cluster: every console page.

Not a test: prints figures (median and p95 per page, query count, bytes, and the CPU time spent in Django's
template engine). The data set is bench/handoffs.py's
(built once, the way production makes it: 100 GPUJobPendingTooLong alerts through the intake and grouping on
a 200-node cluster, with ranked hypotheses, diagnosis runs, actions and handoff notes). Each page is
rendered through the Django test client, logged in, as of five minutes after the newest onset: home,
incident, handoffs, handoffs.md, a pending job and its why-pending panel (computed from the whole cluster as
of t), a node, fleet, SLO and changes. Target (issue 15): every page p95 ≤ 300 ms on PostgreSQL.

    createdb -h 127.0.0.1 -U postgres rcaweb_console
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_console .venv/bin/python bench/pages.py [--rebuild]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

TARGET_MS = 300


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", nargs="+", metavar="PAGE", help="measure only these pages (e.g. node job)")
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
    from django.urls import reverse
    from handoffs import CLUSTER, build, percentile

    from collectors.models import Cluster, Entity
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
    cluster = Cluster.objects.get(name=CLUSTER)
    newest = Incident.objects.filter(cluster=cluster).order_by("-onset").first()
    t = format_t(newest.onset + timedelta(minutes=5))
    open_at_t = Incident.objects.filter(onset__lte=newest.onset).exclude(status="resolved").count()
    related = IncidentSubject.objects.filter(incident__cluster=cluster).count()
    job = (
        Entity.objects.filter(cluster=cluster, kind="job", incidentsubject__incident=newest).first()
        or Entity.objects.filter(cluster=cluster, kind="job").order_by("id").first()
    )
    node = Entity.objects.filter(cluster=cluster, kind="node").order_by("name").first()
    pages = {
        "home": "/",
        "incident": newest.get_absolute_url(),
        "handoffs": "/handoffs/",
        "handoffs.md": "/handoffs.md",
        "job": job.get_absolute_url(),
        "job why-pending": reverse("collectors:job_why", args=[CLUSTER, job.namespace, job.name]),
        "node": node.get_absolute_url(),
        "fleet": "/fleet/",
        "slo": "/slo/",
        "changes": "/changes/",
        "what-if": reverse("console:whatif", args=[CLUSTER]),  # one pass over every waiting job, twice
    }

    # CPU time in Django's template engine per response (the least of the samples: the least disturbed by
    # other processes on a shared machine), measured around the backend template's render()
    from django.template.backends.django import Template as BackendTemplate

    rendering, depth = [0.0], [0]
    plain_render = BackendTemplate.render

    def timed_render(self, context=None, request=None):  # type: ignore[no-untyped-def]  # wraps Django's own
        depth[0] += 1
        t0 = time.process_time()
        try:
            return plain_render(self, context, request)
        finally:
            depth[0] -= 1
            if not depth[0]:  # a render_to_string inside a template is already counted
                rendering[0] += time.process_time() - t0

    BackendTemplate.render = timed_render  # type: ignore[method-assign]  # the bench times the real render

    def measure(path: str) -> tuple[float, float, int, int, float]:
        url = f"{path}?t={t}&w=2h"
        r = client.get(url)  # warm
        assert r.status_code == 200, (url, r.status_code)
        times, renders = [], []
        for _ in range(args.samples):
            rendering[0] = 0.0
            t0 = time.perf_counter()
            r = client.get(url)
            times.append(time.perf_counter() - t0)
            renders.append(rendering[0])
        with CaptureQueriesContext(connection) as ctx:
            r = client.get(url)
        return (
            statistics.median(times),
            percentile(times, 95),
            len(ctx.captured_queries),
            len(r.content),
            min(renders),
        )

    unknown = set(args.only or []) - set(pages)
    if unknown:
        ap.error(f"unknown page(s) {', '.join(sorted(unknown))}; pages: {', '.join(pages)}")
    rows = {name: measure(path) for name, path in pages.items() if not args.only or name in args.only}
    over = [k for k, v in rows.items() if v[1] * 1000 > TARGET_MS]
    result = {
        "bench": "pages",
        "database": connection.vendor,
        "open_incidents": open_at_t,
        "incident_subject_rows": related,
        "target_p95_ms": TARGET_MS,
        "over_target": over,
        "pages": {
            k: {
                "median_ms": round(v[0] * 1000, 1),
                "p95_ms": round(v[1] * 1000, 1),
                "queries": v[2],
                "render_cpu_ms": round(v[4] * 1000, 2),
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
        print(f"{'page':16} {'median ms':>10} {'p95 ms':>8} {'queries':>8} {'bytes':>9} {'render ms':>10}")
        for name, (med, p95, q, size, render) in rows.items():
            flag = "  > target" if name in over else ""
            print(
                f"{name:16} {med * 1000:10.1f} {p95 * 1000:8.1f} {q:8} {size:9} {render * 1000:10.2f}{flag}"
            )
        print(
            f"target p95 ≤ {TARGET_MS} ms: "
            + ("every page meets it" if not over else f"over: {', '.join(over)}")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
