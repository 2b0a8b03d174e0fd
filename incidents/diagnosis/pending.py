"""Whether a job waits, and since when its current wait began."""

from __future__ import annotations

from datetime import datetime

from incidents.diagnosis.types import DiagnosisInput, EntityState


def is_pending(job: EntityState) -> bool:
    return job.get("phase") in ("Pending", "Suspended") or (
        job.get("phase") is None and not job.get("active")
    )


def first_pending_since(di: DiagnosisInput, job: EntityState) -> datetime | None:
    """When the job's current pending spell began, from its history."""
    since = None
    for v in reversed(di.history.get(job.ref) or [job]):
        if is_pending(v):
            since = v.valid_from
        else:
            break
    return since
