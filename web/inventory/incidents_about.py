"""The incidents about an inventory object at t, for the entity pages (collectors knows nothing of incidents).

Every job, pod, node, GPU, queue and project page lists the incidents that name the object (as a subject
or as related), open at t or whose evidence window covers t, each with its status and its top cause as the
incident page would show it at t, linking to the incident with the page's cursor. One query whatever the
number of incidents: the rows are capped at ``SHOWN`` and the totals come from window counts.
``web.inventory.entity_page`` imports this inside a function, like the why-pending panel.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Case, Count, OuterRef, Q, Subquery, Value, When, Window
from django.db.models.functions import Coalesce

from collectors.models import Entity
from incidents.models import DiagnosisRun, IncidentSubject
from rcaweb.cursor import Cursor
from web.templatetags.rcaweb import cursor_reverse

SHOWN = 10
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class IncidentAbout:
    """One row of the entity page's "Incidents about this …" panel."""

    pk: int
    title: str
    status: str
    severity: str
    role: str  # subject | related
    onset: datetime
    resolved_at: datetime | None
    open_at_t: bool  # begun and not resolved at t (else its window covers t: just before, or resolved since)
    top_code: str  # "" = no cause found (or not diagnosed yet: see ``diagnosed``)
    top_statement: str
    diagnosed: bool
    url: str  # the incident page with the cursor


def _run_field(field: str, t: datetime) -> Coalesce:
    """``field`` of the run the incident page shows at t: the latest at or before t, else the first."""
    runs = DiagnosisRun.objects.filter(incident=OuterRef("incident_id"))
    return Coalesce(
        Subquery(runs.filter(at__lte=t).order_by("-at", "-id").values(field)[:1]),
        Subquery(runs.order_by("at", "id").values(field)[:1]),
    )


def covering(t: datetime) -> Q:
    """Incidents (seen from IncidentSubject) open at t, or whose window [window_start, window_end] covers t."""
    open_at_t = Q(incident__onset__lte=t) & (
        Q(incident__resolved_at__isnull=True) | Q(incident__resolved_at__gt=t)
    )
    window = Q(incident__window_start__lte=t) & (
        Q(incident__window_end__gte=t)
        | (Q(incident__window_end__isnull=True) & Q(incident__resolved_at__isnull=True))
    )
    return open_at_t | window


@dataclass(frozen=True)
class About:
    """What an entity page shows: the first ``SHOWN`` rows, and how many incidents have it as a subject and
    how many only relate it (a node is related to the incident of every pending job that could use it)."""

    rows: list[IncidentAbout]
    subject_total: int
    related_total: int

    @property
    def subjects(self) -> list[IncidentAbout]:
        return [r for r in self.rows if r.role == "subject"]

    @property
    def related(self) -> list[IncidentAbout]:
        return [r for r in self.rows if r.role != "subject"]

    @property
    def total(self) -> int:
        return self.subject_total + self.related_total


def incidents_about(entity: Entity, cursor: Cursor) -> About:
    """The first ``SHOWN`` incidents about ``entity`` at the cursor's t, with the totals (one query).

    Order: the ones it is the subject of first, then open at t, severity (critical first), newest onset.
    """
    t = cursor.t
    rows = (
        IncidentSubject.objects.filter(covering(t), entity=entity)
        .annotate(
            open_at_t=Case(
                When(
                    Q(incident__onset__lte=t)
                    & (Q(incident__resolved_at__isnull=True) | Q(incident__resolved_at__gt=t)),
                    then=Value(True),
                ),
                default=Value(False),
            ),
            sev=Case(
                *(When(incident__severity=s, then=Value(r)) for s, r in SEVERITY_RANK.items()),
                default=Value(len(SEVERITY_RANK)),
            ),
            run_code=_run_field("top_code", t),
            run_statement=_run_field("top_statement", t),
            total=Window(Count("id")),
            subject_total=Window(Count("id", filter=Q(role="subject"))),
        )
        .order_by(
            Case(When(role="subject", then=Value(0)), default=Value(1)),
            "-open_at_t",
            "sev",
            "-incident__onset",
            "-incident_id",
        )
        .values_list(
            "incident_id",
            "incident__title",
            "incident__status",
            "incident__severity",
            "role",
            "incident__onset",
            "incident__resolved_at",
            "open_at_t",
            "run_code",
            "run_statement",
            "total",
            "subject_total",
        )[:SHOWN]
    )
    out: list[IncidentAbout] = []
    totals: list[tuple[int, int]] = [(0, 0)]
    for pk, title, status, severity, role, onset, resolved_at, open_at_t, code, statement, n, n_subj in rows:
        totals.append((n, n_subj))
        out.append(
            IncidentAbout(
                pk=pk,
                title=title,
                status=status,
                severity=severity,
                role=role,
                onset=onset,
                resolved_at=resolved_at,
                open_at_t=bool(open_at_t),
                top_code=code or "",
                top_statement=statement or "",
                diagnosed=code is not None,
                url=cursor_reverse(cursor, "incidents:incident", pk),
            )
        )
    total, subject_total = totals[-1]
    return About(out, subject_total, total - subject_total)
