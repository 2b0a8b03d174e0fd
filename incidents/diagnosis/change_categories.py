"""What a change is about: its category, which links it to the mechanisms it can cause, and whether it only
gives a waiting job more room (``incidents.diagnosis.changes`` reads them for the recent_change hypothesis).
"""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis.types import ChangeRec

# Field (leaf or top-level key) -> category, which links a change to a mechanism.
CATEGORIES = {
    "quota_gpus": "quota",
    "limit_gpus": "quota",
    "over_quota_weight": "quota",
    "priority": "priority",
    "image": "image",
    "containers": "image",
    "gpus_per_pod": "request",
    "pods": "request",
    "gpus_total": "request",
    "node_selector": "selector",
    "tolerations": "taint",
    "taints": "taint",
    "unschedulable": "cordon",
    "labels": "selector",
    "priority_class": "priority",
}
# Which mechanisms a category of change can cause.
LINKS = {
    "quota": (C.PROJECT_QUOTA_EXHAUSTED, C.PREEMPTED),
    "priority": (C.QUEUE_PRIORITY, C.PREEMPTED),
    "image": (C.IMAGE_PULL_ERROR, C.CRASHLOOP_CONFIG_ERROR, C.GPU_OOM, C.OOM_KILLED),
    "request": (
        C.REQUEST_SIZE_CHANGED,
        C.GPU_CAPACITY_SHORTAGE,
        C.GPU_FRAGMENTATION,
        C.PROJECT_QUOTA_EXHAUSTED,
    ),
    "selector": (C.NODE_SELECTOR_MISMATCH,),
    "taint": (C.UNTOLERATED_TAINT,),
    "cordon": (C.GPU_NODE_UNAVAILABLE, C.GPU_CAPACITY_SHORTAGE),
    "external": (),
}
IGNORED_TOP = {
    "phase",
    "conditions",
    "active",
    "succeeded",
    "failed",
    "scheduling",
    "node",
    "started",
    "admitted",
    "ready",
    "ready_reason",
    "allocatable",
    "capacity",
    "xid_last",
    "ecc_dbe_total",
    "ecc_sbe_total",
    "present",
    "pod",
    "namespace",
    "generation",
    "created",
    "deleted",
    "state",
    "restart_count",
}


def category(ch: ChangeRec) -> str | None:
    if ch.source == "external":
        return "external"
    parts = ch.field.split(".")
    if parts[-1] == "containers" or parts[0] == "containers":
        # A pod's container list also carries its runtime state: only an image change is a change.
        return "image" if _images(ch.old) != _images(ch.new) else None
    if parts[-1] == "taints" and _own_taints(ch.old) == _own_taints(ch.new):
        return None  # only the node lifecycle controller's condition taints moved (NotReady, cordon mirror)
    for key in (parts[-1], parts[0]):
        if key in CATEGORIES:
            if key == "labels" and ch.entity is not None and ch.entity.kind != "node":
                return None
            return CATEGORIES[key]
    if parts[0] in IGNORED_TOP or parts[-1] in IGNORED_TOP:
        return None
    return None


def loosens(ch: ChangeRec) -> bool:
    """A change that only gives a waiting job more room: a quota, limit or over-quota weight raised (or a limit
    lifted), a request lowered, a cordon lifted, a taint removed, a toleration added. None of these can be
    why a job waits; "a quota change right before onset" is the classic wrong lead when it was a raise."""
    if ch.source == "external":
        return False  # what an external change did is not known field by field
    leaf = ch.field.rsplit(".", 1)[-1]
    old, new = _number(ch.old), _number(ch.new)
    if leaf in ("quota_gpus", "over_quota_weight"):
        return old is not None and new is not None and new > old
    if leaf == "limit_gpus":  # None: no limit (KAI's -1, Kueue without a borrowing limit)
        return old is not None and (ch.new is None or (new is not None and new > old))
    if leaf in ("gpus_per_pod", "pods", "gpus_total"):
        return old is not None and new is not None and new < old
    if leaf == "unschedulable":
        return bool(ch.old) and not ch.new
    if leaf == "taints":
        before, after = set(_own_taints(ch.old)), set(_own_taints(ch.new))
        return after < before
    if leaf == "tolerations":
        had, has = _tolerations(ch.old), _tolerations(ch.new)
        return had is not None and has is not None and has > had
    return False


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _tolerations(value: object) -> set[str] | None:
    if value is None:
        return set()
    if not isinstance(value, list):
        return None
    return {repr(sorted(t.items())) if isinstance(t, dict) else repr(t) for t in value}


def _own_taints(taints: object) -> list[str]:
    """Taints someone set, without the node.kubernetes.io/* ones Kubernetes derives from node conditions."""
    if not isinstance(taints, list):
        return []
    return sorted(
        f"{t.get('key')}={t.get('value')}:{t.get('effect')}"
        for t in taints
        if isinstance(t, dict) and not str(t.get("key", "")).startswith("node.kubernetes.io/")
    )


def _images(containers: object) -> list[str]:
    if not isinstance(containers, list):
        return [str(containers)]
    return [str(c.get("image")) for c in containers if isinstance(c, dict)]
