"""Per-node fit and gang placement, as kube-scheduler's filters and KAI's allocate action see them.

A node is checked in kube-scheduler's filter order: NodeUnschedulable (cordon),
TaintToleration (scenario taints plus ``node.kubernetes.io/unreachable`` on a
NotReady node, as the node lifecycle controller adds it), NodeAffinity (node
selector), then NodeResourcesFit (free ``nvidia.com/gpu``: allocatable minus
what pods hold; 0 when the device plugin is unhealthy). Gangs are placed all
or nothing, bin-packing onto the most allocated node that fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .messages import INSUFFICIENT, SELECTOR, TAINT, UNSCHEDULABLE

if TYPE_CHECKING:
    from ..state import SimJob, SimNode
    from .world import World

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
    if not node.device_plugin_healthy:
        return []
    held = sum(1 for g in node.gpus if g.pod is not None)
    free = [g.index for g in node.gpus if g.present and g.healthy and g.pod is None]
    room = max(0, node.allocatable_gpus - held)
    return free[:room] if room < len(free) else free


class Placer:
    """Free GPUs of every node during one scheduling pass, with per-shape filter caching."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.order = {name: i for i, name in enumerate(world.nodes)}
        self.free: dict[str, list[int]] = {n: free_gpus(node) for n, node in world.nodes.items()}
        self._filters: dict[tuple, dict[str, tuple[str, dict[str, str] | None] | None]] = {}
        self.version = 0  # bumps on every bind/release, to invalidate cached failures
        self.memo: dict[Any, tuple[int, Any]] = {}  # (version, value): per-pass results valid until it moves

    def shape(self, job: SimJob) -> tuple:
        return (
            tuple(sorted(job.node_selector.items())),
            tuple(tuple(sorted(t.items())) for t in job.tolerations),
        )

    def filters(self, job: SimJob) -> dict[str, tuple[str, dict[str, str] | None] | None]:
        key = self.shape(job)
        got = self._filters.get(key)
        if got is None:
            got = {n: filter_node(node, job) for n, node in self.world.nodes.items()}
            self._filters[key] = got
        return got

    def place(
        self, job: SimJob, extra: dict[str, list[int]] | None = None
    ) -> tuple[list[tuple[str, list[int]]] | None, int, dict[str, int]]:
        """Place the whole gang or nothing. Returns (placement, pods placed before failing, free counts then)."""
        filt = self.filters(job)
        ok = [n for n, r in filt.items() if r is None]
        counts = {n: len(self.free[n]) + len((extra or {}).get(n, ())) for n in ok}
        chosen: list[str] = []
        gpp = job.gpus_per_pod
        for i in range(job.pods):
            best = None
            for n in ok:
                c = counts[n]
                if c >= gpp and (best is None or (c, self.order[n]) < (counts[best], self.order[best])):
                    best = n
            if best is None:
                return None, i, counts
            counts[best] -= gpp
            chosen.append(best)
        taken: dict[str, int] = {}
        out = []
        for n in chosen:
            pool = sorted([*self.free[n], *(extra or {}).get(n, ())])
            start = taken.get(n, 0)
            out.append((n, pool[start : start + gpp]))
            taken[n] = start + gpp
        return out, job.pods, counts

    def commit(self, placement: list[tuple[str, list[int]]]) -> None:
        for n, idx in placement:
            self.free[n] = [i for i in self.free[n] if i not in idx]
        self.version += 1

    def refresh(self, nodes: set[str]) -> None:
        for n in nodes:
            self.free[n] = free_gpus(self.world.nodes[n])
        self.version += 1

    def reasons(self, job: SimJob, counts: dict[str, int]) -> list[tuple[str, dict[str, str] | None]]:
        """Per-node failure reasons for the pod that did not fit, in node order."""
        filt = self.filters(job)
        out = []
        for n in self.world.nodes:
            r = filt[n]
            if r is not None:
                out.append(r)
            elif counts.get(n, 0) < job.gpus_per_pod:
                out.append((INSUFFICIENT, None))
        return out
