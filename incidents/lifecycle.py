"""When an incident is over: all its alerts resolved, and its subject stayed healthy for a quiet period.

``settle(now)`` is the one entry point (Celery beat every minute; the simulation harness, harness.driver, for
run_scenario and the demo); ``now`` is a parameter so a fast-forwarded scenario resolves incidents at
simulated time.
For each unresolved incident whose alerts all ended at least ``RCAWEB_AUTO_RESOLVE_AFTER`` before ``now``:

- the alerts' resolution is the signal; the inventory confirms it where a subject's state says something
  (``subject_trouble``): a job still Pending, a pod still Pending or in CrashLoopBackOff, a node NotReady or
  with fewer allocatable GPUs than it has, a GPU faulty or missing. A bad version that begins before the
  quiet period has run restarts it at its end; one still open keeps the incident open (``quiet_start``);
- an *open* incident then resolves automatically (``services.auto_resolve``), at the start of its quiet
  period, audited with why;
- a *held* one (acknowledged, investigating, mitigated, or put back to open by a person after its alerts
  ended) is never closed by rcaweb: it is flagged all clear (``services.flag_all_clear``, audited once) and
  the incident page, the list and the home page say it is the holder's to close.

Re-firing is grouping's part (incidents.grouping: an alert within ``RCAWEB_REOPEN_WINDOW`` of the resolution
reopens the incident; later, it opens a new one).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from collectors.models import EntityVersion
from incidents import services
from incidents.diagnosis import capacity
from incidents.diagnosis.types import gpus_of
from incidents.models import Alert, Incident, IncidentSubject
from rcaweb.cursor import format_t
from rcaweb.durations import format_duration

logger = logging.getLogger(__name__)

GPU = "nvidia.com/gpu"

SETTLE_BATCH = 500  # incidents looked at per call; the rest wait for the next tick
# kubelet's container waiting reasons that mean the container cannot run (kubernetes pkg/kubelet/images and
# kuberuntime: ErrImagePull, ImagePullBackOff, InvalidImageName, CreateContainerConfigError, ...).
BAD_WAITING = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


def auto_resolve_after() -> timedelta:
    return settings.RCAWEB_AUTO_RESOLVE_AFTER


def reopen_window() -> timedelta:
    return settings.RCAWEB_REOPEN_WINDOW


@dataclass
class Verdict:
    """Where an unresolved incident stands at ``now``; ``text`` is the sentence the incident page shows."""

    state: str  # firing | troubled | quiet (quiet period running) | over
    text: str
    quiet_since: datetime | None = None  # alerts ended (or subject recovered) at
    resolves_at: datetime | None = None  # quiet_since + the quiet period


def trouble(version: EntityVersion) -> str:
    """What is still wrong with a subject in this version ("" = nothing the inventory can tell)."""
    if version.deleted:
        return ""
    kind, phase = version.kind, version.phase
    if kind == "node":
        return node_trouble(version)
    elif kind == "gpu" and phase in ("faulty", "missing"):
        return phase
    elif kind == "job" and phase == "Pending":
        return "Pending"
    elif kind == "pod":
        if phase in ("Pending", "Unknown"):
            return phase
        for c in (version.state or {}).get("containers") or []:
            reason = ((c.get("state") or {}).get("waiting") or {}).get("reason") or ""
            if reason in BAD_WAITING:
                return reason
    return ""


def node_trouble(version: EntityVersion) -> str:
    """What keeps a node from offering its GPUs, as the scheduling model reads a node (``capacity.ready``,
    ``capacity.offered_gpus``): not Ready, or its device plugin advertising fewer GPUs than it has. The typed
    columns stand in for a state recorded without its resource maps."""
    state = dict(version.state or {})
    if version.gpus is not None and not state.get("capacity"):
        state["capacity"] = {GPU: version.gpus}
    if version.gpus_allocatable is not None and not state.get("allocatable"):
        state["allocatable"] = {GPU: version.gpus_allocatable}
    if not capacity.ready(state, version.phase):
        return version.phase or "NotReady"
    has = gpus_of(state.get("capacity") or {})
    offered = capacity.offered_gpus(state, version.phase)
    if "allocatable" in state and offered < has:
        return f"{offered} of {has} GPUs allocatable"
    return ""


def quiet_start(incident: Incident, ended: datetime, now: datetime) -> tuple[datetime | None, str]:
    """(the start of the first quiet period after ``ended``, or None; what is still wrong at ``now``, or "").

    Walks the subjects' bad versions between ``ended`` (the last alert's end) and ``now`` in order (one
    query): the quiet period starts at ``ended`` and restarts at the end of each trouble that begins before
    it has run its length. A trouble that begins only after a full quiet period is a new episode (its alert,
    if it fires, reopens the incident), so the answer does not depend on how late the check runs. Queues and
    projects have no health to read, unresolved subjects no inventory: then the alerts alone decide.
    """
    ids = list(
        IncidentSubject.objects.filter(incident=incident, role="subject").values_list("entity_id", flat=True)
    )
    if not ids:
        return ended, ""
    versions = (
        EntityVersion.objects.filter(entity_id__in=ids, valid_from__lte=now)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=ended))
        .select_related("entity")
        .order_by("valid_from", "id")
    )
    period = auto_resolve_after()
    quiet = ended
    for v in versions:
        what = trouble(v)
        if not what:
            continue
        if v.valid_from >= quiet + period:
            break  # over before this began
        if v.valid_to is None or v.valid_to > now:
            return None, f"{v.entity} is still {what} (inventory since {format_t(max(v.valid_from, ended))})"
        quiet = max(quiet, v.valid_to)
    return quiet, ""


def verdict(incident: Incident, now: datetime) -> Verdict:
    """Is the incident over at ``now``? (Reads its alerts and, once they all ended, its subjects' versions.)"""
    alerts = list(Alert.objects.filter(incident=incident).values_list("status", "ends_at", "updated_at"))
    if not alerts:
        return Verdict("firing", "no alert yet")
    ends = [e or u for s, e, u in alerts if s == "resolved" and (e or u) <= now]  # no endsAt: when it came
    if len(ends) < len(alerts):
        firing = len(alerts) - len(ends)
        return Verdict("firing", f"{firing} of {len(alerts)} alert{'s' if len(alerts) != 1 else ''} firing")
    ended = max(ends)
    quiet_since, still = quiet_start(incident, ended, now)
    if quiet_since is None:
        return Verdict("troubled", f"all alerts resolved at {format_t(ended)}, but {still}")
    resolves_at = quiet_since + auto_resolve_after()
    why = f"{'the alert' if len(alerts) == 1 else f'all {len(alerts)} alerts'} resolved at {format_t(ended)}"
    if quiet_since > ended:
        why += f", subject healthy again at {format_t(quiet_since)}"
    period = format_duration(auto_resolve_after())
    state = "over" if now >= resolves_at else "quiet"
    if state == "over":
        why += f"; stayed quiet for {period} (RCAWEB_AUTO_RESOLVE_AFTER)"
    else:
        why += f"; quiet for {format_duration(now - quiet_since)} of {period} (RCAWEB_AUTO_RESOLVE_AFTER)"
    return Verdict(state, why, quiet_since=quiet_since, resolves_at=resolves_at)


def held(incident: Incident, quiet_since: datetime) -> bool:
    """A person holds it: a human state, or they set the status (e.g. reopened it) after the quiet began."""
    if incident.status in Incident.HUMAN_STATUSES:
        return True
    return incident.status_set_at is not None and incident.status_set_at >= quiet_since


def resolve_if_over(incident: Incident, now: datetime) -> bool:
    """Grouping's question before a new alert joins: was this open incident already over at ``now``? If so it
    is resolved as of then (audited) and True; held incidents are left alone (the alert joins them)."""
    if (
        incident.status != "open"
        or incident.window_end is None
        or incident.window_end + auto_resolve_after() > now
    ):
        return False  # the cheap case: still firing, or not quiet long enough, without reading anything
    v = verdict(incident, now)
    if v.state != "over" or v.quiet_since is None or held(incident, v.quiet_since):
        return False
    return services.auto_resolve(incident, resolved_at=v.quiet_since, now=now, why=v.text)


def check_incident(incident: Incident, now: datetime) -> str:
    """Apply the lifecycle to one incident at ``now``: "resolved", "flagged", or its verdict's state."""
    if incident.status == "resolved":
        return "resolved"
    v = verdict(incident, now)
    if v.state != "over":
        return v.state
    assert v.quiet_since is not None
    if held(incident, v.quiet_since):
        if incident.all_clear_at is None:
            why = f"{v.text}; left {incident.status} for {incident.owner or 'whoever holds it'} to close"
            services.flag_all_clear(incident, since=v.quiet_since, now=now, why=why)
        return "flagged"
    if services.auto_resolve(incident, resolved_at=v.quiet_since, now=now, why=v.text):
        return "resolved"
    return incident.status  # a person took it between the read and the lock


def explain(incident: Incident, now: datetime) -> str:
    """The incident page's one sentence on where the lifecycle stands ("" while alerts fire: the table says so)."""
    period = format_duration(auto_resolve_after())
    if incident.status == "resolved":
        if incident.auto_resolved and incident.resolved_at:
            return (
                f"Resolved automatically at {format_t(incident.resolved_at)}: its alerts had resolved and its "
                f"subject stayed healthy for {period} (the history says why)."
            )
        return ""
    holder = incident.owner or "whoever holds it"
    if incident.all_clear_at is not None:
        return (
            f"All clear since {format_t(incident.all_clear_at)}: every alert resolved and the subject stayed "
            f"healthy for {period}. rcaweb does not close a {incident.status} incident: it is {holder}'s to close."
        )
    v = verdict(incident, now)
    if v.state == "firing":
        return ""
    if v.state == "troubled":
        return v.text[:1].upper() + v.text[1:] + "."
    assert v.resolves_at is not None and v.quiet_since is not None
    then = (
        f"it is flagged all clear for {holder} to close (status {incident.status})"
        if held(incident, v.quiet_since)
        else "it resolves automatically"
    )
    when = "at the next check" if v.state == "over" else f"at {format_t(v.resolves_at)} if nothing fires"
    return f"{v.text[:1].upper() + v.text[1:]}: {then} {when}."


def settle(now: datetime, *, limit: int = SETTLE_BATCH) -> dict[str, int]:
    """Check every unresolved incident whose alerts all ended a quiet period before ``now`` (one query when none)."""
    cutoff = now - auto_resolve_after()
    candidates = (
        Incident.objects.exclude(status="resolved")
        .filter(window_end__isnull=False, window_end__lte=cutoff, onset__lte=now)
        .filter(all_clear_at__isnull=True)
        .order_by("window_end", "id")[:limit]
    )
    counts: dict[str, int] = {}
    for incident in candidates:
        outcome = check_incident(incident, now)
        counts[outcome] = counts.get(outcome, 0) + 1
    if counts.get("resolved") or counts.get("flagged"):
        logger.info("lifecycle at %s: %s", format_t(now), counts)
    return counts


__all__ = [
    "Verdict",
    "auto_resolve_after",
    "check_incident",
    "explain",
    "node_trouble",
    "reopen_window",
    "resolve_if_over",
    "settle",
    "trouble",
    "verdict",
]
