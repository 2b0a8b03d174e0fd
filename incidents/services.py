"""What humans do to incidents: status transitions, owner, acknowledge — each audited (CONVENTIONS 12).

Views, the API and tests call these; nothing writes incident status anywhere else.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from incidents.audit import record
from incidents.models import Incident

logger = logging.getLogger(__name__)

ORDER = ["open", "investigating", "mitigated", "resolved"]


class TransitionError(ValueError):
    """A status change the lifecycle does not allow; the message says which moves are possible."""


def allowed_transitions(status: str) -> list[str]:
    """Forward moves (skipping allowed: open → resolved), reopen, and mitigated → investigating (it did not hold)."""
    if status not in ORDER:
        return []
    here = ORDER.index(status)
    out = ORDER[here + 1 :]
    if status == "mitigated":
        out = ["investigating", *out]
    if status != "open":
        out = [*out, "open"]
    return out


def set_status(incident: Incident, new_status: str, user: Any, request_id: str = "") -> Incident:
    """Move ``incident`` to ``new_status`` and audit who, when, from, to. Raises :class:`TransitionError`."""
    with transaction.atomic():
        locked = Incident.objects.select_for_update().get(pk=incident.pk)
        old = locked.status
        if new_status not in allowed_transitions(old):
            allowed = ", ".join(allowed_transitions(old)) or "none"
            raise TransitionError(
                f"cannot move incident #{locked.pk} from {old} to {new_status!r} (allowed: {allowed})"
            )
        now = timezone.now()
        locked.status = new_status
        fields = ["status"]
        if new_status == "resolved":
            locked.resolved_at = now
            if locked.window_end is None:
                locked.window_end = now
            fields += ["resolved_at", "window_end"]
        elif old == "resolved":  # reopened: the window is open again
            locked.resolved_at = None
            locked.window_end = None
            fields += ["resolved_at", "window_end"]
        locked.save(update_fields=fields)
        record(
            user=user,
            action="incident.status",
            target=locked,
            before={"status": old},
            after={"status": new_status},
            request_id=request_id,
        )
    logger.info("incident %s: %s -> %s by %s", locked.pk, old, new_status, getattr(user, "username", user))
    _refresh(incident, locked)
    return incident


def assign_owner(incident: Incident, owner: str, user: Any, request_id: str = "") -> Incident:
    """Set (or clear, with "") the owner: the person the next shift asks."""
    owner = (owner or "").strip()[:150]
    with transaction.atomic():
        locked = Incident.objects.select_for_update().get(pk=incident.pk)
        if locked.owner == owner:
            return incident
        old = locked.owner
        locked.owner = owner
        locked.save(update_fields=["owner"])
        record(
            user=user,
            action="incident.owner",
            target=locked,
            before={"owner": old},
            after={"owner": owner},
            request_id=request_id,
        )
    _refresh(incident, locked)
    return incident


def acknowledge(incident: Incident, user: Any, request_id: str = "") -> Incident:
    """ "I'm on it": the user becomes the owner and an open incident moves to investigating."""
    assign_owner(incident, user.get_username(), user, request_id)
    if incident.status == "open":
        set_status(incident, "investigating", user, request_id)
    return incident


def _refresh(target: Incident, source: Incident) -> None:
    for f in ("status", "resolved_at", "window_end", "owner"):
        setattr(target, f, getattr(source, f))
