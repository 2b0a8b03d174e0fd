"""The order a scheduler considers waiting jobs in: higher priority first, then earlier submission, then the
job recorded first. Shared by the write path (a job version's typed ``priority``/``submitted`` columns) and the
pages (queue lists, a pending job's position), so both order the same way."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rcaweb.cursor import CursorError, parse_t

# KAI Scheduler / Run:ai default PriorityClasses (value used when a job state carries no numeric priority).
PRIORITY_CLASS_VALUES = {"inference": 125, "build": 100, "interactive-preemptible": 75, "train": 50}
NEVER_SUBMITTED = datetime(9999, 12, 31, tzinfo=UTC)  # a job without a submission time waits behind the rest


def job_priority(state: dict[str, Any]) -> int:
    """Numeric priority of a job: ``state.priority`` when the collector has it, else its PriorityClass' default."""
    p = state.get("priority")
    if isinstance(p, int) and not isinstance(p, bool):
        return p
    return PRIORITY_CLASS_VALUES.get(str(state.get("priority_class") or ""), 0)


def job_submitted(state: dict[str, Any]) -> datetime | None:
    """When the job was submitted (UTC), or None when its state has no readable submission time."""
    s = state.get("submitted")
    if not s:
        return None
    try:
        return parse_t(str(s))
    except (CursorError, ValueError):
        return None


def order_key(state: dict[str, Any], entity_id: int) -> tuple[int, datetime, int]:
    """Sort key of a waiting job: the scheduler considers smaller keys first."""
    return (-job_priority(state), job_submitted(state) or NEVER_SUBMITTED, entity_id)
