"""The incident page's related incidents: folded by title, and apart those that wait for their own quota or queue.

A pending job relates every node it might run on, so a failed node on a busy cluster relates dozens of jobs
that its recovery would not start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from incidents import problems
from incidents.models import Incident
from rcaweb.row_attribute import Via

RELATED_INCIDENTS_READ = 200  # read to fold; at most RELATED_INCIDENTS_SHOWN rows are shown
RELATED_INCIDENTS_SHOWN = 20
# Shared causes about policy, not hardware: a related incident whose current top cause is one of these waits
# for its own quota or queue, not for this incident's node or GPU.
POLICY_CAUSE_KINDS = ("project", "queue")


@dataclass
class RelatedIncidentRow:
    """A related incident on the incident page, standing for every related incident with its title: the
    newest, ``same`` (how many) and ``first_onset`` (the oldest's onset)."""

    incident: Incident
    same: int
    first_onset: datetime

    # what incident_detail.html reads of the incident itself
    pk = Via[int]("incident")
    title = Via[str]("incident")
    status = Via[str]("incident")
    onset = Via[datetime]("incident")

    def get_absolute_url(self) -> str:
        return self.incident.get_absolute_url()


@dataclass
class HeldElsewhere:
    """Related incidents whose own current cause is a quota or a queue (one problem, ``key``)."""

    key: str
    code: str
    what: str
    count: int

    def get_absolute_url(self) -> str:
        return "/incidents/?" + urlencode({"cause": self.key})


def related_incidents(incident: Incident) -> dict[str, Any]:
    """The page's ``related_incidents``, those that may hang on this one, folded by title, and apart, its
    ``related_held``, counted by problem, those that their own diagnosis says wait for their quota or queue
    (one query, bounded)."""
    mine: list[Incident] = []
    held: dict[str, HeldElsewhere] = {}
    for inc in incident.related.order_by("-onset")[:RELATED_INCIDENTS_READ]:  # newest first
        code, what = problems.describe(inc.cause_key) if inc.cause_key else ("", "")
        if what.split(" ", 1)[0] in POLICY_CAUSE_KINDS:
            group = held.setdefault(inc.cause_key, HeldElsewhere(inc.cause_key, code, what, 0))
            group.count += 1
        else:
            mine.append(inc)
    return {
        "related_incidents": _fold_same_titles(mine),
        "related_held": sorted(held.values(), key=lambda g: (-g.count, g.key)),
    }


def _fold_same_titles(incidents: list[Incident]) -> list[RelatedIncidentRow]:
    """Related incidents with the same title (25 "GPUJobPendingTooLong" on one node) are one row: the newest,
    with ``same`` (how many) and ``first_onset`` (the oldest's onset)."""
    rows: dict[str, RelatedIncidentRow] = {}
    for inc in incidents:  # newest first
        row = rows.get(inc.title)
        if row is None:
            rows[inc.title] = RelatedIncidentRow(inc, 1, inc.onset)
        else:
            row.same += 1
            row.first_onset = inc.onset
    return list(rows.values())[:RELATED_INCIDENTS_SHOWN]
