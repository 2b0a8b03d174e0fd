"""Handoff notes as Markdown for chat and tickets.

Every link is absolute and carries the exporting page's cursor (``links``, incidents.handoffs.links); without
``links`` a link is a path carrying the incident's own cursor. Empty fields are left out, not shown as "—".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from collectors.sources.redact import redact_text
from incidents import causes
from incidents.handoffs.links import ExportLinks
from incidents.handoffs.services import FIELDS, LABELS, HandoffRow, _gist, incident_cursor, key_subjects
from incidents.models import AuditEntry, HandoffNote, Hypothesis, Incident, ProposedAction
from rcaweb.cursor import format_duration, format_t

# Characters that start links, images, raw HTML, entities, emphasis or code in CommonMark/GFM. Each is
# escaped with a backslash, Markdown's own escape: an HTML entity (&lt;) would show as such in a title
# wherever the export is read as plain text or pasted into a chat that does not decode entities.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]()!|~<>&])")
# A line that would become a heading, quote, rule or setext underline where the export is pasted.
_MD_LINE_START = re.compile(r"^(\s*)(#|>|=+\s*$|-{3,}\s*$|\+\s)")
# What GFM turns into a link without brackets: scheme://… and www.… (an escaped ":" or "." is not matched).
_AUTOLINK = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*):(?=//)|\b(www)\.")


def _md_escape(text: str, *, multiline: bool = False) -> str:
    """Alert- and operator-derived text as inert Markdown: secrets redacted, no links (bracketed or bare),
    images, raw HTML or fake headings (the export is pasted into chat and tickets that render Markdown, alert
    text is written by whoever can reach Alertmanager, and an owner or a note by any responder). Every
    user-written field goes through here: titles, names, owner, note fields."""
    text = redact_text(text or "")
    lines = text.splitlines() if multiline else [" ".join(text.split())]
    out = []
    for line in lines:
        line = _MD_SPECIAL.sub(r"\\\1", line)
        line = _AUTOLINK.sub(lambda m: f"{m.group(1)}\\:" if m.group(1) else f"{m.group(2)}\\.", line)
        line = _MD_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), line)
        out.append(line)
    return "\n".join(out)


def _when(value: datetime | None) -> str:
    return format_t(value) if value else "—"


def _md_code(text: str) -> str:
    """A command as an inline code span (nothing inside one renders), fenced by more backticks than it holds."""
    text = " ".join(redact_text(text or "").split())
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}"


@dataclass
class Lead:
    """What an export says first about an incident, note or no note: the leading hypothesis and the first
    proposed action of its diagnosis in force at the export's moment."""

    top: Hypothesis | None = None
    action: ProposedAction | None = None


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


def _lead_lines(lead: Lead | None, incident: Incident) -> list[str]:
    lead = lead or Lead()
    if lead.top is not None:
        h = lead.top
        top = (
            f"- Leading hypothesis: {_md_escape(causes.name(h.code))} (`{h.code}`, {h.status}, confidence "
            f"{h.confidence:.2f}): {_md_escape(_gist(h.statement, 300))}"
        )
    elif incident.diagnosed_at is not None:
        top = "- Leading hypothesis: none supported (no cause found)"
    else:
        top = "- Leading hypothesis: not diagnosed yet"
    lines = [top]
    if lead.action is not None:
        command = f": {_md_code(lead.action.command)}" if lead.action.command.strip() else ""
        lines.append(f"- First action: {_md_escape(lead.action.title)}{command}")
    else:
        lines.append("- First action: none proposed")
    return lines


def incident_markdown(
    incident: Incident,
    note: HandoffNote | None,
    edits: Iterable[AuditEntry] = (),
    now: datetime | None = None,
    links: ExportLinks | None = None,
    lead: Lead | None = None,
) -> str:
    """``now``: the moment the export describes (the page's cursor); the duration runs onset → resolution or → it.
    ``lead`` (:func:`leads`): the leading hypothesis and first action, written whether or not a note exists."""
    link: Callable[[str], str]
    if links is None:
        cur = incident_cursor(incident)
        link = cur.link
    else:
        link = links.url
    url = link(incident.get_absolute_url())
    now = now or timezone.now()
    ongoing = " (ongoing)" if incident.ended_at(now) is None else ""
    facts = [
        f"Status: {incident.status}",
        f"Severity: {incident.severity}",
        f"Onset: {_when(incident.onset)}",
        f"Duration: {format_duration(incident.duration_at(now))}{ongoing}",
    ]
    if incident.cluster:
        facts.append(f"Cluster: {_md_escape(incident.cluster.name)}")
    if incident.owner:
        facts.append(f"Owner: {_md_escape(incident.owner)}")
    lines = [
        f"## [Incident #{incident.pk}: {_md_escape(incident.title)}]({url})",
        "",
        "- " + " · ".join(facts),
        f"- Link: [{url}]({url})",
    ]
    subjects, more = key_subjects(incident, limit=10)
    if subjects:
        names = ", ".join(
            f"[{s.kind} {_md_escape(s.namespace) + '/' if s.namespace else ''}{_md_escape(s.name)}]"
            f"({link(s.get_absolute_url())})"
            for s in subjects
        )
        lines.append(f"- Subjects: {names}" + (f" and {more} more (see the incident page)" if more else ""))
    lines += _lead_lines(lead, incident)
    if note is None:
        return "\n".join([*lines, "", "_No handoff note yet._"]) + "\n"
    edited = list(edits)
    by = f"- Handoff by {_md_escape(note.author_name)} at {_when(note.created)}"
    if edited:
        by += f" (edited {_when(edited[0].time)} by {_md_escape(edited[0].user_name)}; {len(edited)} edit{'s' if len(edited) != 1 else ''})"
    lines += [by, ""]
    for f in FIELDS:
        value = _md_escape(getattr(note, f).strip(), multiline=True)
        if value:  # an empty field says nothing: no heading with a placeholder under it
            lines += [f"### {LABELS[f]}", "", value, ""]
    return "\n".join(lines).rstrip() + "\n"


def page_markdown(
    incidents: Iterable[HandoffRow],
    edits: dict[int, list[AuditEntry]],
    t: datetime,
    links: ExportLinks | None = None,
) -> str:
    incs = list(incidents)
    lead_of = leads([i.incident.pk for i in incs], t) if incs else {}
    head = [f"# Handoff: {len(incs)} open incident{'s' if len(incs) != 1 else ''} as of {format_t(t)}", ""]
    if links is not None:
        head[1:1] = ["", f"Page: {links.url(reverse('incidents:handoffs'))}"]
    body = [
        incident_markdown(
            i.incident,
            i.latest,
            edits.get(i.latest.pk, []) if i.latest else [],
            t,
            links,
            lead_of.get(i.incident.pk),
        )
        for i in incs
    ]
    return "\n".join(head) + "\n".join(body) if body else "\n".join([*head, "No open incidents."]) + "\n"
