"""What building rows without ``Model.__init__`` saves (``collectors.storage.raw_sql.instance`` against ``Model.from_db``).

Not a test: prints figures. Builds the same EntityVersion (every concrete field, values already converted)
both ways, N times each, in rounds, and prints the CPU time per row (``time.process_time``, least of the
rounds) and what a node page's rows cost either way (a node page builds about 60 such instances).
No database is touched: neither path queries.

    RCAWEB_DEBUG=true .venv/bin/python bench/model_rows.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20_000, help="rows per round")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
    import django

    django.setup()
    from collectors.models import EntityVersion
    from collectors.storage import raw_sql as readsql

    now = datetime(2026, 12, 2, tzinfo=UTC)
    sample = {
        "id": 1, "entity_id": 2, "cluster_id": 3, "kind": "pod", "valid_from": now, "valid_to": None,
        "deleted": False, "state": {"phase": "Running"}, "state_hash": "x" * 32, "phase": "Running",
        "node": "h100-01", "namespace": "vision", "queue": "vision", "project": "vision", "job": "resnet",
        "pod": "", "gpus": 8, "gpus_allocatable": None, "gpu_units": 8.0, "ready": True, "priority": None,
        "submitted": None,
    }  # fmt: skip
    fields = [f.attname for f in EntityVersion._meta.concrete_fields]
    values = [sample.get(a) for a in fields]
    best = {"instance": float("inf"), "from_db": float("inf")}
    for _ in range(args.rounds):
        for name, build in (
            ("instance", lambda: readsql.instance(EntityVersion, fields, values)),
            ("from_db", lambda: EntityVersion.from_db("default", fields, values)),
        ):
            t0 = time.process_time()
            for _ in range(args.n):
                build()
            best[name] = min(best[name], (time.process_time() - t0) / args.n)
    for name, per_row in best.items():
        print(f"{name:9s} {per_row * 1e6:6.2f} µs a row   60 rows (a node page): {per_row * 60e3:5.2f} ms")
    print(
        f"saved     {(best['from_db'] - best['instance']) * 1e6:6.2f} µs a row; load {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
