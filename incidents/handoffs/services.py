"""Create and edit handoff notes; every write leaves an AuditEntry with before/after (docs/conventions.md §12–13)."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django import forms
from django.db import transaction
from django.utils import timezone

from collectors.models import Entity
from collectors.sources.redact import redact_text
from incidents import audit
from incidents.models import AuditEntry, HandoffNote, Incident, IncidentSubject
from rcaweb.cursor import MAX_WINDOW, Cursor

logger = logging.getLogger(__name__)

FIELDS = ("summary", "checked", "missing", "next_steps", "owner")
LABELS = {
    "summary": "Summary",
    "checked": "Hypotheses checked (with result)",
    "missing": "Evidence still missing",
    "next_steps": "Next steps",
    "owner": "Owner",
}


class HandoffForm(forms.Form):
    """The structured note. ``note`` names the note being edited; absent (or ``new`` pressed) = a new note."""

    summary = forms.CharField(
        label=LABELS["summary"], max_length=5000, widget=forms.Textarea(attrs={"rows": 3})
    )
    checked = forms.CharField(
        label=LABELS["checked"], max_length=10000, required=False, widget=forms.Textarea(attrs={"rows": 6})
    )
    missing = forms.CharField(
        label=LABELS["missing"], max_length=5000, required=False, widget=forms.Textarea(attrs={"rows": 4})
    )
    next_steps = forms.CharField(
        label=LABELS["next_steps"], max_length=5000, required=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    owner = forms.CharField(label=LABELS["owner"], max_length=150, required=False)
    note = forms.IntegerField(required=False, widget=forms.HiddenInput)


def _fields(data: dict[str, Any]) -> dict[str, str]:
    """The note's fields as stored: stripped, and redacted (a pasted log line may carry a credential)."""
    return {f: redact_text((data.get(f) or "").strip()) for f in FIELDS}


def snapshot(note: HandoffNote) -> dict[str, str]:
    return {f: getattr(note, f) for f in FIELDS}


@transaction.atomic
def create_handoff(incident: Incident, user: Any, data: dict[str, Any], request_id: str = "") -> HandoffNote:
    now = timezone.now()
    note = HandoffNote.objects.create(
        incident=incident,
        author=user if getattr(user, "is_authenticated", False) else None,
        author_name=user.get_username()
        if getattr(user, "is_authenticated", False)
        else str(user or "system"),
        created=now,
        updated=now,
        **_fields(data),
    )
    audit.record(
        user=user,
        action="handoff.create",
        target=note,
        before=None,
        after=snapshot(note),
        request_id=request_id,
    )
    return note


@transaction.atomic
def edit_handoff(note: HandoffNote, user: Any, data: dict[str, Any], request_id: str = "") -> bool:
    """Apply an edit; returns False (and writes nothing) when no field changed."""
    note = HandoffNote.objects.select_for_update().get(pk=note.pk)
    before = snapshot(note)
    after = _fields(data)
    if after == before:
        return False
    for f, v in after.items():
        setattr(note, f, v)
    note.updated = timezone.now()
    note.save(update_fields=[*FIELDS, "updated"])
    audit.record(
        user=user, action="handoff.edit", target=note, before=before, after=after, request_id=request_id
    )
    return True


def prefill(incident: Incident, user: Any = None) -> dict[str, str]:
    """A starting note from the incident's current hypotheses, open questions, failed sources and actions."""
    hyps = list(incident.hypotheses.causes().order_by("rank", "id"))
    top = next((h for h in hyps if h.status == "supported"), None)
    summary = f"{incident.title} — {incident.get_status_display()}, {incident.get_severity_display()}."
    if top is not None:
        summary += f" Leading hypothesis: {top.code} ({top.status}, confidence {top.confidence:.2f}): {note_gist(top.statement, 300)}"
    checked = "\n".join(
        f"- {h.code}: {h.status} (confidence {h.confidence:.2f}) — {note_gist(h.statement)}"
        + (f" Why: {note_gist(h.why)}" if h.why else "")
        for h in hyps
    )
    questions: list[str] = []
    for h in hyps:
        if h.status != "refuted":
            questions += [str(q) for q in h.next_questions or [] if str(q) not in questions]
    failed = incident.observations.exclude(error="").values_list("source", "locator", "error")[:20]
    missing = "\n".join(
        [f"- {q}" for q in questions]
        + [f"- {src} could not answer {loc}: {err[:160]}" for src, loc, err in failed]
    )
    actions = incident.actions.current().order_by("rank", "id").values_list("title", flat=True)[:10]
    owner = incident.owner or (user.get_username() if getattr(user, "is_authenticated", False) else "")
    return {
        "summary": summary,
        "checked": checked,
        "missing": missing,
        "next_steps": "\n".join(f"- {a}" for a in actions),
        "owner": owner,
    }


def note_gist(text: str, limit: int = 200) -> str:
    """The first sentence of a hypothesis statement, bounded: the note is for reading at a shift change."""
    first = re.split(r"(?<=[.!?])\s", (text or "").strip(), maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def history(notes: Iterable[HandoffNote]) -> dict[int, list[AuditEntry]]:
    """Edit entries (newest first) per note id, in one query."""
    ids = [n.pk for n in notes]
    out: dict[int, list[AuditEntry]] = defaultdict(list)
    if ids:
        for e in AuditEntry.objects.filter(
            target_type="handoffnote", target_id__in=ids, action="handoff.edit"
        ).order_by("-time", "-id"):
            out[e.target_id].append(e)
    return dict(out)


SUBJECT_ORDER = {"job": 0, "node": 1, "gpu": 2, "project": 3, "queue": 4, "pod": 5}


def key_subjects(incident: Incident, limit: int = 8) -> tuple[list[Entity], int]:
    """The subjects worth naming in a handoff (jobs, nodes, GPUs first) and how many more objects there are.

    Only the incident's subjects are named; its related objects (a pending job's incident relates up to 64
    candidate nodes and their GPUs: hundreds of rows) are only counted, and the incident page links them.
    :func:`incidents.handoffs.board.open_problems_with_notes` prefetches both (``subject_links``,
    ``n_related``); otherwise two queries.
    """
    links = getattr(incident, "subject_links", None)
    if links is not None:
        entities, n_related = [link.entity for link in links], incident.n_related  # type: ignore[attr-defined]  # the board's annotation
    else:
        rows = IncidentSubject.objects.filter(incident=incident)
        entities = [link.entity for link in rows.filter(role="subject").select_related("entity__cluster")]
        n_related = rows.exclude(role="subject").count()
    subjects = sorted(entities, key=lambda e: (SUBJECT_ORDER.get(e.kind, 9), e.namespace, e.name))
    return subjects[:limit], max(0, len(subjects) - limit) + n_related


def incident_cursor(incident: Incident) -> Cursor:
    """The moment a handoff link should open an incident at: its onset, with its evidence window behind it."""
    window = incident.onset - incident.window_start if incident.window_start else timedelta(0)
    window = min(max(window, timedelta(minutes=30)), MAX_WINDOW)
    return Cursor(at=incident.onset.replace(microsecond=0), window=window, window_given=True)
