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
from datetime import datetime
from typing import Any

from collectors.mapping.kai_sharing import RESERVATION_NAMESPACE
from collectors.models import Cluster, EntityVersion
from incidents.diagnosis import capacity
from rcaweb.cursor import Cursor
from rcaweb.mig import mig_units
from web import gpu_amounts as amounts
from web.console.funnel import Funnel, units
from web.console.gpu_activity import (
    ACTIVE_SM,
    SAMPLE_STEP_MIN,
    WELL_USED_SM,
    idle_points_while_allocated,
    sm_by_gpu,
)

logger = logging.getLogger(__name__)

NodeKey = tuple[int, str]  # (cluster id, node name)


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
    detail: str = ""  # who holds its shares or instances, in web.gpu_amounts' words (the cell's title)

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


def compute(cursor: Cursor, cluster: Cluster | None = None) -> Fleet:
    """The fleet at the cursor, in four queries (nodes, GPUs, bound pods at t; SM activity) and arithmetic."""
    scope: dict[str, Any] = {"cluster": cluster} if cluster is not None else {}
    nodes, gpus, pods = _versions_at(cursor.t, scope)
    readings = _Readings(
        sm=sm_by_gpu(cursor, [g.entity_id for g in gpus] if len(gpus) <= 900 else None, scope),
        idle_points=idle_points_while_allocated(cursor, {g.entity_id: g.pod for g in gpus if g.pod}, scope),
        pod_by_key={(p.cluster_id, f"{p.entity.namespace}/{p.entity.name}"): p for p in pods},
    )
    rows = _node_rows(nodes)
    offer = _Offer.of(rows)
    funnel = Funnel()
    by_pool: defaultdict[str, Funnel] = defaultdict(Funnel)
    by_model: defaultdict[str, Funnel] = defaultdict(Funnel)
    orphans = NodeRow(version=None, nodepool="—", model="—")  # type: ignore[arg-type]  # GPUs whose node is unknown at t
    for g in sorted(gpus, key=lambda v: (v.node, int(v.state.get("index", 0) or 0), v.entity.name)):
        row = rows.get((g.cluster_id, g.node), orphans)
        cell = readings.cell(g, offer.healthy(g))
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
        allocated_by_pods=_allocated_by_pods(pods),
    )


def _versions_at(
    t: datetime, scope: dict[str, Any]
) -> tuple[list[EntityVersion], list[EntityVersion], list[EntityVersion]]:
    """The nodes, the GPUs and the pods bound to a node (Pending or Running) at t: one query each."""
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
    return nodes, gpus, pods


def _node_rows(nodes: list[EntityVersion]) -> dict[NodeKey, NodeRow]:
    """One grid row per node, by cluster then name."""
    rows: dict[NodeKey, NodeRow] = {}
    for n in sorted(nodes, key=lambda v: (v.entity.cluster.name, v.entity.name)):
        rows[(n.cluster_id, n.entity.name)] = NodeRow(
            version=n,
            nodepool=str(n.state.get("nodepool") or "—"),
            model=str(n.state.get("gpu_product") or "—"),
            cordoned=bool(n.state.get("unschedulable")),
        )
    return rows


@dataclass
class _Offer:
    """What each node offers the scheduler at t, the model's reading (diagnosis.capacity): whole GPUs not yet
    counted healthy, and whether it is a Ready node advertising MIG instances (mixed strategy: gpu 0)."""

    gpus_left: dict[NodeKey, int]
    mig: set[NodeKey]

    @classmethod
    def of(cls, rows: dict[NodeKey, NodeRow]) -> _Offer:
        offer = cls({}, set())
        for key, row in rows.items():
            n = row.version
            offer.gpus_left[key] = capacity.offered_gpus(n.state, n.phase)
            if capacity.offers_mig(n.state, n.phase):
                offer.mig.add(key)
        return offer

    def healthy(self, g: EntityVersion) -> bool:
        """Whether GPU ``g`` is healthy and allocatable; a whole GPU counted so takes one of its node's."""
        key = (g.cluster_id, g.node)
        if g.state.get("mig"):  # a partitioned GPU is advertised as its instances, not as nvidia.com/gpu
            return g.phase == "ok" and key in self.mig
        healthy = g.phase == "ok" and self.gpus_left.get(key, 0) > 0
        if healthy:
            self.gpus_left[key] -= 1
        return healthy


@dataclass
class _Readings:
    """What the grid reads besides the GPU's own version: SM activity near t, idle points while held, the pods."""

    sm: dict[int, dict[str, float]]
    idle_points: dict[int, int]
    pod_by_key: dict[NodeKey, EntityVersion]  # by (cluster id, "namespace/name")

    def cell(self, g: EntityVersion, healthy: bool) -> Cell:
        """GPU ``g``'s cell: who holds it, how much of it, its state and its idle hours."""
        pod = self.pod_by_key.get((g.cluster_id, g.pod)) if g.pod else None
        cell = Cell(
            version=g,
            index=int(g.state.get("index", 0) or 0),
            state="free",
            healthy=healthy,
            allocated=bool(g.pod),
            sm=self.sm.get(g.entity_id, {}).get("recent"),
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
            cell.idle_hours = self.idle_points.get(g.entity_id, 0) * SAMPLE_STEP_MIN / 60.0
        return cell


def _allocated_by_pods(pods: list[EntityVersion]) -> float | int:
    """GPU units the pods bound to nodes request: the scheduler's view, a cross-check of the funnel."""
    return units(
        sum(
            (p.gpu_units if p.gpu_units is not None else (p.gpus or 0))
            for p in pods
            if p.entity.namespace != RESERVATION_NAMESPACE  # KAI's placeholder, not a user of the GPU
        )
    )


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
