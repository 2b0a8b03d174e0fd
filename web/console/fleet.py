"""The GPU fleet at t: funnel, node x GPU grid, idle allocations and over-requesting jobs.

Four queries whatever the fleet size (nodes, GPUs, bound pods, one SM-activity aggregate);
everything else is arithmetic here, so tests can compare it with a direct count.

Funnel stages are nested, each a subset of the one before:
  total      every GPU known at t (including faulty and missing ones)
  healthy    phase "ok", on a Ready node whose device plugin advertises GPUs (capped at allocatable)
  allocated  healthy and held by a pod (the GPU's ``pod`` hot column, from DCGM's pod labels)
  active     allocated and SM activity near t above ACTIVE_SM
  well used  active and SM activity near t above WELL_USED_SM

Shared and partitioned GPUs count what is allocated of them, not 1 each: a GPU KAI shares counts the sum of
its shares' fractions (at most 1; the reservation pod holding the device is not a user), a MIG GPU the part
of its layout its used instances take (a used 3g.40gb of a 3g+2g+1g+1g layout is 3/7). A share or MIG GPU
is active/used well for its allocated part when its SM activity near t is (for MIG, the mean of its
instances' series, as the telemetry sweep stores one point per GPU). The stages from "allocated" on are
therefore GPU units (412.5), and the funnel also counts the shared GPUs, their shares and the MIG instances.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Avg, Count, OuterRef, Subquery
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from collectors import gpu_amounts as amounts
from collectors.mapping.common import RESERVATION_NAMESPACE
from collectors.models import Cluster, EntityVersion, TelemetrySample
from incidents.diagnosis import capacity
from rcaweb.cursor import Cursor
from rcaweb.mig import mig_units
from web.console.gpu_activity import ACTIVE_SM, SAMPLE_STEP_MIN, SM_METRIC, WELL_USED_SM

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
    allocated: float = (
        0  # GPU units: a whole GPU 1, a shared GPU its shares' fractions, a MIG GPU its used part
    )
    active: float = 0
    well_used: float = 0
    shared_gpus: int = 0  # healthy GPUs KAI shares, with at least one share on them
    shares: int = 0  # the shares on them
    mig_gpus: int = 0  # healthy partitioned GPUs with at least one instance in use
    mig_instances: int = 0  # MIG instances in use (a pod on them)
    mig_instances_free: int = 0  # MIG instances of healthy GPUs no pod holds

    def add(self, cell: Cell) -> None:
        self.total += 1
        self.healthy += cell.healthy
        if cell.healthy and cell.kind == "mig":
            self.mig_instances_free += cell.slices_total - cell.slices
        if not (cell.healthy and cell.allocated):
            return
        units = cell.units
        self.allocated = round(self.allocated + units, 4)
        if cell.active:
            self.active = round(self.active + units, 4)
        if cell.well_used:
            self.well_used = round(self.well_used + units, 4)
        if cell.kind == "shared":
            self.shared_gpus += 1
            self.shares += cell.slices
        elif cell.kind == "mig":
            self.mig_gpus += 1
            self.mig_instances += cell.slices

    def stages(self) -> list[tuple[str, str, float, float]]:
        """(stage, label, count, share of total) for the template's bars; counts from "allocated" on in GPU
        units (a whole number prints as one)."""
        return [
            (
                s,
                STAGE_LABELS[s],
                units(getattr(self, s)),
                (getattr(self, s) / self.total) if self.total else 0.0,
            )
            for s in STAGES
        ]

    @property
    def sliced_words(self) -> str:
        """What the allocated units hold beyond whole GPUs: "38 shared GPUs hold 91 shares; 24 MIG instances"."""
        parts = []
        if self.shared_gpus:
            parts.append(
                f"{self.shared_gpus} shared GPU{'s' if self.shared_gpus != 1 else ''} "
                f"hold{'s' if self.shared_gpus == 1 else ''} {self.shares} share{'s' if self.shares != 1 else ''}"
            )
        if self.mig_gpus or self.mig_instances_free:
            parts.append(
                f"{self.mig_instances} MIG instance{'s' if self.mig_instances != 1 else ''} in use on "
                f"{self.mig_gpus} GPU{'s' if self.mig_gpus != 1 else ''}, {self.mig_instances_free} free"
            )
        return "; ".join(parts)


def units(x: float) -> float | int:
    """GPU units as the page writes them: 412.5, and 412 rather than 412.0."""
    x = round(float(x), 2)
    return int(x) if x.is_integer() else x


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
    kind: str = "whole"  # whole | shared (KAI GPU sharing) | mig (partitioned)
    units: float = 1.0  # what is allocated of the GPU, in GPUs (1 for a held whole GPU)
    slices: int = 0  # shares on it, or MIG instances in use
    slices_total: int = 0  # MIG instances of its layout
    detail: str = ""  # who holds its shares or instances, in collectors.gpu_amounts' words (the cell's title)

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
    allocated_by_pods: float  # cross-check: GPU units requested by pods bound to nodes (scheduler's view)


def with_cell_html(f: Fleet, cursor: Cursor) -> Fleet:
    """Each row's GPU cells as ready HTML: 1,600 GPUs at 200 nodes made the heat map most of the page's
    rendering time as template tags (measured with bench/pages.py); escaped like any template value."""
    for row in f.rows:
        parts = []
        for c in row.cells:
            title = f"GPU {c.index} · {c.state}" + (f" · {c.pod}" if c.pod and c.kind == "whole" else "")
            if c.kind == "shared":
                title += f" · {c.slices} share(s), {units(c.units)} of the GPU" + (
                    f": {c.detail}" if c.detail else ""
                )
            elif c.kind == "mig":
                title += f" · MIG {c.slices} of {c.slices_total} instance(s) in use" + (
                    f": {c.detail}" if c.detail else ""
                )
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
            "cluster_id",
            "node",
            "gpus",
            "gpu_units",
            "project",
            "job",
            "namespace",
            "entity__namespace",
            "entity__name",
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
    mig_usable: set[tuple[int, str]] = set()  # Ready nodes advertising MIG instances (mixed strategy: gpu 0)
    for key, row in rows.items():
        n = row.version  # what the node offers the scheduler: the model's reading (diagnosis.capacity)
        usable_left[key] = capacity.offered_gpus(n.state, n.phase)
        if capacity.offers_mig(n.state, n.phase):
            mig_usable.add(key)

    funnel = Funnel()
    by_pool: defaultdict[str, Funnel] = defaultdict(Funnel)
    by_model: defaultdict[str, Funnel] = defaultdict(Funnel)
    orphans = NodeRow(version=None, nodepool="—", model="—")  # type: ignore[arg-type]  # GPUs whose node is unknown at t
    for g in sorted(gpus, key=lambda v: (v.node, int(v.state.get("index", 0) or 0), v.entity.name)):
        key = (g.cluster_id, g.node)
        row = rows.get(key, orphans)
        instances = g.state.get("mig") or []
        if instances:  # a partitioned GPU is advertised as its instances, not as nvidia.com/gpu
            healthy = g.phase == "ok" and key in mig_usable
        else:
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
        _slices(cell, g.state)
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
        allocated_by_pods=units(
            sum(
                (p.gpu_units if p.gpu_units is not None else (p.gpus or 0))
                for p in pods
                if p.entity.namespace != RESERVATION_NAMESPACE  # KAI's placeholder, not a user of the GPU
            )
        ),
    )


def _count(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


def _slices(cell: Cell, state: dict[str, Any]) -> None:
    """A shared GPU's shares or a MIG GPU's instances: what is allocated of it, in GPUs."""
    shares = state.get("shares") or []
    instances = state.get("mig") or []
    if shares or state.get("reservation"):
        cell.kind = "shared"
        cell.slices = len(shares)
        cell.units = round(min(1.0, sum(float(sh.get("fraction") or 0) for sh in shares)), 4)
        cell.allocated = bool(shares)
        # The pods on it, not KAI's reservation pod (what DCGM names): one job's share is not its whole GPU.
        cell.pod = ", ".join(str(sh.get("pod") or "") for sh in shares)
        model = str(state.get("model") or "")
        cell.detail = "; ".join(
            f"{sh.get('pod')} {amounts.share_words(sh.get('fraction'), sh.get('memory_mib'), model)}"
            for sh in shares
        )
        cell.project = str(shares[0].get("pod") or "").split("/", 1)[0] if shares else ""
        cell.job = cell.job_namespace = ""
    elif instances:
        cell.kind = "mig"
        used = [i for i in instances if i.get("pod")]
        cell.slices, cell.slices_total = len(used), len(instances)
        layout = sum(mig_units(str(i.get("profile") or "")) for i in instances)
        cell.units = (
            round(sum(mig_units(str(i.get("profile") or "")) for i in used) / layout, 4) if layout else 0.0
        )
        cell.allocated = bool(used)
        in_use = amounts.mig_words(Counter(str(i.get("profile") or "?") for i in used))
        free = amounts.mig_words(Counter(str(i.get("profile") or "?") for i in instances if not i.get("pod")))
        cell.detail = ", ".join([*([in_use] if in_use else []), *([f"free {free}"] if free else [])])
    else:
        cell.units = 1.0 if cell.allocated else 0.0


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
