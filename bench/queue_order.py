"""Queue-order benchmark: what the one order every "who starts first" answer reads costs at fleet scale.

Not a test: prints figures. A synthetic KAI cluster (``--nodes`` 8-GPU nodes, every one full but one node whose
device plugin withdrew its GPUs; ``--queues`` queues, in ``--departments`` departments when asked; ``--waiting``
waiting 8-GPU jobs spread over the queues) is built as a ``DiagnosisInput`` and each answer timed ``--repeat``
times inside ``di.indexed()``:

- ``order``: every waiting job through ``queue_order.QueueOrder``;
- ``jobs_ahead``: the jobs ahead of the last waiting job (a cluster pass, then the model's order beyond it);
- ``starts_with_room``: an action's impact (8 GPUs back on the faulty node), over every waiting job in order;
- ``pass_if_fixed``: a fault's fix weighed for the last waiting job;
- ``cluster_pass``: the why-pending panel's and the what-if page's pass (400 jobs considered).

    RCAWEB_DEBUG=true .venv/bin/python bench/queue_order.py [--nodes 1213] [--queues 50] [--waiting 12000]
        [--departments 0] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")

from incidents.diagnosis import fit as F  # noqa: E402
from incidents.diagnosis.ahead import jobs_ahead  # noqa: E402
from incidents.diagnosis.fault_pass import pass_if_fixed, starts_with_room  # noqa: E402
from incidents.diagnosis.pending import is_pending  # noqa: E402
from incidents.diagnosis.queue_order import QueueOrder  # noqa: E402
from incidents.diagnosis.request import job_request  # noqa: E402
from incidents.diagnosis.scheduling_pass import cluster_pass  # noqa: E402
from incidents.diagnosis.types import DiagnosisInput, EntityState, Ref  # noqa: E402

T0 = datetime(2026, 11, 29, tzinfo=UTC)


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def build(nodes: int, queues: int, waiting: int, departments: int) -> DiagnosisInput:
    node_states, pods, jobs = [], [], []
    for i in range(nodes):
        name = f"h100-{i:04d}"
        alloc = 0 if i == 0 else 8
        node_states.append(
            EntityState(
                "node",
                name,
                state={
                    "ready": True,
                    "unschedulable": False,
                    "taints": [],
                    "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.count": "8"},
                    "nodepool": "h100",
                    "capacity": {"nvidia.com/gpu": 8},
                    "allocatable": {"nvidia.com/gpu": alloc},
                },
                valid_from=T0,
            )
        )
        if i:  # every other node is full
            q = f"q{i % queues}"
            jobs.append(
                EntityState(
                    "job",
                    f"run-{i}",
                    q,
                    state={"phase": "Running", "queue": q, "project": q, "pods": 1, "gpus_per_pod": 8},
                    valid_from=T0,
                )
            )
            pods.append(
                EntityState(
                    "pod",
                    f"run-{i}-0",
                    q,
                    state={
                        "phase": "Running",
                        "node": name,
                        "job": f"run-{i}",
                        "queue": q,
                        "project": q,
                        "gpus": 8,
                    },
                    valid_from=T0,
                )
            )
    qs, depts = [], []
    for k in range(queues):
        dept = f"d{k % departments}" if departments else None
        qs.append(
            EntityState(
                "queue",
                f"q{k}",
                state={
                    "project": f"q{k}",
                    "quota_gpus": 8 * nodes // queues,
                    "over_quota_weight": 1,
                    "department": dept,
                },
                valid_from=T0,
            )
        )
    for d in range(departments):
        members = [f"q{k}" for k in range(queues) if k % departments == d]
        depts.append(
            EntityState(
                "department", f"d{d}", state={"quota_gpus": 8 * nodes // departments, "projects": members}
            )
        )
    for j in range(waiting):
        q = f"q{j % queues}"
        jobs.append(
            EntityState(
                "job",
                f"wait-{j}",
                q,
                state={
                    "phase": "Pending",
                    "active": 0,
                    "queue": q,
                    "project": q,
                    "pods": 1,
                    "gpus_per_pod": 8,
                    "priority_class": "train",
                    "submitted": _ts(T0 + timedelta(seconds=j)),
                },
                valid_from=T0,
            )
        )
    return DiagnosisInput(
        t=T0 + timedelta(days=1),
        onset=T0,
        cluster="bench",
        scheduler="kai",
        subjects=[Ref("node", "h100-0000")],
        nodes=node_states,
        pods=pods,
        jobs=jobs,
        queues=qs,
        departments=depts,
    )


def timed(label: str, fn: Callable[[], object], repeat: int) -> None:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    print(f"{label:18} median {statistics.median(runs) * 1000:8.1f} ms   max {max(runs) * 1000:8.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1213)
    ap.add_argument("--queues", type=int, default=50)
    ap.add_argument("--waiting", type=int, default=12000)
    ap.add_argument("--departments", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    di = build(args.nodes, args.queues, args.waiting, args.departments)
    print(
        f"{args.nodes} nodes, {args.queues} queues in {args.departments} departments, {args.waiting} waiting jobs"
    )
    with di.indexed():
        waiting = [j for j in di.jobs if is_pending(j)]
        last = waiting[-1]
        req = job_request(di, last)
        rows = F.node_fits(di, req)
        lifted = frozenset({F.DEVICE_PLUGIN})
        timed("order", lambda: sum(1 for _ in QueueOrder(di, waiting)), args.repeat)
        timed("jobs_ahead", lambda: jobs_ahead(di, last, cluster_pass(di)), args.repeat)
        timed("starts_with_room", lambda: starts_with_room(di, {"h100-0000": 8}), args.repeat)
        timed("pass_if_fixed", lambda: pass_if_fixed(di, last, req, rows, lifted, ["h100-0000"]), args.repeat)
        timed("cluster_pass", lambda: cluster_pass(di), args.repeat)


if __name__ == "__main__":
    main()
