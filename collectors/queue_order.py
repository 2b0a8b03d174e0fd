"""A job version's typed ``priority`` and ``submitted`` columns, read from its state on the write path.

These are columns, not an order: every position and waiting list comes from the scheduling model's order
(``incidents.waiting_order`` over ``incidents.diagnosis.queue_order``), which the inventory may not import."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rcaweb.cursor import CursorError, parse_t

# KAI Scheduler / Run:ai default PriorityClasses (value used when a job state carries no numeric priority).
PRIORITY_CLASS_VALUES = {"inference": 125, "build": 100, "interactive-preemptible": 75, "train": 50}


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
