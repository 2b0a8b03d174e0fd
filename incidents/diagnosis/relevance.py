"""Causal relevance: which findings are about the incident's subject, and which only happen in the same cluster.

A finding may be a *cause* only when what it is about lies in the subject's causal neighbourhood at t:

- a waiting job: the nodes that would otherwise take its pods (no taint or selector keeps it off them, and
  without their fault they would have room), and only through the capacity a fault costs there (a missing
  GPU, a device plugin hiding GPUs, a NotReady or cordoned node, an Xid that condemns the GPU, double-bit
  ECC errors); a hot GPU or NVLink errors on such a node cost the job nothing; none at all while its own
  quota holds it (KAI OverLimit / NonPreemptibleOverQuota, Kueue over nominal + borrowing limit);
- a placed job or pod: the nodes its pods run on and the GPUs they hold;
- a node: the node, its GPUs and its workloads;
- a GPU: that GPU, and its node's own node-level faults (also when grouping made the node a subject too).

Anything else a check reports (a fault on a node the job never needed, a sibling GPU's temperature) is
scoped "elsewhere": listed as also happening in the cluster when supported, dropped otherwise, never ranked
as a cause and never the reason for an action. Pure: it reads the DiagnosisInput and the findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.fault_pass import starts_with_room
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.request import job_request
from incidents.diagnosis.types import DiagnosisInput, EntityState, Finding

CAUSE = "cause"
ELSEWHERE = "elsewhere"

# Faults that take GPUs away from a node (and so from a job that would otherwise be placed there).
CAPACITY_CODES = frozenset(
    {C.GPU_MISSING, C.DEVICE_PLUGIN_UNHEALTHY, C.GPU_NODE_UNAVAILABLE, C.GPU_XID_FAULT, C.GPU_ECC_ERRORS}
)
NODE_LEVEL_CODES = frozenset({C.GPU_NODE_UNAVAILABLE, C.DEVICE_PLUGIN_UNHEALTHY, C.GPU_MISSING})
WORKLOAD_KINDS = ("job", "pod", "queue", "project")
# Sweeps and Prometheus' 5-minute lookback date a state a few minutes late: within this, not "after onset".
AFTER_ONSET_GRACE = timedelta(minutes=10)


@dataclass
class Neighbourhood:
    """What the subject's symptom can depend on at t."""

    nodes: set[str] = field(default_factory=set)  # any fault of these nodes (and their GPUs) can be a cause
    gpus: set[str] = field(default_factory=set)  # GPU-level faults of these GPUs are causes
    node_level: set[str] = field(default_factory=set)  # only node-level faults of these nodes are causes
    capacity: dict[str, str] = field(default_factory=dict)  # node -> why: only capacity-costing faults count
    workloads: set[tuple[str, str, str]] = field(default_factory=set)  # (kind, namespace, name)

    def to_dict(self) -> dict[str, object]:
        return {
            "nodes": sorted(self.nodes),
            "gpus": sorted(self.gpus),
            "node_level": sorted(self.node_level),
            "capacity": dict(sorted(self.capacity.items())),
        }


def neighbourhood(di: DiagnosisInput) -> Neighbourhood:
    hood = Neighbourhood()
    gpu_nodes = _nodes_of_gpu_subjects(di)
    for ref in di.subjects:
        hood.workloads.add((ref.kind, ref.namespace, ref.name))
        if ref.kind == "node" and ref.name in gpu_nodes:
            # A GPU alert's node is grouped with it as a subject: its node-level faults are in scope (the GPU
            # branch adds them), its other GPUs' faults are not.
            continue
        if ref.kind == "node":
            hood.nodes.add(ref.name)
            hood.gpus.update(g.name for g in di.gpus_of_node(ref.name))
            _workloads_on(hood, di.pods_bound_to(ref.name))
        elif ref.kind == "gpu":
            hood.gpus.add(ref.name)
            g = di.find("gpu", ref.name)
            if g is not None and g.get("node"):
                hood.node_level.add(g.get("node"))
                held = g.get("pod") or ""
                _workloads_on(
                    hood, [p for p in di.pods_bound_to(g.get("node")) if f"{p.namespace}/{p.name}" == held]
                )
        elif ref.kind == "pod":
            pod = di.find("pod", ref.name, ref.namespace)
            if pod is not None:
                _placed(di, hood, [pod])
                if pod.get("job"):
                    hood.workloads.add(("job", pod.namespace, pod.get("job")))
        elif ref.kind == "job":
            job = di.find("job", ref.name, ref.namespace)
            if job is None:
                continue
            pods = di.pods_of_job(job)
            hood.workloads.update(("pod", p.namespace, p.name) for p in pods)
            _placed(di, hood, [p for p in pods if p.get("node")])
            if is_pending(job):
                _candidates(di, hood, job)
    return hood


def _nodes_of_gpu_subjects(di: DiagnosisInput) -> set[str]:
    out = set()
    for ref in di.subjects:
        g = di.find("gpu", ref.name) if ref.kind == "gpu" else None
        if g is not None and g.get("node"):
            out.add(g.get("node"))
    return out


def _workloads_on(hood: Neighbourhood, pods: list[EntityState]) -> None:
    """The workloads a node or GPU alert touches: the pods on it and their jobs."""
    for p in pods:
        hood.workloads.add(("pod", p.namespace, p.name))
        if p.get("job"):
            hood.workloads.add(("job", p.namespace, p.get("job")))


def _placed(di: DiagnosisInput, hood: Neighbourhood, pods: list[EntityState]) -> None:
    """Placed pods: their nodes' node-level faults, and the GPUs they hold (all of the node's if unknown)."""
    for pod in pods:
        node = pod.get("node")
        if not node:
            continue
        hood.node_level.add(node)
        key = f"{pod.namespace}/{pod.name}"
        held = [g.name for g in di.gpus_of_node(node) if g.get("pod") == key]
        if held:
            hood.gpus.update(held)
        elif int(pod.get("gpus") or 0) > 0:  # which GPUs it holds is not known: any of the node's may be its
            hood.gpus.update(g.name for g in di.gpus_of_node(node))


def _candidates(di: DiagnosisInput, hood: Neighbourhood, job: EntityState) -> None:
    """Nodes that would take a pod of the waiting job if their own fault were gone."""
    req = job_request(di, job)
    if req.pods == 0:
        return
    held = quota_at(di, job, req, 0)
    if held is not None and held.holds:
        return  # its quota holds it before any node is considered: no node's fault is why it waits
    per_pod = max(req.gpus_per_pod, 1)
    for row in F.node_fits(di, req):
        if row.fits or F.TAINT in row.blockers or F.SELECTOR in row.blockers:
            continue
        faults = {F.NOT_READY, F.CORDONED, F.DEVICE_PLUGIN, F.MISSING_GPU}
        room = row.free_if(faults)
        if F.NOT_READY in row.blockers or F.CORDONED in row.blockers:
            room = max(room, max(row.nominal, row.capacity) - row.allocated)
        if room < per_pod:
            continue  # full of other work: its faults cost this job nothing now
        if row.resource_pods() == 0:
            continue  # its CPU or memory is taken: without its fault it still could not take a pod
        lost = [b for b in row.blockers if b in faults]
        if lost or row.nominal > row.allocatable:
            hood.capacity[row.node] = ", ".join(lost) or "fewer GPUs allocatable than installed"


def _node_of(f: Finding) -> str | None:
    node = f.facts.get("node")
    if node:
        return node
    if f.subject is not None and f.subject.kind == "node":
        return f.subject.name
    return None


def costs_capacity(f: Finding) -> bool:
    """Whether the fault takes GPUs away from its node (what a waiting job can be short of)."""
    if f.code not in CAPACITY_CODES:
        return False
    if f.code == C.GPU_XID_FAULT:
        return bool(f.facts.get("drain_node"))
    if f.code == C.GPU_ECC_ERRORS:
        return int(f.facts.get("dbe") or 0) > 0
    return True


def scope_of(di: DiagnosisInput, hood: Neighbourhood, f: Finding) -> str:
    subject = f.subject
    if subject is None:
        return CAUSE
    if subject.kind in WORKLOAD_KINDS:
        if subject.kind in ("job", "pod"):
            return CAUSE if (subject.kind, subject.namespace, subject.name) in hood.workloads else ELSEWHERE
        return CAUSE
    node = _node_of(f)
    if subject.kind == "gpu":
        if subject.name in hood.gpus or (node in hood.nodes):
            return CAUSE
        if node in hood.capacity and costs_capacity(f):
            return CAUSE
        return ELSEWHERE
    if subject.kind == "node" and node is not None:
        if _began_after_onset(di, f):
            return ELSEWHERE
        if node in hood.nodes:
            return CAUSE
        if node in hood.node_level and f.code in NODE_LEVEL_CODES:
            return CAUSE
        if node in hood.capacity and costs_capacity(f):
            return CAUSE
        return ELSEWHERE
    return CAUSE


def _by_capacity_only(hood: Neighbourhood, f: Finding, nodes: set[str]) -> bool:
    """A fault in the job's neighbourhood only because it costs capacity on one of ``nodes`` (not on a node or
    GPU the job's own pods use)."""
    if f.subject is None or f.subject.kind not in ("node", "gpu") or f.facts.get("served_first"):
        return False
    node = _node_of(f)
    if node not in nodes or node in hood.nodes or node in hood.node_level:
        return False
    return not (f.subject.kind == "gpu" and f.subject.name in hood.gpus)


RESTORED = 10_000  # GPUs given back to a node in the what-if of its repair: capped at what it has installed


def _repair_starts_others(di: DiagnosisInput, hood: Neighbourhood, f: Finding) -> bool:
    """A health fault that costs GPUs on a node the waiting subject job does not use is its cause only if the
    repair would start it: in the cluster's order, the GPUs given back go to the jobs ahead first, and a
    cordoned node starts nobody (``fault_pass.starts_with_room``). One missing GPU cannot start seven 8-GPU
    jobs; the others are told it as context."""
    node = _node_of(f)
    if not node or not costs_capacity(f) or not _by_capacity_only(hood, f, {node}):
        return False
    waiting = [
        r.label
        for r in di.subjects
        if r.kind == "job" and (job := di.find("job", r.name, r.namespace)) is not None and is_pending(job)
    ]
    if not waiting:
        return False
    started = di.memo(f"repair-starts:{node}", lambda: starts_with_room(di, {node: RESTORED}))
    if started is None:  # outside an indexed block: no memo
        started = starts_with_room(di, {node: RESTORED})
    return not any(label in started for label in waiting)


def _began_after_onset(di: DiagnosisInput, f: Finding) -> bool:
    """A node state that began after the incident's onset (a cordon after a GPU fell off the bus) is not its
    cause: an incident re-diagnosed later sees it, but an effect cannot precede its cause. Not for a job
    still waiting, which a later fault can keep waiting.
    """
    if f.since is None or f.since <= di.onset + AFTER_ONSET_GRACE:
        return False
    return not any(
        (job := di.find("job", r.name, r.namespace)) is not None and is_pending(job)
        for r in di.subjects
        if r.kind == "job"
    )


def apply_scope(di: DiagnosisInput, findings: list[Finding]) -> list[Finding]:
    """Scope every finding; findings elsewhere are kept only when supported (as context, not as causes)."""
    hood = di.memo("neighbourhood", lambda: neighbourhood(di)) or neighbourhood(di)
    # Nodes whose fault hides room the job could use, but whose fix would start the jobs ahead of it first
    # (incidents.diagnosis.scheduling_pass): their faults are context for this job, not its cause.
    served_first = {n for f in findings if f.facts.get("served_first") for n in f.facts.get("nodes") or ()}
    out = []
    for f in findings:
        f.scope = scope_of(di, hood, f)
        if f.scope == CAUSE and served_first and _by_capacity_only(hood, f, served_first):
            f.scope = ELSEWHERE
        if f.scope == CAUSE and f.supported and _repair_starts_others(di, hood, f):
            f.scope = ELSEWHERE
        if f.scope == ELSEWHERE and not f.supported:
            continue
        out.append(f)
    return out


__all__ = [
    "CAUSE",
    "ELSEWHERE",
    "Neighbourhood",
    "apply_scope",
    "costs_capacity",
    "neighbourhood",
    "scope_of",
]
