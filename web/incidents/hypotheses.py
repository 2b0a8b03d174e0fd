"""The incident page's diagnosis at the cursor: its hypotheses, the top one, and the pages the answer links.

The diagnosis the page shows is the one for the cursor (the latest made at or before t); older and newer
runs are listed with the moment each describes.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch

from incidents.diagnosis import codes
from incidents.models import Citation, DiagnosisRun, Hypothesis, Incident, IncidentSubject

# Causes a container's own log, YAML and events explain: the answer links the pod's page (its troubleshooter) first.
TROUBLESHOOT_CODES = frozenset(
    {codes.CRASHLOOP_CONFIG_ERROR, codes.OOM_KILLED, codes.GPU_OOM, codes.IMAGE_PULL_ERROR}
)


def hypotheses_context(
    incident: Incident, run: DiagnosisRun | None, runs: list[DiagnosisRun], subjects: list[IncidentSubject]
) -> dict[str, Any]:
    """The page's ``hypotheses`` (about this incident), ``elsewhere`` (about other objects), ``top`` and the
    pages its answer links, for the run in force at the cursor (``run``, one of ``runs``; one query and its
    two prefetches)."""
    current = run is None or run is runs[-1]
    mine = incident.hypotheses.current() if current else Hypothesis.objects.filter(run=run)
    hypotheses = list(
        mine.select_related("subject", "subject__cluster").prefetch_related(
            Prefetch("citation_set", queryset=Citation.objects.select_related("observation")), "actions"
        )
    )
    top = next((h for h in hypotheses if h.scope != "elsewhere" and h.status == "supported"), None)
    return {
        "hypotheses": [h for h in hypotheses if h.scope != "elsewhere"],
        "elsewhere": [h for h in hypotheses if h.scope == "elsewhere"],
        "top": top,
        "troubleshoot_pod": troubleshoot_pod(top, subjects),
        "waiting_job": waiting_job(top, subjects),
    }


def troubleshoot_pod(top: Hypothesis | None, subjects: list[IncidentSubject]) -> Any:
    """The pod whose page answers a crash-loop, OOM or image-pull cause (its logs, YAML, events): the cause's own
    subject when it is a pod, else the incident's first pod subject; None for other causes."""
    if top is None or top.code not in TROUBLESHOOT_CODES:
        return None
    if top.subject is not None and top.subject.kind == "pod":
        return top.subject
    return next((s.entity for s in subjects if s.entity.kind == "pod"), None)


def waiting_job(top: Hypothesis | None, subjects: list[IncidentSubject]) -> Any:
    """The job whose place in line the answer links to (its why-pending panel: position, the jobs ahead, the
    what-if page): the incident's first job subject when the answer is about scheduling, a fault that takes
    GPUs away, or no cause found."""
    if top is not None and top.code not in (*codes.SCHEDULING_CODES, *codes.HEALTH_CODES):
        return None
    if top is not None and top.subject is not None and top.subject.kind == "job":
        return top.subject
    return next((s.entity for s in subjects if s.entity.kind == "job" and s.role == "subject"), None)
