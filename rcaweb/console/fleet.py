"""The GPU fleet at t: funnel, node x GPU grid, idle allocations and over-requesting jobs.

Four queries whatever the fleet size (nodes, GPUs, bound pods, one SM-activity aggregate);
everything else is arithmetic here, so tests can compare it with a direct count.

Funnel stages are nested, each a subset of the one before:
  total      every GPU known at t (including faulty and missing ones)
  healthy    phase "ok", on a Ready node whose device plugin advertises GPUs (capped at allocatable)
  allocated  healthy and held by a pod (the GPU's ``pod`` hot column, from DCGM's pod labels)
  active     allocated and SM activity near t above ACTIVE_SM
  well used  active and SM activity near t above WELL_USED_SM
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Avg, Count, OuterRef, Subquery
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from collectors.models import Cluster, EntityVersion, TelemetrySample
from rcaweb.console.common import ACTIVE_SM, SAMPLE_STEP_MIN, SM_METRIC, WELL_USED_SM
from rcaweb.cursor import Cursor

logger = logging.getLogger(__name__)

NEAR_T = timedelta(minutes=10)  # "SM activity at t" = mean of the 5-minute points in [t-10m, t]
STAGES = ("total", "healthy", "allocated", "active", "well_used")
STAGE_LABELS = {
    "total": "GPUs",
    "healthy": "healthy & allocatable",
    "allocated": "allocated",
    "active": f"active (SM > {ACTIVE_SM:.0%})",
    "well_used": f"used well (SM > {WELL_USED_SM:.0%})",
}


@dataclass
class Funnel:
    total: int = 0
    healthy: int = 0
    allocated: int = 0
    active: int = 0
    well_used: int = 0

    def add(self, cell: Cell) -> None:
        self.total += 1
        self.healthy += cell.healthy
        self.allocated += cell.healthy and cell.allocated
        self.active += cell.healthy and cell.allocated and cell.active
        self.well_used += cell.healthy and cell.allocated and cell.well_used

    def stages(self) -> list[tuple[str, str, int, float]]:
        """(stage, label, count, share of total) for the template's bars."""
        return [
            (s, STAGE_LABELS[s], getattr(self, s), (getattr(self, s) / self.total) if self.total else 0.0)
            for s in STAGES
        ]


@dataclass
class Cell:
    """One GPU in the grid."""

    version: EntityVersion
    index: int
    state: str  # free | allocated | idle | faulty | missing
    healthy: bool
    allocated: bool
    sm: float | None  # SM activity near t, None = no samples
    idle_hours: float  # GPU-hours in the window with SM below ACTIVE_SM while allocated
    pod: str = ""
    project: str = ""
    job: str = ""
    job_namespace: str = ""

    @property
    def active(self) -> bool:
        return self.sm is not None and self.sm > ACTIVE_SM

    @property
    def well_used(self) -> bool:
        return self.sm is not None and self.sm > WELL_USED_SM


@dataclass
class NodeRow:
    version: EntityVersion
    nodepool: str
    model: str
    cells: list[Cell] = field(default_factory=list)
    cordoned: bool = False
    cells_html: str = ""  # the row's GPU cells, built once in Python (with_cell_html)


@dataclass
class JobUse:
    cluster: Cluster
    namespace: str
    job: str
    project: str
    gpus: int = 0
    active: int = 0
    idle_hours: float = 0.0


@dataclass
class Fleet:
    funnel: Funnel
    by_pool: dict[str, Funnel]
    by_model: dict[str, Funnel]
    rows: list[NodeRow]
    idle: list[Cell]
    over_requesting: list[JobUse]
    allocated_by_pods: int  # cross-check: GPUs requested by pods bound to nodes (scheduler's view)


def with_cell_html(f: Fleet, cursor: Cursor) -> Fleet:
    """Each row's GPU cells as ready HTML: 1,600 GPUs at 200 nodes made the heat map most of the page's
    rendering time as template tags (measured with bench/pages.py); escaped like any template value."""
    for row in f.rows:
        parts = []
        for c in row.cells:
            title = f"GPU {c.index} · {c.state}" + (f" · {c.pod}" if c.pod else "")
            if c.sm is not None:
                title += f" · SM {round(c.sm * 100)}%"
            parts.append(
                format_html(
                    '<a class="gcell gcell-{}" href="{}" title="{}">{}</a>',
                    c.state,
                    cursor.link(c.version.entity.get_absolute_url()),
                    title,
                    c.index,
                )
            )
        row.cells_html = mark_safe("".join(parts))  # noqa: S308 - each part is format_html-escaped
    return f


def compute(cursor: Cursor, cluster: Cluster | None = None) -> Fleet:
    t = cursor.t
    scope: dict[str, Any] = {"cluster": cluster} if cluster is not None else {}
    nodes = list(
        EntityVersion.objects.as_of(t)
        .filter(kind="node", **scope)
        .select_related("entity", "entity__cluster")
    )
    gpus = list(
        EntityVersion.objects.as_of(t).filter(kind="gpu", **scope).select_related("entity", "entity__cluster")
    )
    pods = list(
        EntityVersion.objects.as_of(t)
        .filter(kind="pod", phase__in=["Pending", "Running"], **scope)
        .exclude(node="")
        .select_related("entity")
        .only(
            "cluster_id", "node", "gpus", "project", "job", "namespace", "entity__namespace", "entity__name"
        )
    )
    sm = _sm_by_gpu(cursor, [g.entity_id for g in gpus] if len(gpus) <= 900 else None, scope)
    idle_points = _idle_points_while_allocated(cursor, {g.entity_id: g.pod for g in gpus if g.pod}, scope)

    pod_by_key = {(p.cluster_id, f"{p.entity.namespace}/{p.entity.name}"): p for p in pods}
    rows: dict[tuple[int, str], NodeRow] = {}
    for n in sorted(nodes, key=lambda v: (v.entity.cluster.name, v.entity.name)):
        rows[(n.cluster_id, n.entity.name)] = NodeRow(
            version=n,
            nodepool=str(n.state.get("nodepool") or "—"),
            model=str(n.state.get("gpu_product") or "—"),
            cordoned=bool(n.state.get("unschedulable")),
        )
    usable_left: dict[tuple[int, str], int] = {}
    for key, row in rows.items():
        n = row.version
        ready = n.ready is not False and n.phase not in ("NotReady", "Unknown")
        usable_left[key] = (n.gpus_allocatable or 0) if ready else 0

    funnel = Funnel()
    by_pool: defaultdict[str, Funnel] = defaultdict(Funnel)
    by_model: defaultdict[str, Funnel] = defaultdict(Funnel)
    orphans = NodeRow(version=None, nodepool="—", model="—")  # type: ignore[arg-type]  # GPUs whose node is unknown at t
    for g in sorted(gpus, key=lambda v: (v.node, int(v.state.get("index", 0) or 0), v.entity.name)):
        key = (g.cluster_id, g.node)
        row = rows.get(key, orphans)
        healthy = g.phase == "ok" and usable_left.get(key, 0) > 0
        if healthy:
            usable_left[key] -= 1
        stats = sm.get(g.entity_id, {})
        pod = pod_by_key.get((g.cluster_id, g.pod)) if g.pod else None
        cell = Cell(
            version=g,
            index=int(g.state.get("index", 0) or 0),
            state="free",
            healthy=healthy,
            allocated=bool(g.pod),
            sm=stats.get("recent"),
            idle_hours=0.0,
            pod=g.pod,
            project=(pod.project if pod else "") or (g.pod.split("/", 1)[0] if g.pod else ""),
            job=pod.job if pod else "",
            job_namespace=pod.entity.namespace if pod else "",
        )
        if g.phase == "missing" or g.state.get("present") is False:
            cell.state = "missing"
        elif g.phase == "faulty" or not healthy:
            cell.state = "faulty"
        elif cell.allocated:
            cell.state = "allocated" if cell.sm is None or cell.active else "idle"
        if cell.allocated:
            cell.idle_hours = idle_points.get(g.entity_id, 0) * SAMPLE_STEP_MIN / 60.0
        row.cells.append(cell)
        funnel.add(cell)
        by_pool[row.nodepool].add(cell)
        by_model[str(g.state.get("model") or row.model)].add(cell)

    all_rows = list(rows.values()) + ([orphans] if orphans.cells else [])
    cells = [c for r in all_rows for c in r.cells]
    idle = sorted(
        (c for c in cells if c.state == "idle"), key=lambda c: (-c.idle_hours, c.version.entity.name)
    )
    return Fleet(
        funnel=funnel,
        by_pool=dict(sorted(by_pool.items())),
        by_model=dict(sorted(by_model.items())),
        rows=all_rows,
        idle=idle,
        over_requesting=_over_requesting(cells),
        allocated_by_pods=sum(p.gpus or 0 for p in pods),
    )


def _sm_by_gpu(
    cursor: Cursor, gpu_ids: list[int] | None, scope: dict[str, Any]
) -> dict[int, dict[str, float]]:
    """Per GPU: mean SM activity near t (one query)."""
    t = cursor.t
    qs = TelemetrySample.objects.filter(
        metric=SM_METRIC, time__gt=max(cursor.start, t - NEAR_T), time__lte=t, **scope
    )
    if gpu_ids is not None:
        qs = qs.filter(gpu_id__in=gpu_ids)
    rows = qs.values("gpu_id").annotate(recent=Avg("value"))
    return {r["gpu_id"]: {"recent": r["recent"]} for r in rows}


def _idle_points_while_allocated(
    cursor: Cursor, pod_by_gpu: dict[int, str], scope: dict[str, Any]
) -> dict[int, int]:
    """Per GPU held at t: window points below ACTIVE_SM while the GPU was held by that same pod (one query).

    A point at time T averages (T-5m, T]; it counts when the GPU's version at T-5m names the pod holding it
    at t, so a GPU allocated 12 minutes ago counts at most the two points wholly inside its allocation (not
    the idle hours before it, when it was free or someone else's).
    """
    if not pod_by_gpu:
        return {}
    step = timedelta(minutes=SAMPLE_STEP_MIN)
    pod_at_span_start = (
        EntityVersion.objects.filter(entity_id=OuterRef("gpu_id"), valid_from__lte=OuterRef("time") - step)
        .order_by("-valid_from")
        .values("pod")[:1]
    )
    qs = TelemetrySample.objects.filter(
        metric=SM_METRIC, time__gt=cursor.start, time__lte=cursor.t, value__lt=ACTIVE_SM, **scope
    )
    if len(pod_by_gpu) <= 900:
        qs = qs.filter(gpu_id__in=list(pod_by_gpu))
    rows = (
        qs.annotate(alloc_pod=Subquery(pod_at_span_start))
        .values("gpu_id", "alloc_pod")
        .annotate(points=Count("id"))
        .order_by()
    )
    return {
        r["gpu_id"]: r["points"]
        for r in rows
        if r["alloc_pod"] and r["alloc_pod"] == pod_by_gpu.get(r["gpu_id"])
    }


def _over_requesting(cells: list[Cell]) -> list[JobUse]:
    """Jobs holding GPUs of which some are busy and some idle: they asked for more than they use."""
    jobs: dict[tuple[int, str, str], JobUse] = {}
    for c in cells:
        if not c.allocated or not c.job or c.state in ("missing", "faulty"):
            continue
        key = (c.version.cluster_id, c.job_namespace, c.job)
        use = jobs.setdefault(key, JobUse(c.version.entity.cluster, c.job_namespace, c.job, c.project))
        use.gpus += 1
        use.active += c.active
        use.idle_hours += c.idle_hours
    out = [u for u in jobs.values() if 0 < u.active < u.gpus]
    return sorted(out, key=lambda u: (u.active / u.gpus, -u.gpus))
