"""What the fleet snapshot cache (``incidents.snapshot.fleet_rows``) saves each diagnosis after the first.

Not a test: prints figures. Records a fleet into the database of DATABASE_URL once (cluster ``bench-snapshot``:
``--nodes`` nodes of 8 GPUs, 20 pods per node in jobs of 4, 50 projects and queues), then times, in rounds,
a cold read of the fleet rows (``snapshot._read``, what every diagnosis would pay without the cache) and a
warm one (``fleet_rows`` answered from the cache: the two aggregate queries of its key). CPU time
(``time.process_time``) and wall time, least of the rounds, and the load average.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_kinds RCAWEB_DEBUG=true \
        .venv/bin/python bench/snapshot.py [--nodes 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLUSTER = "bench-snapshot"


def _record(cluster: object, nodes: int) -> None:
    from collectors.inventory import record_states
    from tests.collectors.factories import T0, gpu_obs, job_obs, node_obs, pod_obs, project_obs, queue_obs

    obs = []
    for p in range(50):
        obs += [
            project_obs(f"p{p}", quota=64, limit=128),
            queue_obs(f"p{p}", project=f"p{p}", quota=64, limit=128),
        ]
    for n in range(nodes):
        node = f"n{n:04d}"
        obs.append(node_obs(node))
        obs += [gpu_obs(node, i, pod=f"p{n % 50}/j{n}-{i // 4}-{i % 4}" if i < 4 else "") for i in range(8)]
        for j in range(5):  # 5 jobs of 4 pods on each node: 20 pods
            ns, job = f"p{(n + j) % 50}", f"j{n}-{j}"
            running = j == 0
            obs.append(
                job_obs(ns, job, queue=ns, phase="Running" if running else "Pending", pods=4, gpus_per_pod=1,
                        submitted=T0, active=4 if running else 0)
            )  # fmt: skip
            obs += [
                pod_obs(ns, f"{job}-{k}", job=job, queue=ns, gpus=1, phase="Running" if running else "Pending",
                        node=node if running else "")
                for k in range(4)
            ]  # fmt: skip
    record_states(cluster, obs, T0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
    import django

    django.setup()
    from collectors.models import Cluster, EntityVersion
    from incidents import snapshot
    from tests.collectors.factories import T0

    cluster, created = Cluster.objects.get_or_create(name=CLUSTER)
    if created or not EntityVersion.objects.filter(cluster=cluster, kind="node").exists():
        t0 = time.monotonic()
        _record(cluster, args.nodes)
        print(f"recorded {args.nodes} nodes in {time.monotonic() - t0:.1f} s")
    t = T0 + timedelta(minutes=5)
    rows = snapshot._read(cluster, t)
    print("rows:", {k: len(v) for k, v in rows.items()}, "total", sum(len(v) for v in rows.values()))

    def timed(fn: object) -> tuple[float, float]:
        best_cpu = best_wall = float("inf")
        for _ in range(args.rounds):
            c0, w0 = time.process_time(), time.perf_counter()
            fn()  # type: ignore[operator]
            best_cpu, best_wall = (
                min(best_cpu, time.process_time() - c0),
                min(best_wall, time.perf_counter() - w0),
            )
        return best_cpu, best_wall

    cold = timed(lambda: snapshot._read(cluster, t))
    snapshot.forget()
    snapshot.fleet_rows(cluster, t)  # fills the cache (the inventory is large enough)
    warm = timed(lambda: snapshot.fleet_rows(cluster, t))
    snapshot.forget()
    print(
        f"cold read (every diagnosis without the cache): cpu {cold[0] * 1e3:7.1f} ms  wall {cold[1] * 1e3:7.1f} ms"
    )
    print(
        f"warm hit  (the key's two aggregates):          cpu {warm[0] * 1e3:7.1f} ms  wall {warm[1] * 1e3:7.1f} ms"
    )
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
