"""Per-node fit of a job at t, computed from inventory, not from the scheduler's message.

For each node: what blocks it for this job (NotReady, cordon, an untolerated
taint, a selector/GPU-product mismatch, a device plugin that advertises fewer
GPUs than the node has, GPUs that vanished, not enough free GPUs), and how many
of the job's pods would fit. ``placeable`` answers counterfactuals ("would it
fit if the device plugin were healthy?"), which is how a cause is told from
its symptom: the blocker whose removal makes the job fit is the cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from incidents.diagnosis.types import DiagnosisInput, EntityState, gpus_of

GPU_RESOURCE = "nvidia.com/gpu"
ACTIVE_POD_PHASES = ("Running", "Pending")

# Blocker codes (a node can have several).
NOT_READY = "not_ready"
CORDONED = "cordoned"
TAINT = "taint"
SELECTOR = "selector"
DEVICE_PLUGIN = "device_plugin"  # allocatable < capacity while the node is Ready
MISSING_GPU = "missing_gpu"  # capacity < the node's GPU count (a GPU fell off the bus)
INSUFFICIENT = "insufficient_gpu"  # not enough free GPUs for one pod
STATIC_BLOCKERS = (NOT_READY, CORDONED, TAINT, SELECTOR)

# Taints the node lifecycle controller derives from conditions: they say "unhealthy", not "reserved".
_HEALTH_TAINTS = {
    "node.kubernetes.io/not-ready": NOT_READY,
    "node.kubernetes.io/unreachable": NOT_READY,
    "node.kubernetes.io/network-unavailable": NOT_READY,
    "node.kubernetes.io/unschedulable": CORDONED,
}


@dataclass
class Request:
    """What the job still needs placed: ``pods`` pods of ``gpus_per_pod`` GPUs each."""

    pods: int
    gpus_per_pod: int
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    preemptible: bool = True
    bound_pods: int = 0

    @property
    def total(self) -> int:
        return self.pods * self.gpus_per_pod


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

    @property
    def free(self) -> int:
        return max(self.allocatable - self.allocated, 0)

    @property
    def fits(self) -> bool:
        return not self.blockers

    def free_if(self, ignore: set[str]) -> int:
        """Free GPUs if the ignored GPU-side blockers were fixed (device plugin, missing GPUs)."""
        top = self.allocatable
        if DEVICE_PLUGIN in ignore:
            top = max(top, self.capacity)
        if MISSING_GPU in ignore:
            top = max(top, self.nominal)
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
        }


def job_request(di: DiagnosisInput, job: EntityState) -> Request:
    """The part of a job's request not yet placed (a gang is all-or-nothing; bound pods keep their GPUs)."""
    st = job.state
    pods_total = int(st.get("pods") or 1)
    per_pod = st.get("gpus_per_pod")
    if per_pod is None:
        total = int(st.get("gpus_total") or st.get("gpus") or 0)
        per_pod = total // pods_total if pods_total else total
    pods = di.pods_of_job(job)
    bound = [p for p in pods if p.get("node") and p.get("phase") in ACTIVE_POD_PHASES]
    tolerations = list(st.get("tolerations") or [])
    selector = dict(st.get("node_selector") or {})
    if pods:  # the pod spec is what the scheduler sees; prefer it when present
        p0 = pods[0].state
        tolerations = list(p0.get("tolerations") or tolerations)
        selector = dict(p0.get("node_selector") or selector)
    preemptible = st.get("preemptible")
    if preemptible is None:
        preemptible = (st.get("priority_class") or "train") != "inference"
    return Request(
        pods=max(pods_total - len(bound), 0),
        gpus_per_pod=int(per_pod or 0),
        node_selector=selector,
        tolerations=tolerations,
        preemptible=bool(preemptible),
        bound_pods=len(bound),
    )


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


def node_nominal_gpus(node: EntityState, history: list[EntityState] | None = None) -> int:
    """How many GPUs the node has when healthy: the GFD label, else the most it ever reported."""
    st = node.state
    labels = st.get("labels") or {}
    try:
        nominal = int(labels.get("nvidia.com/gpu.count") or 0)
    except (TypeError, ValueError):
        nominal = 0
    best = max(nominal, gpus_of(st.get("capacity") or {}))
    for v in history or []:
        best = max(best, gpus_of(v.state.get("capacity") or {}))
    return best


def allocated_on(di: DiagnosisInput, node: str) -> int:
    """GPUs requested by the pods bound to the node and not finished."""
    return sum(int(p.get("gpus") or 0) for p in di.pods_on_node(node))


def node_fit(di: DiagnosisInput, node: EntityState, req: Request) -> NodeFit:
    st = node.state
    labels = st.get("labels") or {}
    ready = bool(st.get("ready", True))
    unsched = bool(st.get("unschedulable", False))
    capacity = gpus_of(st.get("capacity") or {})
    allocatable = gpus_of(st.get("allocatable") or {}) if "allocatable" in st else capacity
    row = NodeFit(
        node=node.name,
        pool=st.get("nodepool") or labels.get("run.ai/node-pool") or "",
        product=st.get("gpu_product") or labels.get("nvidia.com/gpu.product") or "",
        ready=ready,
        unschedulable=unsched,
        nominal=node_nominal_gpus(node, di.history.get(node.ref)),
        capacity=capacity,
        allocatable=allocatable,
        allocated=allocated_on(di, node.name),
    )
    blockers: list[str] = []
    if not ready:
        blockers.append(NOT_READY)
    if unsched:
        blockers.append(CORDONED)
    for taint in st.get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        health = _HEALTH_TAINTS.get(taint.get("key") or "")
        if health:
            if health not in blockers and not tolerates(req.tolerations, taint):
                blockers.append(health)
            continue
        if not tolerates(req.tolerations, taint):
            row.untolerated.append({k: taint.get(k) for k in ("key", "value", "effect")})
    if row.untolerated:
        blockers.append(TAINT)
    for key, want in req.node_selector.items():
        have = labels.get(key)
        if have != want:
            row.selector_mismatch.append(
                f"{key}={want} (node has {have if have is not None else 'no such label'})"
            )
    if row.selector_mismatch:
        blockers.append(SELECTOR)
    if ready and capacity > allocatable:
        blockers.append(DEVICE_PLUGIN)
    if row.nominal > capacity:
        blockers.append(MISSING_GPU)
    row.pods_fit = _pods_fit(row.free, req.gpus_per_pod, req.pods)
    if row.pods_fit == 0 and req.pods:
        blockers.append(INSUFFICIENT)
    # A node with no GPU-side blocker that still cannot host one pod is only "insufficient";
    # device plugin / missing GPU blockers only matter when they take GPUs the pod needs.
    if DEVICE_PLUGIN in blockers and row.pods_fit > 0:
        blockers.remove(DEVICE_PLUGIN)
    if MISSING_GPU in blockers and row.pods_fit > 0:
        blockers.remove(MISSING_GPU)
    row.blockers = blockers
    return row


def _pods_fit(free: int, per_pod: int, want: int) -> int:
    if want <= 0:
        return 0
    if per_pod <= 0:
        return want
    return min(free // per_pod, want)


def node_fits(di: DiagnosisInput, req: Request) -> list[NodeFit]:
    """The fit table over every GPU node (nodes with no GPUs at all are left out unless the job wants none)."""
    rows = []
    for node in sorted(di.nodes, key=lambda n: n.name):
        row = node_fit(di, node, req)
        if row.nominal == 0 and req.gpus_per_pod > 0:
            continue
        rows.append(row)
    return rows


def placeable(rows: list[NodeFit], req: Request, ignore: frozenset[str] | set[str] = frozenset()) -> int:
    """How many of the job's pods could be placed if the ``ignore``d blockers were gone (greedy per node)."""
    placed = 0
    for row in rows:
        static = [b for b in row.blockers if b in STATIC_BLOCKERS and b not in ignore]
        if static:
            continue
        free = row.free_if(set(ignore))
        placed += _pods_fit(free, req.gpus_per_pod, req.pods - placed)
        if placed >= req.pods:
            break
    return placed


def fits(rows: list[NodeFit], req: Request, ignore: frozenset[str] | set[str] = frozenset()) -> bool:
    return req.pods == 0 or placeable(rows, req, ignore) >= req.pods


@dataclass
class Totals:
    """Cluster (or pool) GPU totals at t."""

    nodes: int
    capacity: int
    allocatable: int
    allocated: int
    free: int
    largest_free_block: int
    eligible_nodes: int  # nodes with no static blocker for this job
    eligible_free: int
    largest_eligible_block: int

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def totals(rows: list[NodeFit]) -> Totals:
    eligible = [r for r in rows if not any(b in STATIC_BLOCKERS for b in r.blockers)]
    return Totals(
        nodes=len(rows),
        capacity=sum(r.capacity for r in rows),
        allocatable=sum(r.allocatable for r in rows),
        allocated=sum(r.allocated for r in rows),
        free=sum(r.free for r in rows),
        largest_free_block=max((r.free for r in rows), default=0),
        eligible_nodes=len(eligible),
        eligible_free=sum(r.free for r in eligible),
        largest_eligible_block=max((r.free for r in eligible), default=0),
    )
