"""Handoff notes as Markdown for chat and tickets; every link is an absolute path carrying the incident's cursor."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.utils import timezone

from incidents.handoffs.services import FIELDS, LABELS, incident_cursor, key_subjects
from incidents.models import AuditEntry, HandoffNote, Incident
from rcaweb.cursor import format_duration, format_t


def _md_escape(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")


def _when(value: datetime | None) -> str:
    return format_t(value) if value else "—"


def incident_markdown(
    incident: Incident,
    note: HandoffNote | None,
    edits: Iterable[AuditEntry] = (),
    now: datetime | None = None,
) -> str:
    """``now``: the moment the export describes (the page's cursor); the duration runs onset → resolution or → it."""
    cur = incident_cursor(incident)
    url = cur.link(incident.get_absolute_url())
    now = now or timezone.now()
    ongoing = " (ongoing)" if incident.ended_at(now) is None else ""
    lines = [
        f"## [Incident #{incident.pk}: {_md_escape(incident.title)}]({url})",
        "",
        f"- Status: {incident.status} · Severity: {incident.severity} · Onset: {_when(incident.onset)}"
        f" · Duration: {format_duration(incident.duration_at(now))}{ongoing}"
        f" · Cluster: {incident.cluster.name if incident.cluster else '—'}",
        f"- Link: [{url}]({url})",
    ]
    subjects, more = key_subjects(incident, limit=10)
    if subjects:
        links = ", ".join(
            f"[{s.kind} {s.namespace + '/' if s.namespace else ''}{_md_escape(s.name)}]({cur.link(s.get_absolute_url())})"
            for s in subjects
        )
        lines.append(f"- Subjects: {links}" + (f" and {more} more (see the incident page)" if more else ""))
    if note is None:
        lines += ["", "_No handoff note yet._", ""]
        for f in FIELDS:
            lines += [f"### {LABELS[f]}", "", "—", ""]
        return "\n".join(lines).rstrip() + "\n"
    edited = list(edits)
    by = f"- Handoff by {note.author_name} at {_when(note.created)}"
    if edited:
        by += f" (edited {_when(edited[0].time)} by {edited[0].user_name}; {len(edited)} edit{'s' if len(edited) != 1 else ''})"
    lines += [by, ""]
    for f in FIELDS:
        value = getattr(note, f).strip() or "—"
        lines += [f"### {LABELS[f]}", "", value, ""]
    return "\n".join(lines).rstrip() + "\n"


def page_markdown(incidents: Iterable[Incident], edits: dict[int, list[AuditEntry]], t: datetime) -> str:
    incs = list(incidents)
    head = [f"# Handoff: {len(incs)} open incident{'s' if len(incs) != 1 else ''} as of {format_t(t)}", ""]
    body = [incident_markdown(i, i.latest, edits.get(i.latest.pk, []) if i.latest else [], t) for i in incs]  # type: ignore[attr-defined]
    return "\n".join(head) + "\n".join(body) if body else "\n".join([*head, "No open incidents."]) + "\n"
