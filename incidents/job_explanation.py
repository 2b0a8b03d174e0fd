"""The job page's "why is this job not running at t" panel, loaded from the database.

The answer itself is pure (``incidents.diagnosis.explain.explain_job``); this module reads its input: the
inventory as of t (``incidents.diagnosis_input.load_job_input``) and, for a waiting job, the finished jobs'
durations its start estimate replays (``incidents.eta_input.load_basis``).
"""

from __future__ import annotations

from datetime import datetime

from collectors.models import Entity
from incidents.diagnosis.explain import JobExplanation, explain_job
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis_input import load_job_input
from incidents.eta_input import load_basis


def explain_job_at(entity: Entity, t: datetime) -> JobExplanation:
    """The panel for a job Entity at t."""
    di, job = load_job_input(entity, t)
    basis = load_basis(entity.cluster, t) if job is not None and is_pending(job) else None
    return explain_job(di, job, label=f"{entity.namespace}/{entity.name}", basis=basis)
