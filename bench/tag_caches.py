"""What each memo of web/templatetags/rcaweb.py saves a page: calls per page × (uncached − cached) cost.

Not a test: prints figures. Renders the pages of bench/pages.py (its data set: 100 open incidents on a 200-node
cluster; built there) through the Django test client, logged in, counting the calls each memoized helper gets
while a page renders and recording their arguments; then replays those calls, through the memo (warm) and
through the function it wraps, and prints per page how much CPU each memo saves. A memo that saves well under
0.1 ms on every page does not pay for its code.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_console .venv/bin/python bench/pages.py   # the data set
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_console .venv/bin/python bench/tag_caches.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200, help="replays of each page's calls")
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
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse
    from handoffs import CLUSTER

    from collectors.models import Cluster, Entity
    from incidents.models import Incident
    from rcaweb.cursor import format_t
    from web.templatetags import rcaweb as tags

    settings.ALLOWED_HOSTS = ["testserver"]
    cluster = Cluster.objects.filter(name=CLUSTER).first()
    if cluster is None:
        print(f"no data set: run bench/pages.py first (cluster {CLUSTER})")
        return 1
    client = Client()
    client.force_login(User.objects.get_or_create(username="bench", defaults={"is_staff": True})[0])
    newest = Incident.objects.filter(cluster=cluster).order_by("-onset").first()
    t = format_t(newest.onset + timedelta(minutes=5))
    job = Entity.objects.filter(cluster=cluster, kind="job", incidentsubject__incident=newest).first()
    node = Entity.objects.filter(cluster=cluster, kind="node").order_by("name").first()
    pages = {
        "home": "/",
        "incident": newest.get_absolute_url(),
        "handoffs": "/handoffs/",
        "job": job.get_absolute_url(),
        "job why-pending": reverse("collectors:job_why", args=[CLUSTER, job.namespace, job.name]),
        "node": node.get_absolute_url(),
        "fleet": "/fleet/",
        "changes": "/changes/",
        "job list": reverse("collectors:jobs", args=[CLUSTER]),
    }
    # memo name -> (the memoized callable as the module calls it, the plain computation it stands for)
    memos = {
        "cursor_query": (tags.cursor_query, tags.cursor_query.__wrapped__),
        "moved_query": (tags.moved_query, tags.moved_query.__wrapped__),
        "_reverse_memo": (tags._reverse_memo, tags._reverse_memo.__wrapped__),
        "_pill": (tags._pill, tags._pill.__wrapped__),
        "_absolute_url": (tags._absolute_url, lambda entity: entity.get_absolute_url()),
    }
    print(f"{'page':16} " + " ".join(f"{name:>14}" for name in memos) + "   (calls / ms saved a page)")
    for page, path in pages.items():
        url = f"{path}?t={t}&w=2h"
        client.get(url)  # warm
        calls: dict[str, list[tuple]] = defaultdict(list)

        def counting(name: str, fn, calls=calls):
            def wrapper(*call_args):
                calls[name].append(call_args)
                return fn(*call_args)

            return wrapper

        for name, (memo, _plain) in memos.items():
            setattr(tags, name, counting(name, memo))
        try:
            r = client.get(url)
        finally:
            for name, (memo, _plain) in memos.items():
                setattr(tags, name, memo)
        assert r.status_code == 200, (url, r.status_code)
        cells = []
        for name, (memo, plain) in memos.items():
            made = calls.get(name, [])
            if not made:
                cells.append(f"{'0 / -':>14}")
                continue
            costs = []
            for fn in (memo, plain):
                t0 = time.process_time()
                for _ in range(args.repeat):
                    for given in made:
                        fn(*given)
                costs.append((time.process_time() - t0) / args.repeat * 1000)
            cells.append(f"{len(made):>6} / {costs[1] - costs[0]:5.3f}")
        print(f"{page:16} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
