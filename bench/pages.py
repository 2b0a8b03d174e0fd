"""Page render times on a busy simulated cluster: home, incident, job, node, fleet vs a one-query floor.

Not a test: prints figures. Runs the bundled 12-hour demo scenario (≥ 24 nodes, ≥ 150 jobs, overlapping
incidents) through the real pipeline into the configured database (once; ``--rebuild`` to redo), then
renders each page through the Django test client, logged in, as of the last incident's onset, and
compares the median with a trivial view that runs one query (the floor). Also prints query counts.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_bench_pages .venv/bin/python bench/pages.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcaweb_bench_pages")
    os.environ.update({"DJANGO_SETTINGS_MODULE": "rcaweb.settings", "RCAWEB_PLAIN_STATIC": "true",
                       "RCAWEB_SECRET_KEY": os.environ.get("RCAWEB_SECRET_KEY", "bench-only-secret"),
                       "RCAWEB_LOG_LEVEL": "WARNING", "RCAWEB_SECURE_COOKIES": "false"})
    os.environ.pop("REDIS_URL", None)  # the pipeline runs inline while building the data set
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

    from collectors.models import Entity
    from incidents.models import Incident
    from rcaweb.cursor import format_t

    settings.ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
    call_command("migrate", verbosity=0)
    if args.rebuild or not Incident.objects.exists():
        from incidents.scenario_run import run_scenario_file

        Incident.objects.all().delete()
        t0 = time.perf_counter()
        result = run_scenario_file(str(ROOT / "collectors/sim/scenarios/demo.yaml"))
        print(f"demo scenario through the pipeline: {time.perf_counter() - t0:.0f} s, "
              f"{len(result.incidents)} incidents", flush=True)

    user, _ = User.objects.get_or_create(username="bench", defaults={"is_staff": True})
    client = Client()
    client.force_login(user)
    inc = Incident.objects.order_by("-onset").first()
    t = format_t(inc.onset)
    job = Entity.objects.filter(kind="job").order_by("id").first()
    node = Entity.objects.filter(kind="node").order_by("name").first()
    pages = {
        "home": "/",
        "incident": inc.get_absolute_url(),
        "job": job.get_absolute_url(),
        "node": node.get_absolute_url(),
        "fleet": "/fleet/",
    }

    def measure(path: str) -> tuple[float, int]:
        url = f"{path}?t={t}&w=2h" if path != "/healthz" else path
        client.get(url)  # warm
        times = []
        for _ in range(args.samples):
            t0 = time.perf_counter()
            r = client.get(url)
            times.append(time.perf_counter() - t0)
            assert r.status_code == 200, (url, r.status_code)
        with CaptureQueriesContext(connection) as ctx:
            client.get(url)
        return statistics.median(times), len(ctx.captured_queries)

    # The floor: the cheapest authenticated page the app serves (session + user + one query).
    floor, floor_q = measure("/healthz")
    rows = {name: measure(path) for name, path in pages.items()}
    result = {"bench": "pages", "database": connection.vendor, "floor_ms": round(floor * 1000, 2), "floor_queries": floor_q,
              "pages": {k: {"median_ms": round(v[0] * 1000, 1), "x_floor": round(v[0] / floor, 1), "queries": v[1]}
                        for k, v in rows.items()}}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"database: {connection.vendor}; cursor at {t}; floor (/healthz) {floor * 1000:.1f} ms, {floor_q} queries")
        print(f"{'page':10} {'median ms':>10} {'x floor':>8} {'queries':>8}")
        for name, (med, q) in rows.items():
            print(f"{name:10} {med * 1000:10.1f} {med / floor:8.1f} {q:8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
