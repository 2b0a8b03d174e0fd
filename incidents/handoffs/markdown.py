"""Handoff notes as Markdown for chat and tickets.

Every link is absolute and carries the exporting page's cursor (``links``, incidents.handoffs.links); without
``links`` a link is a path carrying the incident's own cursor. Empty fields are left out, not shown as "—".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime

from django.urls import reverse
from django.utils import timezone

from collectors.sources.redact import redact_text
from incidents import causes
from incidents.handoffs.board import Board, HandoffProblem, HandoffRow, Lead
from incidents.handoffs.links import ExportLinks
from incidents.handoffs.services import FIELDS, LABELS, incident_cursor, key_subjects, note_gist
from incidents.models import AuditEntry, HandoffNote, Incident
from rcaweb.cursor import format_t
from rcaweb.durations import format_duration

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


def _lead_lines(lead: Lead | None, incident: Incident) -> list[str]:
    lead = lead or Lead()
    if lead.top is not None:
        h = lead.top
        top = (
            f"- Leading hypothesis: {_md_escape(causes.name(h.code))} (`{h.code}`, {h.status}, confidence "
            f"{h.confidence:.2f}): {_md_escape(note_gist(h.statement, 300))}"
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
    level: int = 2,
) -> str:
    """``now``: the moment the export describes (the page's cursor); the duration runs onset → resolution or → it.
    ``lead`` (incidents.handoffs.board.leads): the leading hypothesis and first action, written whether or not a
    note exists. ``level``: the incident's heading level (its note's fields one below)."""
    link: Callable[[str], str]
    if links is None:
        cur = incident_cursor(incident)
        link = cur.link
    else:
        link = links.url
    url = link(incident.get_absolute_url())
    latest = timezone.now().replace(second=0, microsecond=0)  # a future cursor: nothing is known past now
    now = min(now, latest) if now else timezone.now()
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
        f"{'#' * level} [Incident #{incident.pk}: {_md_escape(incident.title)}]({url})",
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
            lines += [f"{'#' * (level + 1)} {LABELS[f]}", "", value, ""]
    return "\n".join(lines).rstrip() + "\n"


def _member_lines(row: HandoffRow, url: str) -> list[str]:
    """A member of a problem under its lead: one linked line, and its own latest note's fields if it has one."""
    facts = [row.status, row.severity, f"open {format_duration(row.duration)}"]
    if row.owner:
        facts.append(f"owner {_md_escape(row.owner)}")
    lines = [f"- [#{row.pk}: {_md_escape(row.title)}]({url}) · " + " · ".join(facts)]
    note = row.latest
    if note is not None:
        lines.append(f"  - Handoff by {_md_escape(note.author_name)} at {_when(note.created)}")
        for f in FIELDS:
            value = _md_escape(getattr(note, f).strip())  # one line: a member is listed compactly
            if value:
                lines.append(f"  - {LABELS[f]}: {value}")
    return lines


def problem_markdown(problem: HandoffProblem, t: datetime, links: ExportLinks | None = None) -> str:
    """A problem: its lead incident in full (note or not, its leading hypothesis and first action), then, when
    others share its cause, a line naming the cause and each other member compactly with its own note."""
    lead = problem.lead
    if not problem.shared:
        return incident_markdown(lead.incident, lead.latest, lead.edits, t, links, lead.lead)
    link: Callable[[str], str] = links.url if links is not None else (lambda path: path)
    on = _md_escape(problem.on)
    if problem.subject is not None:  # the shared object, linked as every object a page names
        on = f"[{on}]({link(problem.subject.get_absolute_url())})"
    gpus = f", {problem.gpus} GPU{'s' if problem.gpus != 1 else ''} lost or blocked" if problem.gpus else ""
    head = [
        f"## Problem: {_md_escape(problem.cause_name)} on {_md_escape(problem.on)} "
        f"({problem.members} incidents{gpus})",
        "",
        f"- One cause: `{problem.code}` on {on}; [all {problem.members} open incidents]({link(problem.url)})",
        "",
    ]
    body = incident_markdown(lead.incident, lead.latest, lead.edits, t, links, lead.lead, level=3)
    members = [f"### The other {problem.members - 1} incident{'s' if problem.members != 2 else ''}", ""]
    for row in problem.others:
        members += _member_lines(row, links.url(row.incident.get_absolute_url()) if links else row.link)
    if problem.more:
        members.append(f"- and {problem.more} more: [all {problem.members}]({link(problem.url)})")
    return "\n".join([*head, body, *members]) + "\n"


def page_markdown(board: Board, t: datetime, links: ExportLinks | None = None) -> str:
    """The handoffs page as Markdown: every problem open at t, in the order to work them."""
    n, m = board.open_total, board.problems_total
    grouped = f" in {m} problem{'s' if m != 1 else ''}" if m < n else ""
    head = [f"# Handoff: {n} open incident{'s' if n != 1 else ''}{grouped} as of {format_t(t)}", ""]
    if links is not None:
        head[1:1] = ["", f"Page: {links.url(reverse('incidents:handoffs'))}"]
    if len(board.problems) < m:
        head.append(f"The first {len(board.problems)} problems by severity, impact and age.\n")
    body = [problem_markdown(p, t, links) for p in board.problems]
    return "\n".join([*head, *body]) if body else "\n".join([*head, "No open incidents."]) + "\n"
