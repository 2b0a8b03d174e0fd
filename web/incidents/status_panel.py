"""The incident page's status panel: status, owner, duration, lifecycle and the buttons a responder may press.

It is also what an htmx POST to the incident page gets back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from incidents import lifecycle, services
from incidents.models import Incident
from rcaweb.cursor import Cursor
from rcaweb.http import RcaRequest
from rcaweb.roles import can_respond

ORDER_OF_STATUS = {s: i for i, (s, _) in enumerate(Incident.STATUSES)}


def now_at(incident: Incident) -> datetime:
    """Where the cursor bar's "now" goes on an incident's pages: the incident's end once resolved, else the present.

    These pages default to the onset when the URL has no ``t``, so a "now" without ``t`` would land there.
    """
    end = incident.window_end or incident.resolved_at
    return end if end is not None else timezone.now().replace(microsecond=0)


def status_buttons(status: str) -> list[tuple[str, str]]:
    """(new status, label) of each button the status panel offers: exactly the moves
    ``services.allowed_transitions`` allows from ``status``, named for what they do from there. "Reopen" is for
    a resolved incident only; a held one goes "back to open"; an open one is acknowledged by its own button."""
    out = []
    for new in services.allowed_transitions(status):
        if new == "acknowledged" and status == "open":
            continue  # the Acknowledge button: it also takes the incident (owner)
        if new == "open":
            label = "Reopen" if status == "resolved" else "Back to open"
        elif ORDER_OF_STATUS.get(new, 0) < ORDER_OF_STATUS.get(status, 0):
            label = f"Back to {new}"
        else:
            label = f"Mark {new}"
        out.append((new, label))
    return out


def status_context(request: RcaRequest, incident: Incident, cursor: Cursor) -> dict[str, Any]:
    # Duration is onset → resolution, or → the present: never → the cursor (which defaults to the onset).
    now = timezone.now()
    return {
        "incident": incident,
        "cursor": cursor,
        "cursor_anchor": ("incident start", incident.onset),
        "cursor_now_at": now_at(incident),
        "status_buttons": status_buttons(incident.status),
        "responder": can_respond(request.user),
        # A resolved incident lasted onset → resolution, whatever the clock says (a scenario's simulated
        # time may run ahead of this server's).
        "duration": incident.duration_at(max(now, incident.resolved_at or now)),
        "ongoing": incident.ended_at(max(now, incident.resolved_at or now)) is None,
        "lifecycle": lifecycle.explain(incident, now),
    }
