"""Request vs usage on a busy simulated cluster: the "allocated but barely used" page and the workload fragments.

Not a test: prints figures (median and p95 per page, database queries, Prometheus queries). A bundled busy
scenario (default: busy-ecc-gang-kai, 18 nodes, 144 GPUs) runs to ``--at`` in the simulator, the simulation
driver (``harness``) serves it on loopback and sweeps it once with the real collectors into a private SQLite
file (or ``DATABASE_URL``), and each page is rendered through the Django test client, logged in, as of that
moment with the window ``--window``. The reads go to the simulated Prometheus, so its answer time is in the
figures. ``--shot DIR`` also serves the app and saves 1280x900 screenshots of the usage page and of a job page
whose fragment loaded (Debian's chromium, Playwright).

    .venv/bin/python bench/usage.py [--scenario FILE] [--at 3h] [--window 2h] [--runs 20] [--shot /tmp/shots]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_django(db: Path) -> None:
    os.environ.setdefault("RCAWEB_DEBUG", "true")
    os.environ.setdefault("RCAWEB_PLAIN_STATIC", "true")
    os.environ.setdefault("RCAWEB_LOG_LEVEL", "WARNING")
    os.environ.setdefault("RCAWEB_GPU_HOUR_PRICE", "2.50")
    if "DATABASE_URL" not in os.environ:
        os.environ["RCAWEB_SQLITE_PATH"] = str(db)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)


def timed(client: object, url: str, runs: int) -> dict[str, float]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    queries = 0
    for _ in range(runs):
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            r = client.get(url)  # type: ignore[attr-defined]
            times.append((time.perf_counter() - start) * 1000)
        assert r.status_code == 200, (url, r.status_code)
        queries = len(ctx.captured_queries)
    times.sort()
    return {
        "median_ms": statistics.median(times),
        "p95_ms": times[min(len(times) - 1, int(len(times) * 0.95))],
        "queries": queries,
        "bytes": len(r.content),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default=str(ROOT / "simulator/scenarios/busy-ecc-gang-kai.yaml"))
    parser.add_argument("--at", default="3h", help="how far into the scenario the cursor is (e.g. 3h)")
    parser.add_argument("--window", default="2h")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--shot", default="", help="directory for 1280x900 screenshots")
    args = parser.parse_args()

    setup_django(Path(tempfile.mkdtemp(prefix="rcaweb-usage-bench-")) / "db.sqlite3")
    from django.contrib.auth.models import User
    from django.test import Client

    from harness.driver import Harness
    from rcaweb.cursor import format_t
    from rcaweb.durations import parse_duration
    from simulator import World, load_scenario

    world = World.from_scenario(load_scenario(Path(args.scenario).read_text()))
    t0 = time.perf_counter()
    world.advance_to(world.start + parse_duration(args.at))
    print(f"scenario {Path(args.scenario).name} to {args.at}: {time.perf_counter() - t0:.1f} s")
    with Harness(world) as harness:
        harness.register()
        harness.sweep(telemetry=True)
        cluster = harness.cluster
        assert cluster is not None
        user, _ = User.objects.get_or_create(username="bench", defaults={"is_staff": True})
        client = Client()
        client.force_login(user)
        q = f"t={format_t(world.now)}&w={args.window}"
        idle = min(world.jobs.values(), key=lambda j: j.sm_activity if j.state == "Running" else 9)
        pages = {
            "usage": f"/c/{cluster.name}/usage/?{q}",
            "usage job": f"/c/{cluster.name}/usage/job/{idle.namespace}/{idle.name}/?{q}",
            "usage project": f"/c/{cluster.name}/usage/project/{idle.project}/?{q}",
        }
        print(f"{'page':16} {'median ms':>10} {'p95 ms':>8} {'queries':>8} {'bytes':>8}")
        for name, url in pages.items():
            f = timed(client, url, args.runs)
            print(f"{name:16} {f['median_ms']:10.1f} {f['p95_ms']:8.1f} {f['queries']:8d} {f['bytes']:8d}")
        if args.shot:
            shots(client, cluster.name, q, idle, Path(args.shot))


def shots(client: object, cluster: str, q: str, idle: object, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    from harness.webserver import WebServer

    out.mkdir(parents=True, exist_ok=True)
    web = WebServer("127.0.0.1:0", quiet=True)
    web.start()
    cookie = client.cookies["sessionid"].value  # type: ignore[attr-defined]
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": web.url}])
        page = context.new_page()
        page.goto(f"{web.url}/c/{cluster}/usage/?{q}", wait_until="networkidle")
        page.screenshot(path=str(out / "usage-busy.png"))
        page.screenshot(path=str(out / "usage-busy-full.png"), full_page=True)
        job = f"{web.url}/c/{cluster}/jobs/{idle.namespace}/{idle.name}/?{q}"  # type: ignore[attr-defined]
        page.goto(job, wait_until="networkidle")
        page.locator("#usage table").wait_for()
        page.locator("#usage").scroll_into_view_if_needed()
        page.screenshot(path=str(out / "usage-job-fragment.png"))
        browser.close()
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main()
