"""The queues page ``/c/<cluster>/queues/?t=…&w=…``: queues and departments now (issue 44, item 5).

For each queue (KAI Queue / Kueue ClusterQueue) and department (KAI parent queue / Kueue Cohort): deserved
(nominal) quota, limit (borrowing limit), allocation and fair share at t (``incidents.diagnosis.fairshare`` over
the state at t and the cluster's scheduling pass), the same averaged over the window (one aggregate query over
the stored versions), over-quota use, who is starved and who borrows while others starve, and the jobs each
waits on, in the cluster's order, with what the pass says of each.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.db.models import Case, F, FloatField, Func, Q, Sum, Value, When
from django.db.models.functions import Cast, Coalesce, Greatest, Least
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors.models import Cluster, EntityVersion
from incidents.diagnosis.fairshare import Shares, Standing, fill, judge, shares
from incidents.diagnosis.scheduling_pass import cluster_pass
from incidents.diagnosis_input import load_cluster_input
from rcaweb.cursor import Cursor
from rcaweb.durations import format_duration
from rcaweb.http import RcaRequest
from web.inventory.entity_page import render_page

logger = logging.getLogger(__name__)

CURSOR_PARAMS = ("t", "w")  # the page's only parameters
SHOWN_WAITING = 8  # waiting jobs named per queue; the count links to the filtered job list


class Epoch(Func):
    """Seconds since the epoch of a timestamp expression (PostgreSQL EXTRACT, SQLite julianday)."""

    output_field = FloatField()
    template = "EXTRACT(EPOCH FROM %(expressions)s)"

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return super().as_sql(
            compiler, connection, template="(julianday(%(expressions)s) * 86400.0)", **extra
        )


def window_sums(
    cluster: Cluster, start: datetime, end: datetime
) -> dict[tuple[str, str, str], dict[str, float]]:
    """(kind, queue, project) -> GPU-seconds over [start, end] of what the stored versions say: running pods'
    units, waiting jobs' units, queues' and departments' quota and limit, nodes' allocatable GPUs, and the
    seconds each kind was present. One aggregate query, whatever the size of the cluster or its history."""
    lo, hi = Value(start), Value(end)
    secs = Epoch(Least(Coalesce(F("valid_to"), hi), hi)) - Epoch(Greatest(F("valid_from"), lo))
    units = Coalesce(F("gpu_units"), Cast(F("gpus"), FloatField()))
    rows = (
        EntityVersion.objects.overlapping(start, end)
        .filter(cluster=cluster, deleted=False)
        .filter(
            (Q(kind="pod", phase="Running") & ~Q(node=""))
            | Q(kind="job", phase="Pending")
            | Q(kind__in=("queue", "department", "project"))
            | Q(kind="node", ready=True)
        )
        .values("kind", "queue", "project")
        .annotate(
            s_units=Sum(units * secs),
            s_gpus=Sum(Cast(F("gpus"), FloatField()) * secs),
            s_limit=Sum(Cast(F("gpus_allocatable"), FloatField()) * secs),
            s_with_gpus=Sum(Case(When(gpus__isnull=False, then=secs), default=Value(0.0))),
            s_with_limit=Sum(Case(When(gpus_allocatable__isnull=False, then=secs), default=Value(0.0))),
        )
    )
    return {
        (r["kind"], r["queue"], r["project"]): {
            k: float(r["s_" + k] or 0.0) for k in ("units", "gpus", "limit", "with_gpus", "with_limit")
        }
        for r in rows
    }


def over_window(
    now: Shares, sums: dict[tuple[str, str, str], dict[str, float]], seconds: float, kueue: bool
) -> Shares:
    """The standings of ``now`` with each figure averaged over the window: allocation and waiting units over
    the whole window, quota and limit over the time they were set, and the fair share of those averages."""
    span = max(seconds, 1.0)

    def avg(kind: str, match: Any, key: str, per: str | None = None) -> float | None:
        rows = [v for (k, q, p), v in sums.items() if k == kind and match(q, p)]
        total = sum(v[key] for v in rows)
        if per is None:
            return round(total / span, 4)
        present = sum(v[per] for v in rows)
        return round(total / present, 4) if present > 0 else None

    queues = []
    for s in now.queues:

        def mine(q: str, p: str, name: str = s.name) -> bool:
            return name in (q, p)

        queues.append(
            Standing(
                kind="queue",
                name=s.name,
                department=s.department,
                deserved=avg("queue", mine, "gpus", "with_gpus") if s.deserved is not None else None,
                limit=avg("queue", mine, "limit", "with_limit") if s.limit is not None else None,
                weight=s.weight,
                allocated=avg("pod", mine, "units") or 0.0,
                waiting_units=avg("job", mine, "units") or 0.0,
            )
        )
    departments = []
    for d in now.departments:

        def its(q: str, p: str, name: str = d.name) -> bool:
            return q == name

        departments.append(
            Standing(
                kind="department",
                name=d.name,
                department=d.department,
                deserved=avg("department", its, "gpus", "with_gpus") if d.deserved is not None else None,
                limit=avg("department", its, "limit", "with_limit") if d.limit is not None else None,
                weight=d.weight,
                allocated=round(sum(q.allocated for q in queues if q.department == d.name), 4),
                waiting_units=round(sum(q.waiting_units for q in queues if q.department == d.name), 4),
            )
        )
    capacity = avg("node", lambda q, p: True, "limit") or 0.0
    out = Shares(capacity, queues, departments)
    fill(out)
    judge(out, kueue=kueue)
    return out


@dataclass
class Row:
    """One queue or department on the page: at t and over the window."""

    now: Standing
    window: Standing
    jobs_url: str = ""  # the job list filtered to its waiting jobs (queues only)

    @property
    def name(self) -> str:
        return self.now.name


def _rows(now: list[Standing], window: list[Standing], cursor: Cursor, cluster: str) -> list[Row]:
    by_name = {s.name: s for s in window}
    jobs = reverse("collectors:jobs", args=[cluster])
    return [
        Row(
            s,
            by_name[s.name],
            cursor.link(f"{jobs}?{urlencode({'queue': s.name, 'phase': 'Pending'})}")
            if s.kind == "queue"
            else "",
        )
        for s in now
    ]


@require_GET
@vary_on_headers("HX-Request")
def queues_view(request: RcaRequest, cluster: str) -> HttpResponse:
    c = Cluster.objects.filter(name=cluster).first()
    if c is None:
        raise Http404(f"unknown cluster {cluster!r}")
    unknown = sorted(set(request.GET) - set(CURSOR_PARAMS))
    if unknown:
        return HttpResponseBadRequest(
            f"{', '.join(unknown)}: not a parameter of this page (it takes t and w)\n",
            content_type="text/plain; charset=utf-8",
        )
    cursor = request.cursor
    di = load_cluster_input(c, cursor.t)
    with di.indexed():
        cp = cluster_pass(di)
        now = shares(di, cp)
    window = over_window(
        now,
        window_sums(c, cursor.start, cursor.t),
        (cursor.t - cursor.start).total_seconds(),
        di.scheduler == "kueue",
    )
    ctx = {
        "cluster": c,
        "t": cursor.t,
        "kueue": c.scheduler == "kueue",
        "shares": now,
        "window_shares": window,
        "queues": _rows(now.queues, window.queues, cursor, c.name),
        "departments": _rows(now.departments, window.departments, cursor, c.name),
        "rule": cp.rule,
        "truncated": cp.truncated,
        "considered": len(cp.considered),
        "waiting": cp.waiting,
        "shown_waiting": SHOWN_WAITING,
        "window_words": format_duration(cursor.window),
    }
    return render_page(request, "console/queues.html", ctx)
