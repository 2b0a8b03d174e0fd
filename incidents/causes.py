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

NAMES = C.NAMES  # the names live beside the codes, where the pure diagnosis writes its statements with them


name = C.name


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
