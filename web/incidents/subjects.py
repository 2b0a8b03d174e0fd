"""The incident page's subjects and related entities as of the cursor, the related ones grouped by kind.

One query for the links, one for their versions at t and, when pods are shown, one for their containers'
state; related entities are read up to RELATED_MAX and counted beyond.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from collectors.models import EntityVersion
from incidents.models import Incident, IncidentSubject
from rcaweb import kinds
from web.inventory.podstatus import pod_status

RELATED_MAX = 500  # related entities read (one query); the page lists problems and counts the rest
HEALTHY = {k.name: k.healthy_phases for k in kinds.KINDS if k.healthy_phases}  # rcaweb/kinds.py
KIND_ORDER = {"node": 0, "gpu": 1, "job": 2, "pod": 3, "queue": 4, "project": 5}


@dataclass
class RelatedGroup:
    """Related entities of one kind: the ones in trouble at t listed first, the healthy ones only counted."""

    kind: str
    problems: list
    healthy: list

    @property
    def total(self) -> int:
        return len(self.problems) + len(self.healthy)


@dataclass
class SubjectsAt:
    """The incident's links to entities, split by role, with each shown entity's version at t."""

    subjects: list[IncidentSubject]
    related: list[IncidentSubject]  # every related link; the first RELATED_MAX are shown
    versions: dict[int, EntityVersion]  # by entity id, for the links shown

    @property
    def change_ids(self) -> list[int]:
        """The entities whose changes place the cursor bar's previous/next change: the subjects, else all shown."""
        return [s.entity_id for s in self.subjects] or [s.entity_id for s in self.shown]

    @property
    def shown(self) -> list[IncidentSubject]:
        return self.subjects + self.related[:RELATED_MAX]

    def context(self) -> dict[str, Any]:
        """The page's ``subjects``, ``related_groups`` and ``related_more``."""
        return {
            "subjects": [(s, self.versions.get(s.entity_id)) for s in self.subjects],
            "related_groups": related_groups(
                [(s, self.versions.get(s.entity_id)) for s in self.related[:RELATED_MAX]]
            ),
            "related_more": max(0, len(self.related) - RELATED_MAX),
        }


def subjects_at(incident: Incident, t: datetime) -> SubjectsAt:
    """The incident's subjects and related entities, each shown one with its version (and a pod's status) at t."""
    links = list(
        IncidentSubject.objects.filter(incident=incident)
        .select_related("entity", "entity__cluster")
        .order_by("role", "entity__kind", "entity__name")
    )
    subjects = [s for s in links if s.role == "subject"]
    related = [s for s in links if s.role != "subject"]
    out = SubjectsAt(subjects, related, {})
    shown = out.shown
    out.versions = {
        v.entity_id: v
        for v in EntityVersion.objects.as_of(t)
        .filter(entity_id__in=[s.entity_id for s in shown])
        .only("entity_id", "phase", "deleted", "valid_from", "gpus", "kind")
    }
    # A pod reads as the pod page and kubectl show it (CrashLoopBackOff, not its phase Running): its
    # containers' state, read for the pods shown only.
    pods = [s.entity_id for s in shown if s.entity.kind == "pod" and s.entity_id in out.versions]
    if pods:
        for entity_id, state in (
            EntityVersion.objects.as_of(t).filter(entity_id__in=pods).values_list("entity_id", "state")
        ):
            version = out.versions[entity_id]
            status = pod_status(state or {}, version.phase)
            version.status = status  # type: ignore[attr-defined]  # read in place of the phase by the page
    return out


def related_groups(rows: list) -> list[RelatedGroup]:
    """(link, version) rows grouped by kind; a row is a problem when its phase at t is not a healthy one
    (absent at t counts as a problem: a GPU that vanished, a pod that died)."""
    groups: dict[str, RelatedGroup] = {}
    for link, version in rows:
        kind = link.entity.kind
        g = groups.setdefault(kind, RelatedGroup(kind, [], []))
        ok = HEALTHY.get(kind)
        shown = getattr(version, "status", None) or (version.phase if version is not None else "")
        healthy = version is not None and (ok is None or (shown or "") in ok)
        (g.healthy if healthy else g.problems).append((link, version))
    return sorted(groups.values(), key=lambda g: (not g.problems, KIND_ORDER.get(g.kind, 9)))
