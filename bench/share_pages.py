"""The pages that show GPU shares and MIG instances, on a simulated sharing cluster, against their whole-GPU twins.

Not a test: prints figures (median and p95 per page, database queries, bytes). A bundled scenario with KAI GPU
sharing and MIG (default: shared-mig-department-crashloop; the demo's ``demo.yaml`` works too) runs to
``--at`` in the simulator, the simulation driver (``harness``) serves it and the real collectors sweep it once
into a private SQLite file (or ``DATABASE_URL``), and each page is rendered through the Django test client,
logged in, as of that moment: the node holding the most shares, one of its shared GPUs, a fractional job and
its pod, a MIG job, their project, the job list, and a whole-GPU node and job for comparison. A shared page
should cost what its whole twin costs, give or take the one or two queries docs/design.md names (the pods of a
share's node on the job and pod pages).

    .venv/bin/python bench/share_pages.py [--scenario FILE] [--at 1h] [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from usage import timed  # noqa: E402  (bench/usage.py: the same timing of a page through the test client)


def setup_django(db: Path) -> None:
    os.environ.setdefault("RCAWEB_DEBUG", "true")
    os.environ.setdefault("RCAWEB_PLAIN_STATIC", "true")
    os.environ.setdefault("RCAWEB_LOG_LEVEL", "WARNING")
    if "DATABASE_URL" not in os.environ:
        os.environ["RCAWEB_SQLITE_PATH"] = str(db)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)


def pages(cluster: str, q: str) -> dict[str, str]:
    """The pages to time, picked from the swept inventory at the cursor."""
    from collectors.models import EntityVersion
    from rcaweb.cursor import parse_t

    t = parse_t(q.split("t=", 1)[1].split("&", 1)[0])
    at = EntityVersion.objects.as_of(t).filter(cluster__name=cluster).select_related("entity")
    gpus = list(at.filter(kind="gpu"))
    shared = max(gpus, key=lambda g: len(g.state.get("shares") or []))
    whole = next((g for g in gpus if g.pod and not g.state.get("shares") and not g.state.get("mig")), None)
    pods = list(at.filter(kind="pod", phase="Running").exclude(node=""))
    share_pod = next(p for p in pods if (p.state.get("gpu_share") or {}) and p.node == shared.node)
    mig_pod = next((p for p in pods if p.state.get("mig")), None)
    whole_pod = next(
        (p for p in pods if (p.gpus or 0) > 0 and p.entity.namespace != "runai-reservation"), None
    )
    out = {
        "shared node": f"/c/{cluster}/nodes/{shared.node}/?{q}",
        "shared gpu": f"/c/{cluster}/gpus/{shared.entity.name}/?{q}",
        "share job": f"/c/{cluster}/jobs/{share_pod.entity.namespace}/{share_pod.job}/?{q}",
        "share pod": f"/c/{cluster}/pods/{share_pod.entity.namespace}/{share_pod.entity.name}/?{q}",
        "share project": f"/c/{cluster}/projects/{share_pod.project}/?{q}",
        "job list": f"/c/{cluster}/jobs/?{q}",
    }
    if mig_pod is not None:
        out["mig job"] = f"/c/{cluster}/jobs/{mig_pod.entity.namespace}/{mig_pod.job}/?{q}"
    if whole is not None:
        out["whole node"] = f"/c/{cluster}/nodes/{whole.node}/?{q}"
        out["whole gpu"] = f"/c/{cluster}/gpus/{whole.entity.name}/?{q}"
    if whole_pod is not None:
        out["whole job"] = f"/c/{cluster}/jobs/{whole_pod.entity.namespace}/{whole_pod.job}/?{q}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenario", default=str(ROOT / "simulator/scenarios/shared-mig-department-crashloop.yaml")
    )
    parser.add_argument("--at", default="1h", help="how far into the scenario the cursor is (e.g. 1h)")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    setup_django(Path(tempfile.mkdtemp(prefix="rcaweb-share-bench-")) / "db.sqlite3")
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
    q = f"t={format_t(world.now)}&w=2h"
    print(f"{'page':14} {'median ms':>10} {'p95 ms':>8} {'queries':>8} {'bytes':>8}  url")
    for name, url in pages(cluster.name, q).items():
        f = timed(client, url, args.runs)
        print(f"{name:14} {f['median_ms']:10.1f} {f['p95_ms']:8.1f} {f['queries']:8d} {f['bytes']:8d}  {url}")


if __name__ == "__main__":
    main()
