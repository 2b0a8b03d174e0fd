"""The queue a job is charged to (KAI Queue / Kueue ClusterQueue, else its project), and how its quota fields read."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis.types import DiagnosisInput, EntityState

QUOTA_FIELDS = ("quota_gpus", "limit_gpus", "over_quota_weight", "priority")


def quota_number(value: Any) -> float | None:
    """A quota field as a number: None when absent, unreadable or negative (no quota)."""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def policy_of(di: DiagnosisInput, job: EntityState) -> EntityState | None:
    """The queue the job is charged to (KAI Queue / Kueue ClusterQueue), else its project."""
    queue = job.get("queue") or ""
    project = job.get("project") or ""
    for name in (queue, project):
        if not name:
            continue
        found = di.find("queue", name) or None
        if found is not None:
            return found
    for q in di.queues:
        if project and q.get("project") == project:
            return q
    return di.find("project", project) if project else None


def field_leaf(path: str) -> str:
    """The last segment of a change's field path ("spec.quota_gpus" -> "quota_gpus")."""
    return path.rsplit(".", 1)[-1]
