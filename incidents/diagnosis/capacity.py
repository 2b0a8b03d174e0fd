"""A node's whole GPUs as the scheduler offers them: the model's one reading, for every page that counts them.

The diagnosis weighs a node through its fit rows (``fit.node_fit``); grouping's related-incident rule (is a
fault what keeps a waiting pod off this node?), the fleet page's usable capacity and the scheduling pass all
read the same few facts of a node state: whether the scheduler places anything there at all, how many whole
GPUs the device plugin advertises, and how much room is left once the pods bound there are counted. They are
here, pure, so none of them keeps its own copy.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from incidents.diagnosis.types import gpus_of

KUBE_TAINT_PREFIX = "node.kubernetes.io/"  # what Kubernetes itself taints a failing or cordoned node with
MIG_PREFIX = "nvidia.com/mig-"


def ready(state: dict[str, Any] | None, phase: str | None = None) -> bool:
    """Whether the node is Ready: its phase when the inventory has one, else its state's ``ready``."""
    if phase:
        return phase == "Ready"
    return (state or {}).get("ready") is not False


def shut(state: dict[str, Any] | None, phase: str | None = None) -> bool:
    """Whether the scheduler places nothing on the node: not Ready, cordoned, or tainted by Kubernetes itself
    (``node.kubernetes.io/...``, NoSchedule or NoExecute), whatever a pod tolerates of its own taints."""
    if not ready(state, phase):
        return True
    state = state or {}
    return bool(state.get("unschedulable")) or any(
        str(t.get("key", "")).startswith(KUBE_TAINT_PREFIX) and t.get("effect") in ("NoSchedule", "NoExecute")
        for t in state.get("taints") or []
        if isinstance(t, dict)
    )


def offered_gpus(state: dict[str, Any] | None, phase: str | None = None) -> int:
    """Whole GPUs the node's device plugin advertises to the scheduler (``allocatable``), none while it is not
    Ready. A cordoned node still offers them to the pods bound there; :func:`shut` says whether new ones come."""
    state = state or {}
    if not ready(state, phase):
        return 0
    return gpus_of(state.get("allocatable") or state.get("capacity") or {})


def offers_mig(state: dict[str, Any] | None, phase: str | None = None) -> bool:
    """Whether a Ready node advertises MIG instances (the mixed strategy advertises them instead of GPUs)."""
    state = state or {}
    if not ready(state, phase):
        return False
    return any(
        str(k).startswith(MIG_PREFIX) and gpus_of({"n": v}, "n") > 0
        for k, v in (state.get("allocatable") or {}).items()
    )


class Room(NamedTuple):
    """Whole GPUs free on a node: ``now`` while a fault lasts, ``fixed`` once it is fixed; ``short``: the node
    offers fewer GPUs than it has."""

    now: float
    fixed: float
    short: bool = False

    def keeps_out(self, asks: float) -> bool:
        """Whether the fault is what keeps a pod asking ``asks`` GPUs off this node: it fits once fixed only."""
        return self.now < asks <= self.fixed


UNKNOWN_ROOM = Room(0, math.inf)  # node or count unknown: the fault may be what keeps anyone out


def room(nominal: int, usable: float, held: int) -> Room:
    """The room on a node that has ``nominal`` GPUs, of which ``usable`` are offered while faulty, ``held`` by
    its bound pods."""
    return Room(max(0, usable - held), nominal - held, usable < nominal)


__all__ = [
    "KUBE_TAINT_PREFIX",
    "UNKNOWN_ROOM",
    "Room",
    "offered_gpus",
    "offers_mig",
    "ready",
    "room",
    "shut",
]
