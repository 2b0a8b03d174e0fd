"""incidents.audit.sentence: the history tab reads each audit entry as a sentence."""

from __future__ import annotations

import pytest

from incidents.audit import sentence
from incidents.models import AuditEntry


def entry(action: str, before: dict | None, after: dict | None) -> AuditEntry:
    return AuditEntry(action=action, before=before, after=after, user_name="alice")


@pytest.mark.parametrize(
    ("action", "before", "after", "text"),
    [
        (
            "incident.status",
            {"status": "open"},
            {"status": "acknowledged"},
            "Status changed from open to acknowledged.",
        ),
        (
            "incident.status",
            {"status": "open"},
            {
                "status": "resolved",
                "automatically": True,
                "resolved_at": "2026-11-29T04:00:00Z",
                "why": "alerts resolved",
            },
            "Resolved automatically at 2026-11-29T04:00:00Z: alerts resolved.",
        ),
        (
            "incident.status",
            {"status": "resolved"},
            {"status": "open", "reopened_by_alert": 7, "why": "it fired again"},
            "Reopened (was resolved) when alert #7 fired again: it fired again.",
        ),
        ("incident.owner", {"owner": ""}, {"owner": "bob"}, "Owner set to bob."),
        ("incident.owner", {"owner": "bob"}, {"owner": "alice"}, "Owner changed from bob to alice."),
        ("incident.owner", {"owner": "bob"}, {"owner": ""}, "Owner bob removed."),
        (
            "incident.all_clear",
            {"status": "acknowledged"},
            {"status": "acknowledged", "all_clear_since": "2026-11-29T04:00:00Z", "why": "healthy 15 min"},
            "All clear since 2026-11-29T04:00:00Z, while acknowledged: healthy 15 min.",
        ),
        ("handoff.create", None, {"summary": "waits on quota"}, "Handoff note written: “waits on quota”."),
        (
            "handoff.edit",
            {"summary": "a", "next_steps": "x", "owner": "bob"},
            {"summary": "a", "next_steps": "y", "owner": "alice"},
            "Handoff note edited: next steps, owner changed.",
        ),
        ("evidence.link", {"n": 1}, {"n": 2}, "evidence.link: n from 1 to 2."),
    ],
)
def test_it_writes_each_entry_as_a_sentence(action, before, after, text) -> None:  # type: ignore[no-untyped-def]
    assert sentence(entry(action, before, after)) == text
