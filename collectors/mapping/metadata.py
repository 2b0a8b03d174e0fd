"""What the mappers read of an object's metadata and status: its metadata, conditions, owner, queue and
node pool labels."""

from __future__ import annotations

from typing import Any

from collectors.sources.redact import redact_text

QUEUE_LABELS = ("kai.scheduler/queue", "runai/queue", "kueue.x-k8s.io/queue-name")
NODEPOOL_LABELS = (
    "run.ai/node-pool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "node.kubernetes.io/instance-type",
)


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def conditions(items: list[dict[str, Any]] | None, *, with_message: bool = True) -> dict[str, dict[str, Any]]:
    """Conditions keyed by type, without the times that tick (lastHeartbeatTime, lastProbeTime)."""
    out: dict[str, dict[str, Any]] = {}
    for c in items or []:
        if not isinstance(c, dict) or not c.get("type"):
            continue
        entry: dict[str, Any] = {"status": c.get("status"), "reason": c.get("reason") or ""}
        if with_message:
            entry["message"] = redact_text(c.get("message") or "")
        entry["since"] = c.get("lastTransitionTime")
        out[str(c["type"])] = entry
    return out


def owner(obj: dict[str, Any]) -> dict[str, str] | None:
    """The controller owner reference (or the first owner), as {kind, name}."""
    refs = meta(obj).get("ownerReferences") or []
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not chosen:
        return None
    return {"kind": chosen.get("kind", ""), "name": chosen.get("name", ""), "uid": chosen.get("uid", "")}


def queue_label(labels: dict[str, str] | None) -> str:
    for key in QUEUE_LABELS:
        value = (labels or {}).get(key)
        if value:
            return value
    return ""


def nodepool(labels: dict[str, str]) -> str:
    for key in NODEPOOL_LABELS:
        if labels.get(key):
            return labels[key]
    return ""
