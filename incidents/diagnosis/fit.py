"""Per-node fit of a job at t, computed from inventory, not from the scheduler's message.

For each node: what blocks it for this job (NotReady, cordon, an untolerated
taint, a selector/GPU-product mismatch, a device plugin that advertises fewer
GPUs than the node has, GPUs that vanished, not enough free GPUs), and how many
of the job's pods would fit. ``placeable`` answers counterfactuals ("would it
fit if the device plugin were healthy?"), which is how a cause is told from
its symptom: the blocker whose removal makes the job fit is the cause.

The job's side is ``request``'s (``job_request``), the node's ``node_resources``' (nominal GPUs, MIG
layout, shared GPUs, what its pods request); the table's sums are ``totals``'.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from incidents.diagnosis.node_resources import (
    NodeBase,
    mig_used_on,
    node_base,
    requested_on,
    shared_gpus,
)
from incidents.diagnosis.request import Request
from incidents.diagnosis.types import DiagnosisInput, EntityState

# Blocker codes (a node can have several).
NOT_READY = "not_ready"
CORDONED = "cordoned"
TAINT = "taint"
SELECTOR = "selector"
DEVICE_PLUGIN = "device_plugin"  # allocatable < capacity while the node is Ready
MISSING_GPU = "missing_gpu"  # capacity < the node's GPU count (a GPU fell off the bus)
INSUFFICIENT = "insufficient_gpu"  # not enough free GPUs for one pod
INSUFFICIENT_CPU = "insufficient_cpu"  # the node's unrequested CPU cannot take one pod
INSUFFICIENT_MEMORY = "insufficient_memory"  # the node's unrequested memory cannot take one pod
CPU_MEMORY = "cpu_memory"  # for ``placeable``'s ignore: count GPUs only
INSUFFICIENT_MIG = "insufficient_mig"  # no free instance of the MIG profile the pod asks for
MIG = "mig"  # for ``placeable``'s ignore: as if every node had the profile free
STATIC_BLOCKERS = (NOT_READY, CORDONED, TAINT, SELECTOR)



@dataclass
class NodeFit:
    """One row of the "why not this node" table."""

    node: str
    pool: str
    product: str
    ready: bool
    unschedulable: bool
    nominal: int  # GPUs the node has (GPU feature discovery count, or the most it ever advertised)
    capacity: int
    allocatable: int
    allocated: int
    untolerated: list[dict[str, Any]] = field(default_factory=list)
    selector_mismatch: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    pods_fit: int = 0
    gpu_pods_fit: int = 0  # pods the free GPUs alone would take
    cpu_allocatable: float | None = None  # cores; None when the node does not report it
    cpu_requested: float = (
        0.0  # cores requested by the pods bound to the node (those whose requests are known)
    )
    memory_allocatable: int | None = None  # bytes
    memory_requested: int = 0
    cpu_pods: int | None = None  # how many pods of the job the free CPU takes; None: not counted
    memory_pods: int | None = None
    mig_layout: dict[str, int] = field(default_factory=dict)  # profile -> instances allocatable on the node
    mig_used: dict[str, int] = field(default_factory=dict)  # profile -> instances requested by its bound pods
    mig_config: str = ""  # nvidia.com/mig.config ("all-1g.10gb", "all-disabled", custom-…)
    mig_pods: int | None = None  # pods of the job its free MIG instances take; None: the job asks no MIG
    shared: list[dict[str, Any]] = field(
        default_factory=list
    )  # shared GPUs: {gpu, index, free, free_mib, holders}
    share_slots: int = 0  # shares of the job's size the node's shared GPUs and free whole GPUs take
    shares_per_gpu: int = 0  # shares of the job's size one whole free GPU takes

    @property
    def free(self) -> int:
        return max(self.allocatable - self.allocated, 0)

    @property
    def cpu_free(self) -> float | None:
        return None if self.cpu_allocatable is None else max(self.cpu_allocatable - self.cpu_requested, 0.0)

    @property
    def memory_free(self) -> int | None:
        return (
            None
            if self.memory_allocatable is None
            else max(self.memory_allocatable - self.memory_requested, 0)
        )

    def resource_pods(self, ignore: frozenset[str] | set[str] = frozenset()) -> int | None:
        """Pods of the job the node's free CPU, memory and MIG instances take (None: none of them is counted)."""
        known = (
            [] if CPU_MEMORY in ignore else [n for n in (self.cpu_pods, self.memory_pods) if n is not None]
        )
        if self.mig_pods is not None and MIG not in ignore:
            known.append(self.mig_pods)
        return min(known) if known else None

    def mig_free(self, profile: str) -> int:
        return max(self.mig_layout.get(profile, 0) - self.mig_used.get(profile, 0), 0)

    @property
    def fits(self) -> bool:
        return not self.blockers

    def free_if(self, ignore: set[str]) -> int:
        """Free GPUs if the ignored GPU-side blockers were fixed: the device plugin advertising what the node
        has (its capacity), the GPUs gone from its capacity back (up to its nominal count). Each fix gives back
        only what it took: a GPU the device plugin withdrew does not come back by repairing a missing one."""
        top = self.allocatable
        if DEVICE_PLUGIN in ignore:
            top = max(top, self.capacity)
        if MISSING_GPU in ignore:
            top += max(self.nominal - self.capacity, 0)
        return max(top - self.allocated, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "pool": self.pool,
            "product": self.product,
            "ready": self.ready,
            "unschedulable": self.unschedulable,
            "nominal": self.nominal,
            "capacity": self.capacity,
            "allocatable": self.allocatable,
            "allocated": self.allocated,
            "free": self.free,
            "untolerated": self.untolerated,
            "selector_mismatch": self.selector_mismatch,
            "blockers": self.blockers,
            "pods_fit": self.pods_fit,
            "gpu_pods_fit": self.gpu_pods_fit,
            "cpu_allocatable": self.cpu_allocatable,
            "cpu_free": self.cpu_free,
            "memory_allocatable": self.memory_allocatable,
            "memory_free": self.memory_free,
            "mig_config": self.mig_config,
            "mig_layout": self.mig_layout,
            "mig_used": self.mig_used,
        }


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """Kubernetes toleration matching (k8s.io/api/core/v1 Toleration.ToleratesTaint semantics)."""
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = tol.get("key") or ""
        op = tol.get("operator") or "Equal"
        if not key and op == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if op == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def share_fits(req: Request, free: float, free_mib: int | None, gpu_mib: int | None) -> int:
    """How many of the job's shares fit in what is left of one GPU."""
    if req.share:
        return int(free / req.share + 1e-9)
    if req.share_memory_mib:
        if free_mib is None:
            return 0
        return int(free_mib // req.share_memory_mib)
    return 0


def node_fit(di: DiagnosisInput, node: EntityState, req: Request) -> NodeFit:
    """The node's row for ``req``: what the node has is read once per node while ``di`` is indexed
    (``node_resources.node_base``); what depends on the request is weighed here."""
    return _row(di, node_base(di, node), req)


def _row(di: DiagnosisInput, base: NodeBase, req: Request) -> NodeFit:
    row = NodeFit(
        node=base.state.name,
        pool=base.pool,
        product=base.product,
        ready=base.ready,
        unschedulable=base.unschedulable,
        nominal=base.nominal,
        capacity=base.capacity,
        allocatable=base.allocatable,
        allocated=base.allocated,
        cpu_allocatable=base.cpu_allocatable,
        memory_allocatable=base.memory_allocatable,
        mig_config=base.mig_config,
        mig_layout=dict(base.mig_layout),
    )
    _count_cpu_memory(di, row, req)
    if req.mig:
        row.mig_used = mig_used_on(di, row.node)
        row.mig_pods = min(row.mig_free(p) // n for p, n in req.mig.items())
    blockers = _static_blockers(row, base, req)
    if row.ready and row.capacity > row.allocatable:
        blockers.append(DEVICE_PLUGIN)
    if row.nominal > row.capacity:
        blockers.append(MISSING_GPU)
    _count_gpu_pods(di, row, base, req)
    res = row.resource_pods()
    row.pods_fit = row.gpu_pods_fit if res is None else min(row.gpu_pods_fit, res)
    if row.gpu_pods_fit == 0 and req.pods:
        blockers.append(INSUFFICIENT)
    if req.pods and row.cpu_pods == 0:
        blockers.append(INSUFFICIENT_CPU)
    if req.pods and row.memory_pods == 0:
        blockers.append(INSUFFICIENT_MEMORY)
    if req.pods and row.mig_pods == 0:
        blockers.append(INSUFFICIENT_MIG)
    # A node with no GPU-side blocker that still cannot host one pod is only "insufficient";
    # device plugin / missing GPU blockers only matter when they take GPUs the pod needs.
    if DEVICE_PLUGIN in blockers and row.gpu_pods_fit > 0:
        blockers.remove(DEVICE_PLUGIN)
    if MISSING_GPU in blockers and row.gpu_pods_fit > 0:
        blockers.remove(MISSING_GPU)
    row.blockers = blockers
    return row


def _count_cpu_memory(di: DiagnosisInput, row: NodeFit, req: Request) -> None:
    """What the node's pods request of its CPU and memory, and how many of the job's pods the rest takes."""
    if (row.cpu_allocatable is not None and req.cpu_per_pod) or (
        row.memory_allocatable is not None and req.memory_per_pod
    ):
        row.cpu_requested, row.memory_requested = requested_on(di, row.node)
    if row.cpu_allocatable is not None and req.cpu_per_pod:
        row.cpu_pods = int((row.cpu_free or 0.0) // req.cpu_per_pod + 1e-9)
    if row.memory_allocatable is not None and req.memory_per_pod:
        row.memory_pods = int((row.memory_free or 0) // req.memory_per_pod)


def _static_blockers(row: NodeFit, base: NodeBase, req: Request) -> list[str]:
    """NotReady, cordon, untolerated taints and selector mismatches (the latter two also written on ``row``)."""
    blockers: list[str] = []
    if not row.ready:
        blockers.append(NOT_READY)
    if row.unschedulable:
        blockers.append(CORDONED)
    for taint, health in base.taints:
        if health:
            if health not in blockers and not tolerates(req.tolerations, taint):
                blockers.append(health)
            continue
        if not tolerates(req.tolerations, taint):
            row.untolerated.append({k: taint.get(k) for k in ("key", "value", "effect")})
    if row.untolerated:
        blockers.append(TAINT)
    labels = base.labels
    for key, want in req.node_selector.items():
        have = labels.get(key)
        if have != want:
            row.selector_mismatch.append(
                f"{key}={want} (node has {have if have is not None else 'no such label'})"
            )
    if row.selector_mismatch:
        blockers.append(SELECTOR)
    return blockers


def _count_gpu_pods(di: DiagnosisInput, row: NodeFit, base: NodeBase, req: Request) -> None:
    """How many of the job's pods the node's free GPUs take: whole GPUs, or shares on its shared and free GPUs."""
    if req.share or req.share_memory_mib:
        gpu_mib = base.gpu_memory_mib
        row.shared = shared_gpus(di, row.node, gpu_mib)
        per_whole = row.shares_per_gpu = share_fits(req, 1.0, gpu_mib, gpu_mib)
        row.share_slots = sum(share_fits(req, x["free"], x["free_mib"], gpu_mib) for x in row.shared)
        row.share_slots += row.free * per_whole
        row.gpu_pods_fit = min(row.share_slots, req.pods)
    else:
        row.gpu_pods_fit = _pods_fit(row.free, req.gpus_per_pod, req.pods)


def _pods_fit(free: int, per_pod: int, want: int) -> int:
    if want <= 0:
        return 0
    if per_pod <= 0:
        return want
    return min(free // per_pod, want)


def node_fits(di: DiagnosisInput, req: Request) -> list[NodeFit]:
    """The fit table over every GPU node (nodes with no GPUs at all are left out unless the job wants none).

    Reads ``di`` indexed even when the caller did not (a reclaim's view of the state without its victims is a new
    input): every node's pods by one index, not one scan of every pod per node (1,213 nodes x 10,000 pods)."""
    with di.indexed():
        bases = di.memo("node_bases_by_name", lambda: _bases(di))
        return [_row(di, b, req) for b in bases if not (b.nominal == 0 and req.gpus_per_pod > 0)]


def _bases(di: DiagnosisInput) -> list[NodeBase]:
    return [node_base(di, node) for node in sorted(di.nodes, key=lambda n: n.name)]


def could_gain(
    di: DiagnosisInput, nodes: Iterable[str], req: Request, lifted: frozenset[str] = frozenset()
) -> bool:
    """Whether more room on ``nodes`` could change where the job fits: one of them is a row of its fit table
    (``node_fits``) with no static blocker but the ``lifted`` ones (an uncordon lifts ``CORDONED``). ``placeable`` skips every other row whatever its free GPUs, so an
    impact ("pending jobs that would then fit") need not build the whole table of a job for which this is
    False: of 12,000 waiting jobs at 1,000 nodes, the few that could use the node."""
    for name in nodes:
        node = di.find("node", name)
        if node is None:
            continue
        row = node_fit(di, node, req)
        if row.nominal == 0 and req.gpus_per_pod > 0:
            continue  # not a row of node_fits
        if not any(b in STATIC_BLOCKERS and b not in lifted for b in row.blockers):
            return True
    return False


def placeable(rows: list[NodeFit], req: Request, ignore: frozenset[str] | set[str] = frozenset()) -> int:
    """How many of the job's pods could be placed if the ``ignore``d blockers were gone (greedy per node)."""
    placed = 0
    for row in rows:
        static = [b for b in row.blockers if b in STATIC_BLOCKERS and b not in ignore]
        if static:
            continue
        free = row.free_if(set(ignore))
        if req.share or req.share_memory_mib:
            here = min(row.share_slots + (free - row.free) * row.shares_per_gpu, req.pods - placed)
        else:
            here = _pods_fit(free, req.gpus_per_pod, req.pods - placed)
        res = row.resource_pods(ignore)
        if res is not None:
            here = min(here, res)
        placed += here
        if placed >= req.pods:
            break
    return placed


def fits(rows: list[NodeFit], req: Request, ignore: frozenset[str] | set[str] = frozenset()) -> bool:
    return req.pods == 0 or placeable(rows, req, ignore) >= req.pods
