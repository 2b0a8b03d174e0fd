"""Incidents open at t grouped into problems (incidents.problems), in the order to work them: one read.

The home page's open-incidents panel and the handoffs page (and its Markdown) list the same problems in the
same order. Both start here: one query returns every open incident as a narrow row (id, cluster, the cause key
of its diagnosis run in force at t, impact) in urgency order (incidents.ordering); Python groups them by
(cluster, key). An incident whose cause is about itself alone (no key) is a problem of its own. What each page
then reads of the rows it shows is its own business, in a fixed number of queries too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Q, QuerySet

from incidents import causes
from incidents.models import Incident
from incidents.ordering import by_urgency

logger = logging.getLogger(__name__)

SCAN_LIMIT = 10_000  # open incidents read (id, cause, impact) to group into problems; beyond, counted only


def open_at(t: datetime) -> QuerySet[Incident]:
    """Incidents open at t: onset <= t, not resolved by t."""
    return Incident.objects.filter(onset__lte=t).filter(Q(resolved_at__isnull=True) | Q(resolved_at__gt=t))


@dataclass
class Problem:
    """Open incidents sharing one cause at t (or one incident whose cause is its own), most urgent first."""

    cluster_id: int | None
    key: str  # the cause key in force at t ("project_quota_exhausted|project/vision"), "" for a lone incident
    members: list[tuple[int, int]] = field(default_factory=list)  # (incident id, its GPUs lost or blocked)

    @property
    def lead(self) -> int:
        return self.members[0][0]

    @property
    def gpus(self) -> int:
        return sum(impact for _, impact in self.members)

    @property
    def shared(self) -> bool:
        """Several incidents with one cause: worked as one problem."""
        return len(self.members) > 1


@dataclass
class OpenProblems:
    problems: list[Problem]  # in urgency order of their leads
    open_total: int  # every incident open at t (counted past SCAN_LIMIT)
    inference: set[int]  # incidents whose subject workload serves inference


def group_open(t: datetime, incidents: QuerySet[Incident] | None = None) -> OpenProblems:
    """``incidents`` (default: :func:`open_at` t) grouped by the (cluster, cause key) of their diagnosis run in
    force at t, in urgency order: one query (two past SCAN_LIMIT incidents, to count them)."""
    qs = open_at(t) if incidents is None else incidents
    order = list(
        by_urgency(qs, t)
        .annotate(cause_at_t=causes.cause_in_force(t))
        .values_list("id", "cluster_id", "cause_at_t", "impact_gpus", "inference")[: SCAN_LIMIT + 1]
    )
    open_total = len(order) if len(order) <= SCAN_LIMIT else qs.count()
    groups: dict[tuple[int | None, str], Problem] = {}
    inference: set[int] = set()
    for pk, cluster_id, key, impact, inf in order[:SCAN_LIMIT]:
        gkey = (cluster_id, key) if key else (cluster_id, f"#{pk}")
        if gkey not in groups:
            groups[gkey] = Problem(cluster_id, key or "")
        groups[gkey].members.append((pk, impact or 0))
        if inf:
            inference.add(pk)
    return OpenProblems(list(groups.values()), open_total, inference)
