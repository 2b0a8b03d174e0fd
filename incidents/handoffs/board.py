"""What the handoffs page and its Markdown list: the problems open at t, each with its incidents and their notes.

Problems are the home page's (incidents.open_problems: incidents whose cause in force at t is one shared fault,
in the order to work them). Each problem leads with its most urgent incident: its latest note, its leading
hypothesis and first proposed action as the diagnosis in force at t tells them (:func:`leads`). The other
members follow, each with its own latest note if it has one. A fixed number of queries, whatever the number
of incidents, notes or related objects.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.db.models import Count, IntegerField, OuterRef, Prefetch, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from collectors.models import Cluster, Entity, EntityVersion
from incidents import causes, problems
from incidents.handoffs.services import history, incident_cursor, key_subjects
from incidents.models import AuditEntry, HandoffNote, Hypothesis, Incident, IncidentSubject, ProposedAction
from incidents.open_problems import Problem, group_open, open_at
from incidents.titles import TitleLines
from rcaweb.row_attribute import Via

logger = logging.getLogger(__name__)

PROBLEMS_SHOWN = 100  # problems listed; the heading counts them all
MEMBERS_SHOWN = 8  # a problem's other incidents listed under its lead; the rest are counted and linked


@dataclass
class Lead:
    """What is said first about an incident, note or no note: the leading hypothesis and the first proposed
    action of its diagnosis in force at the page's moment."""

    top: Hypothesis | None = None
    action: ProposedAction | None = None

    @property
    def top_name(self) -> str:
        """The leading cause's human name ("Project quota exhausted")."""
        name = causes.name(self.top.code) if self.top is not None else ""
        return name[:1].upper() + name[1:]


def leads(incident_ids: Sequence[int], t: datetime) -> dict[int, Lead]:
    """The :class:`Lead` of each incident, from its diagnosis run in force at t (incidents.causes.run_in_force;
    hypotheses saved without a run count for an incident that has none): two queries, whatever the number."""
    in_force = Incident.objects.filter(pk__in=incident_ids).annotate(r=causes.run_in_force(t)).values("r")
    unrun = Q(incident_id__in=incident_ids, run__isnull=True, superseded=False)
    out: dict[int, Lead] = {pk: Lead() for pk in incident_ids}
    hyps = Hypothesis.objects.filter(Q(run_id__in=in_force) | unrun, scope="cause", status="supported")
    for h in hyps.order_by("rank", "id"):  # the run's best first; a run's beats one saved without a run
        lead = out[h.incident_id]
        if lead.top is None or (lead.top.run_id is None and h.run_id is not None):
            lead.top = h
    acts = ProposedAction.objects.filter(Q(run_id__in=in_force) | unrun).order_by("rank", "id")
    for a in acts.only("id", "incident_id", "run_id", "title", "command"):
        lead = out[a.incident_id]
        if lead.action is None or (lead.action.run_id is None and a.run_id is not None):
            lead.action = a
    return out


@dataclass
class HandoffRow(TitleLines):
    """An open incident on the handoffs page and in its Markdown: the incident with its latest note, its lead
    (leading hypothesis and first action at t), the subjects worth naming and how long it has been open at t."""

    incident: Incident
    latest: HandoffNote | None
    lead: Lead
    key_subjects: list[Entity]
    more_subjects: int
    duration: timedelta  # open at t: onset → t
    edits: list[AuditEntry] = field(default_factory=list)  # of the latest note, newest first
    link: str = ""  # the incident page at its onset (services.incident_cursor): what the next shift opens

    # what handoff_list.html reads of the incident itself
    pk = Via[int]("incident")
    title = Via[str]("incident")
    severity = Via[str]("incident")
    status = Via[str]("incident")
    onset = Via[datetime]("incident")
    cluster = Via[Cluster | None]("incident")
    owner = Via[str]("incident")
    diagnosed_at = Via[datetime | None]("incident")

    @property
    def top(self) -> Hypothesis | None:
        return self.lead.top



@dataclass
class HandoffProblem:
    """One problem: its most urgent incident (``lead``) and the other members listed (``others``)."""

    lead: HandoffRow
    others: list[HandoffRow] = field(default_factory=list)
    members: int = 1  # incidents of the problem open at t
    more: int = 0  # members neither the lead nor listed
    gpus: int = 0  # GPUs lost or blocked, summed over the members
    key: str = ""  # the shared cause key in force at t; "" for an incident that is its own problem
    url: str = ""  # the incident list filtered to the problem's open incidents
    subject: Entity | None = None  # the shared object, when the inventory knows it at t
    subject_label: str = ""  # how operators name it: "h100-03 GPU 4" for a GPU, else its name

    @property
    def shared(self) -> bool:
        return self.members > 1

    @property
    def code(self) -> str:
        return problems.describe(self.key)[0] if self.key else ""

    @property
    def cause_name(self) -> str:
        """The shared cause in words, as a heading starts ("Project quota exhausted")."""
        name = causes.name(self.code) if self.code else ""
        return name[:1].upper() + name[1:]

    @property
    def on(self) -> str:
        """The shared object in words: "project vision", "GPU h100-03 GPU 4" (its key names it by UUID)."""
        if self.subject is not None and self.subject_label:
            return (
                f"{self.subject.kind} {self.subject_label}"
                if self.subject.kind != "gpu"
                else self.subject_label
            )
        return problems.describe(self.key)[1] if self.key else ""


@dataclass
class Board:
    problems: list[HandoffProblem]
    open_total: int  # incidents open at t
    problems_total: int  # problems open at t (more than listed past PROBLEMS_SHOWN)

    def rows(self) -> list[HandoffRow]:
        """Every incident listed, leads and members, in the page's order."""
        return [row for p in self.problems for row in (p.lead, *p.others)]


def _rows(ids: list[int], t: datetime) -> dict[int, HandoffRow]:
    """The listed incidents with their newest note and subjects (3 queries), its edits (1) and their leads (2)."""
    related = (
        IncidentSubject.objects.filter(incident=OuterRef("pk"))
        .exclude(role="subject")
        .order_by()
        .values("incident")
        .annotate(n=Count("id"))
        .values("n")
    )
    qs = (
        Incident.objects.filter(pk__in=ids)
        .annotate(n_related=Coalesce(Subquery(related, output_field=IntegerField()), Value(0)))
        .select_related("cluster")
        .prefetch_related(
            Prefetch("handoffs", queryset=HandoffNote.objects.order_by("-created", "-id"), to_attr="notes"),
            Prefetch(
                "incidentsubject_set",
                queryset=IncidentSubject.objects.filter(role="subject").select_related("entity__cluster"),
                to_attr="subject_links",
            ),
        )
    )
    lead_of = leads(ids, t) if ids else {}
    # a future cursor is flagged by the bar; nothing is known past now (to the minute, as a cursor reads)
    known = min(t, timezone.now().replace(second=0, microsecond=0))
    out: dict[int, HandoffRow] = {}
    for inc in qs:
        notes: list[HandoffNote] = inc.notes  # the prefetch's to_attr list
        subjects, more = key_subjects(inc)
        out[inc.pk] = HandoffRow(
            inc,
            latest=notes[0] if notes else None,
            lead=lead_of.get(inc.pk, Lead()),
            key_subjects=subjects,
            more_subjects=more,
            duration=inc.duration_at(known),
            link=incident_cursor(inc).link(inc.get_absolute_url()),
        )
    edits = history([r.latest for r in out.values() if r.latest])
    for row in out.values():
        if row.latest is not None:
            row.edits = edits.get(row.latest.pk, [])
    return out


def _shared_objects(
    shown: list[Problem], t: datetime
) -> dict[tuple[int | None, str, str], tuple[Entity, str]]:
    """The object each shared problem is about, as the inventory has it at t, with its label: one query (none
    when no problem is shared)."""
    wanted = set()
    for p in shown:
        if p.shared:
            kind, _, name = p.key.partition("|")[2].partition("/")
            wanted.add((p.cluster_id, kind, name))
    if not wanted:
        return {}
    versions = (
        EntityVersion.objects.as_of(t)
        .filter(
            entity__cluster_id__in={c for c, _, _ in wanted},
            kind__in={k for _, k, _ in wanted},
            entity__name__in={n for _, _, n in wanted},
        )
        .select_related("entity__cluster")
    )
    out: dict[tuple[int | None, str, str], tuple[Entity, str]] = {}
    for v in versions:
        e = v.entity
        label = f"{v.node or '?'} GPU {v.state.get('index', '?')}" if e.kind == "gpu" else e.name
        out[(e.cluster_id, e.kind, e.name)] = (e, label)
    return out


def open_problems_with_notes(t: datetime) -> Board:
    """The problems open at t in the order to work them (at most PROBLEMS_SHOWN, each with at most
    MEMBERS_SHOWN members besides its lead): 8 queries (7 when no problem is shared), whatever the number of incidents."""
    # a resolved incident without a resolution time (an import, a hand edit) is not handed over
    grouped = group_open(t, open_at(t).exclude(status="resolved", resolved_at__isnull=True))
    shown = grouped.problems[:PROBLEMS_SHOWN]
    ids = [pk for p in shown for pk, _ in p.members[: MEMBERS_SHOWN + 1]]
    rows = _rows(ids, t)
    objects = _shared_objects(shown, t)
    out: list[HandoffProblem] = []
    for p in shown:
        listed = [rows[pk] for pk, _ in p.members[: MEMBERS_SHOWN + 1] if pk in rows]
        if not listed:  # resolved or deleted between the two reads
            continue
        query = urlencode({"status": "active", "cause": p.key})
        kind, _, name = p.key.partition("|")[2].partition("/")
        subject, label = objects.get((p.cluster_id, kind, name), (None, ""))
        out.append(
            HandoffProblem(
                lead=listed[0],
                others=listed[1:],
                members=len(p.members),
                more=len(p.members) - len(listed),
                gpus=p.gpus,
                key=p.key if p.shared else "",
                url=reverse("incidents:incidents") + "?" + query if p.shared else "",
                subject=subject if p.shared else None,
                subject_label=label if p.shared else "",
            )
        )
    return Board(out, grouped.open_total, len(grouped.problems))
