"""Incident status changes, each audited (docs/conventions.md §12): what humans do (transitions, owner, acknowledge)
and the three things rcaweb does by itself (incidents.lifecycle and incidents.grouping call them):
``auto_resolve`` an open incident that is over, ``flag_all_clear`` a held one for its holder to close, and
``reopen_for_alert`` a resolved one whose alert fired again within the reopen window.

Views, the API, the lifecycle, grouping and tests call these; nothing writes incident status anywhere else.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from incidents.audit import record
from incidents.models import Incident
from rcaweb.durations import format_duration
from rcaweb.timestamps import format_t_or_none

logger = logging.getLogger(__name__)

ORDER = ["open", "acknowledged", "investigating", "mitigated", "resolved"]
SYSTEM = "rcaweb"  # the audit's user name for what rcaweb does by itself


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
        locked.status_set_at = now  # a person decided: the lifecycle never overrides it on older evidence
        fields = ["status", "status_set_at"]
        if new_status == "resolved":
            locked.resolved_at = now
            locked.auto_resolved = False
            if locked.window_end is None:
                locked.window_end = now
            fields += ["resolved_at", "window_end", "auto_resolved"]
        elif old == "resolved":  # reopened: the window is open again
            locked.resolved_at = None
            locked.window_end = None
            locked.auto_resolved = False
            locked.all_clear_at = None
            fields += ["resolved_at", "window_end", "auto_resolved", "all_clear_at"]
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
    """ "I'm on it": the user becomes the owner and an open incident moves to acknowledged."""
    assign_owner(incident, user.get_username(), user, request_id)
    if incident.status == "open":
        set_status(incident, "acknowledged", user, request_id)
    return incident


#
# What rcaweb does by itself (incidents.lifecycle, incidents.grouping): audited as user "rcaweb", with why
#


def auto_resolve(incident: Incident, *, resolved_at: datetime, now: datetime, why: str) -> bool:
    """Resolve an *open* incident that is over: "resolved automatically", at ``resolved_at`` (when its quiet
    period began: the last alert's end, or the subject's recovery if later). False when it is no longer open
    (a person took it meanwhile: their state stands)."""
    with transaction.atomic():
        locked = Incident.objects.select_for_update().get(pk=incident.pk)
        if locked.status != "open":
            return False
        locked.status = "resolved"
        locked.resolved_at = resolved_at
        locked.window_end = locked.window_end or resolved_at
        locked.auto_resolved = True
        locked.all_clear_at = None
        locked.save(update_fields=["status", "resolved_at", "window_end", "auto_resolved", "all_clear_at"])
        record(
            user=SYSTEM,
            action="incident.status",
            target=locked,
            before={"status": "open"},
            after={"status": "resolved", "automatically": True, "resolved_at": format_t_or_none(resolved_at), "why": why},
            time=now,
        )
    logger.info("incident %s resolved automatically: %s", locked.pk, why)
    _refresh(incident, locked)
    return True


def flag_all_clear(incident: Incident, *, since: datetime, now: datetime, why: str) -> bool:
    """A held incident (acknowledged, investigating, mitigated, or reopened by a person) that would have resolved:
    its status stays, ``all_clear_at`` tells its holder it is theirs to close. Audited once."""
    with transaction.atomic():
        locked = Incident.objects.select_for_update().get(pk=incident.pk)
        if locked.status == "resolved" or locked.all_clear_at is not None:
            return False
        locked.all_clear_at = since
        locked.save(update_fields=["all_clear_at"])
        record(
            user=SYSTEM,
            action="incident.all_clear",
            target=locked,
            before={"status": locked.status},
            after={"status": locked.status, "all_clear_since": format_t_or_none(since), "why": why},
            time=now,
        )
    logger.info(
        "incident %s all clear, left %s for %s to close",
        locked.pk,
        locked.status,
        locked.owner or "its holder",
    )
    _refresh(incident, locked)
    return True


def withdraw_all_clear(incident: Incident, alert: Any) -> bool:
    """An alert of a flagged incident fired again: it is not over after all (audited)."""
    with transaction.atomic():
        locked = Incident.objects.select_for_update().get(pk=incident.pk)
        if locked.all_clear_at is None:
            return False
        before = format_t_or_none(locked.all_clear_at)
        locked.all_clear_at = None
        locked.save(update_fields=["all_clear_at"])
        record(
            user=SYSTEM,
            action="incident.all_clear",
            target=locked,
            before={"status": locked.status, "all_clear_since": before},
            after={"status": locked.status, "all_clear_since": None, "why": _fired_again(alert)},
        )
    _refresh(incident, locked)
    return True


def reopen_for_alert(incident: Incident, alert: Any, window: timedelta) -> bool:
    """A resolved incident whose alert fired again within ``window`` of the resolution: open again (audited)."""
    with transaction.atomic():
        locked = Incident.objects.select_for_update().get(pk=incident.pk)
        if locked.status != "resolved":
            return False
        before = {
            "status": "resolved",
            "resolved_at": format_t_or_none(locked.resolved_at),
            "automatically": locked.auto_resolved,
        }
        locked.status = "open"
        locked.resolved_at = None
        locked.window_end = None
        locked.auto_resolved = False
        locked.all_clear_at = None
        locked.save(update_fields=["status", "resolved_at", "window_end", "auto_resolved", "all_clear_at"])
        why = f"{_fired_again(alert)}, within the {format_duration(window)} reopen window"
        record(
            user=SYSTEM,
            action="incident.status",
            target=locked,
            before=before,
            after={"status": "open", "reopened_by_alert": alert.pk, "why": why},
        )
    logger.info("incident %s reopened: %s", locked.pk, why)
    _refresh(incident, locked)
    return True


def _fired_again(alert: Any) -> str:
    return f"{alert.name} fired again at {format_t_or_none(alert.starts_at)}"




def _refresh(target: Incident, source: Incident) -> None:
    for f in (
        "status",
        "resolved_at",
        "window_end",
        "owner",
        "auto_resolved",
        "all_clear_at",
        "status_set_at",
    ):
        setattr(target, f, getattr(source, f))
