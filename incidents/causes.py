"""Diagnosis codes in an operator's words, and the run in force at t of each incident, in one expression.

The codes themselves live in ``incidents.diagnosis.codes`` (docs/design.md §8) and are never renamed; the
names here are for people: the incident list shows them and its cause filter accepts either
(``?cause=gpu_missing`` or ``?cause=GPU missing``).
"""

from __future__ import annotations

import re
from datetime import datetime

from django.db.models import Expression, OuterRef, Subquery
from django.db.models.functions import Coalesce

from incidents.diagnosis import codes as C
from incidents.models import DiagnosisRun

NAMES: dict[str, str] = {
    C.GPU_CAPACITY_SHORTAGE: "not enough free GPUs",
    C.GPU_FRAGMENTATION: "free GPUs fragmented across nodes",
    C.UNTOLERATED_TAINT: "untolerated taint",
    C.NODE_SELECTOR_MISMATCH: "node selector matches no node",
    C.PROJECT_QUOTA_EXHAUSTED: "project quota exhausted",
    C.QUEUE_PRIORITY: "behind higher-priority jobs in the queue",
    C.REQUEST_SIZE_CHANGED: "request size changed",
    C.GPU_NODE_UNAVAILABLE: "GPU node unavailable",
    C.CPU_MEMORY_SHORTAGE: "not enough CPU or memory",
    C.DEPARTMENT_QUOTA_EXHAUSTED: "department quota exhausted",
    C.MIG_PROFILE_UNAVAILABLE: "MIG profile unavailable",
    C.GPU_XID_FAULT: "GPU Xid fault",
    C.GPU_ECC_ERRORS: "GPU ECC errors",
    C.GPU_MISSING: "GPU missing",
    C.DEVICE_PLUGIN_UNHEALTHY: "device plugin unhealthy",
    C.GPU_THERMAL_THROTTLING: "GPU thermal throttling",
    C.NVLINK_ERRORS: "NVLink errors",
    C.CRASHLOOP_CONFIG_ERROR: "crash loop from a configuration error",
    C.OOM_KILLED: "out of memory (OOM-killed)",
    C.GPU_OOM: "GPU out of memory",
    C.IMAGE_PULL_ERROR: "image pull error",
    C.PREEMPTED: "preempted",
    C.IDLE_GPU_ALLOCATION: "allocated GPUs idle",
    C.OVER_REQUESTED: "more requested than used",
    C.RECENT_CHANGE: "a recent change",
}


def name(code: str) -> str:
    """The human name of a code; an unknown code (a newer release's) is shown as it is."""
    return NAMES.get(code, code.replace("_", " "))


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-()]+", " ", text.lower()).strip()


_EXACT = {_norm(code): code for code in C.ALL_CODES} | {_norm(n): code for code, n in NAMES.items()}


def codes_for(text: str) -> list[str]:
    """The codes a person means by ``text``: a code or a human name exactly (case, ``_`` and spaces aside),
    else every code whose code or name contains it ("quota" → both quota codes); [] when none does."""
    wanted = _norm(text)
    if not wanted:
        return []
    if wanted in _EXACT:
        return [_EXACT[wanted]]
    return [code for code in C.ALL_CODES if wanted in _norm(code) or wanted in _norm(name(code))]


def run_in_force(t: datetime, field: str = "pk") -> Expression:
    """A field (the pk by default) of each incident's diagnosis run in force at t, as an annotation (one
    correlated subquery per row, no query per row): the latest run describing a moment at or before t, else the
    onset's (the first). ``incidents.diagnosis_run.pick_run`` does the same over runs already read."""
    runs = DiagnosisRun.objects.filter(incident=OuterRef("pk"))
    return Coalesce(
        Subquery(runs.filter(at__lte=t).order_by("-at", "-id").values(field)[:1]),
        Subquery(runs.order_by("at", "id").values(field)[:1]),
    )


def cause_in_force(t: datetime) -> Expression:
    """Each incident's cause key (``incidents.problems.cause_key``) as the run in force at t tells it; the
    incident's own key (its latest run's) when it has no run. The home page groups a past cursor's problems by
    it, as they were then."""
    return Coalesce(run_in_force(t, "cause_key"), "cause_key")
