"""The audit trail for what humans edit, and what rcaweb changes by itself (docs/conventions.md §12): written explicitly, never by signals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import models
from django.utils import timezone

from incidents.models import AuditEntry


def record(
    *,
    user: Any,
    action: str,
    target: models.Model,
    before: dict | None,
    after: dict | None,
    request_id: str = "",
    time: datetime | None = None,
) -> AuditEntry:
    """Write one AuditEntry (who, what, when, before/after). Call inside the service's transaction.

    ``time`` defaults to now; rcaweb's own transitions (incidents.lifecycle) pass the clock they ran at, which
    in a fast-forwarded scenario is the simulated time, so the history reads on the same clock as the alerts.
    """
    is_user = user is not None and getattr(user, "is_authenticated", False)
    return AuditEntry.objects.create(
        time=time or timezone.now(),
        user=user if is_user else None,
        user_name=user.get_username() if is_user else str(user or "system"),
        request_id=request_id,
        action=action,
        target_type=target._meta.model_name or target.__class__.__name__.lower(),
        target_id=target.pk,
        object_repr=str(target)[:300],
        before=before,
        after=after,
    )


#
# Sentences: the history tab and the audit log read entries as text, not as the stored JSON
#
_HANDOFF_FIELDS = {
    "summary": "summary",
    "checked": "hypotheses checked",
    "missing": "evidence still missing",
    "next_steps": "next steps",
    "owner": "owner",
}


def _quote(value: Any, limit: int = 120) -> str:
    text = " ".join(str(value).split())
    return f"“{text if len(text) <= limit else text[: limit - 1].rstrip() + '…'}”"


def _because(why: Any) -> str:
    return f": {why}" if why else ""


def sentence(entry: AuditEntry) -> str:
    """What an entry changed, as one sentence ("Status changed from open to acknowledged.")."""
    before: dict[str, Any] = entry.before if isinstance(entry.before, dict) else {}
    after: dict[str, Any] = entry.after if isinstance(entry.after, dict) else {}
    if entry.action == "incident.status":
        old, new = before.get("status"), after.get("status")
        if after.get("automatically"):
            when = f" at {after['resolved_at']}" if after.get("resolved_at") else ""
            return f"Resolved automatically{when}{_because(after.get('why'))}."
        if after.get("reopened_by_alert"):
            return f"Reopened (was {old}) when alert #{after['reopened_by_alert']} fired again{_because(after.get('why'))}."
        return f"Status changed from {old} to {new}." if old else f"Status set to {new}."
    if entry.action == "incident.owner":
        old, new = before.get("owner") or "", after.get("owner") or ""
        if not new:
            return f"Owner {old} removed." if old else "Owner cleared."
        return f"Owner changed from {old} to {new}." if old else f"Owner set to {new}."
    if entry.action == "incident.all_clear":
        if after.get("all_clear_since"):
            return f"All clear since {after['all_clear_since']}, while {after.get('status')}{_because(after.get('why'))}."
        return f"No longer all clear{_because(after.get('why'))}."
    if entry.action == "handoff.create":
        return (
            f"Handoff note written: {_quote(after.get('summary', ''))}."
            if after.get("summary")
            else "Handoff note written."
        )
    if entry.action == "handoff.edit":
        changed = [label for f, label in _HANDOFF_FIELDS.items() if before.get(f) != after.get(f)]
        return "Handoff note edited: " + (", ".join(changed) or "no field") + " changed."
    keys = sorted(set(before) | set(after))
    parts = [f"{k} from {before.get(k)} to {after.get(k)}" for k in keys if before.get(k) != after.get(k)]
    return f"{entry.action}: " + ("; ".join(parts) or "no change") + "."
