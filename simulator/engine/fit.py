"""Per-node fit, as kube-scheduler's filters see one node, and the room a node still has (``placement`` places
whole gangs with it).

A node is checked in kube-scheduler's filter order: NodeUnschedulable (cordon),
TaintToleration (scenario taints plus ``node.kubernetes.io/unreachable`` on a
NotReady node, as the node lifecycle controller adds it), NodeAffinity (node
selector), then NodeResourcesFit (free ``nvidia.com/gpu``: allocatable minus
what pods hold; 0 when the device plugin is unhealthy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .messages import (
    INSUFFICIENT,
    INSUFFICIENT_CPU,
    INSUFFICIENT_GPU_MEMORY,
    INSUFFICIENT_MEMORY,
    INSUFFICIENT_MIG,
    SELECTOR,
    TAINT,
    UNSCHEDULABLE,
)
from .sharing import cpu_memory_request, share_fraction

if TYPE_CHECKING:
    from ..state import SimJob, SimNode

EPS = 1e-9

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
UNREACHABLE_TAINTS = (
    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
)
# DefaultTolerationSeconds admission adds these to every pod.
DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def tolerates(tol: dict[str, Any], taint: dict[str, str]) -> bool:
    """Kubernetes' Toleration.ToleratesTaint."""
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    op = tol.get("operator", "Equal")
    if not tol.get("key"):
        return op == "Exists"
    if tol["key"] != taint.get("key"):
        return False
    return op == "Exists" or tol.get("value", "") == taint.get("value", "")


def node_taints(node: SimNode) -> list[dict[str, str]]:
    """spec.taints, including those the node lifecycle controller adds (see actions.py)."""
    return node.taints


def filter_node(node: SimNode, job: SimJob) -> tuple[str, dict[str, str] | None] | None:
    """The first filter a node fails for the job's pods (resources aside), or None."""
    tols = [*job.tolerations, *DEFAULT_TOLERATIONS]
    if node.unschedulable and not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in tols):
        return UNSCHEDULABLE, None
    for taint in node_taints(node):
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tols):
            return TAINT, taint
    for k, v in job.node_selector.items():
        if node.labels.get(k) != v:
            return SELECTOR, None
    return None


def free_gpus(node: SimNode) -> list[int]:
    """Indices a new pod can get: allocatable (present, healthy, plugin up) and not held by a pod."""
    if not node.device_plugin_healthy or node.mig_layout:
        return []
    held = sum(1 for g in node.gpus if g.pod is not None or g.reservation is not None)
    free = [g.index for g in node.gpus if g.present and g.healthy and g.pod is None and g.reservation is None]
    room = max(0, node.allocatable_gpus - held)
    return free[:room] if room < len(free) else free


@dataclass
class Room:
    """What one node can still give a pod: whole GPUs, room on shared GPUs, MIG instances, CPU and memory."""

    free: list[int]
    shared: dict[int, float] = field(default_factory=dict)  # GPU index -> fraction in use (reservation held)
    mig: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # profile -> free (gpu, GPU_I_ID)
    cpu: int | None = None  # millicores left; None = not counted (no cpu on the pool)
    mem: int | None = None

    def copy(self) -> Room:
        return Room(
            list(self.free), dict(self.shared), {k: list(v) for k, v in self.mig.items()}, self.cpu, self.mem
        )


def needs_rooms(job: SimJob) -> bool:
    return job.shared or bool(job.mig_profile)


def fit_pod(job: SimJob, node: SimNode, room: Room) -> tuple[Any, list[tuple[str, Any]]]:
    """(allocation, []) when one pod of the job fits the room, else (None, the node's reasons)."""
    why: list[tuple[str, Any]] = []
    alloc: Any = None
    if job.mig_profile:
        free = room.mig.get(job.mig_profile, [])
        if len(free) >= job.mig_count:
            alloc = free[: job.mig_count]
        else:
            why.append((INSUFFICIENT_MIG, job.mig_profile))
    elif job.shared:
        frac = share_fraction(job, node)
        if frac > 1 + EPS:
            why.append((INSUFFICIENT_GPU_MEMORY, None))
        elif node.sharing:
            fits = [(used, i) for i, used in room.shared.items() if used + frac <= 1 + EPS]
            if fits:
                alloc = [max(fits, key=lambda t: (t[0], -t[1]))[1]]  # bin-pack: the fullest shared GPU
            elif room.free:
                alloc = [min(room.free)]
        if alloc is None and not why:
            why.append((INSUFFICIENT, None))
    else:
        d = job.devices_per_pod
        if len(room.free) >= d:
            alloc = sorted(room.free)[:d]
        else:
            why.append((INSUFFICIENT, None))
    if room.cpu is not None or room.mem is not None:
        cpu, mem = cpu_memory_request(job)
        if room.cpu is not None and cpu > room.cpu:
            why.append((INSUFFICIENT_CPU, None))
        if room.mem is not None and mem > room.mem:
            why.append((INSUFFICIENT_MEMORY, None))
    return (None, why) if why else (alloc, [])


def take(job: SimJob, node: SimNode, room: Room, alloc: Any) -> None:
    if job.mig_profile:
        room.mig[job.mig_profile] = [x for x in room.mig[job.mig_profile] if x not in alloc]
    elif job.shared:
        i = alloc[0]
        if i in room.free:
            room.free.remove(i)
            room.shared[i] = 0.0
        room.shared[i] = room.shared[i] + share_fraction(job, node)
    else:
        room.free = [i for i in room.free if i not in alloc]
    if room.cpu is not None or room.mem is not None:
        cpu, mem = cpu_memory_request(job)
        if room.cpu is not None:
            room.cpu -= cpu
        if room.mem is not None:
            room.mem -= mem


def fit_score(job: SimJob, room: Room, alloc: Any) -> tuple:
    """Lower is better: bin-pack onto the most allocated node (and, for a share, the fullest GPU)."""
    if job.mig_profile:
        return (len(room.mig.get(job.mig_profile, [])),)
    if job.shared:
        i = alloc[0]
        return (0 if i in room.shared else 1, -room.shared.get(i, 0.0), len(room.free))
    return (len(room.free),)
