"""The order incidents are worked in: severity (critical first), then impact, then age (the oldest first).

Impact is what the incident costs the fleet: production inference before training, then the GPUs lost or
blocked — a GPU subject counts its GPUs, otherwise the largest GPU figure among the subject job/pod (its
request) and node (its capacity) over the incident's span up to t. Both are correlated subqueries
annotated on the incident query (SQL, not per row), so a page ordering 50 or 5,000 incidents still runs
one query for them; the query-budget tests hold that.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Least

from collectors.models import EntityVersion
from incidents.models import Incident, IncidentSubject

URGENCY_ORDER = ("severity_rank", "-inference", "-impact_gpus", "onset", "id")
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
WORKLOAD_KINDS = ("job", "pod")


def _subject_versions(t: datetime) -> QuerySet[EntityVersion]:
    """Versions of the outer incident's subjects valid at some moment of [onset, min(resolution, t)]."""
    end = Least(Coalesce(OuterRef("resolved_at"), Value(t)), Value(t))
    return (
        EntityVersion.objects.filter(
            entity__incidentsubject__incident=OuterRef("pk"),
            entity__incidentsubject__role="subject",
            valid_from__lte=end,
        )
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=OuterRef("onset")))
        .order_by()
    )


def with_impact(qs: QuerySet[Incident], t: datetime) -> QuerySet[Incident]:
    """Annotate ``severity_rank``, ``inference`` (a subject workload runs at priority class inference) and
    ``impact_gpus``; order with ``URGENCY_ORDER``."""
    gpu_subjects = (
        IncidentSubject.objects.filter(incident=OuterRef("pk"), role="subject", entity__kind="gpu")
        .order_by()
        .values("incident")
        .annotate(n=Count("id"))
        .values("n")
    )
    # MAX without GROUP BY: one row for all the subjects' versions (Func, so Django adds no GROUP BY).
    most_gpus = (
        _subject_versions(t)
        .filter(kind__in=(*WORKLOAD_KINDS, "node"))
        .annotate(m=Func(F("gpus"), function="MAX"))
        .values("m")
    )
    inference = _subject_versions(t).filter(kind__in=WORKLOAD_KINDS, state__priority_class="inference")
    return qs.annotate(
        severity_rank=Case(
            *(When(severity=s, then=Value(r)) for s, r in SEVERITY_RANK.items()),
            default=Value(len(SEVERITY_RANK)),
            output_field=IntegerField(),
        ),
        inference=Exists(inference),
        impact_gpus=Coalesce(
            Subquery(gpu_subjects, output_field=IntegerField()),
            Subquery(most_gpus, output_field=IntegerField()),
            Value(0),
        ),
    )


def by_urgency(qs: QuerySet[Incident], t: datetime) -> QuerySet[Incident]:
    """``qs`` in the order to work it at t: severity, inference first, GPUs lost or blocked, oldest first."""
    return with_impact(qs, t).order_by(*URGENCY_ORDER)
