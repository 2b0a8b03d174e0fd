"""When the driver sweeps: a :class:`Policy` per caller, side by side in docs/design.md §9.

:func:`scenario_policy` (``run_scenario``), :func:`demo_policy` (the demo's fast-forward to now),
:func:`live_policy` (the demo once live, at wall-clock cadences) and :func:`once_policy` (the sweeps a caller
asks for at one moment, ``Harness.sweep``: the bench scripts). A new way of driving the pipeline is a new
``Policy``, not another loop.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from django.conf import settings

from incidents.tasks import SETTLE_EVERY_S


@dataclasses.dataclass(frozen=True)
class Policy:
    """When the harness sweeps (each cadence: ``None`` never, ``timedelta(0)`` every tick)."""

    inventory: timedelta  # the idle cadence of the inventory sweep
    events: timedelta | None = None  # None: the events with every inventory sweep
    telemetry: timedelta | None = None
    settle: timedelta | None = None  # the incident lifecycle (beat's settle_incidents)
    # A newly firing alert sweeps at once: Alertmanager sends it group_wait (30 s) later, i.e. during the next
    # advance, and the intake must then find the inventory of the moment it fired. At most once per
    # ``firing_gap``, though, when dozens of per-GPU alerts fire within minutes of each other.
    firing_gap: timedelta = timedelta(0)
    # How alerts are told apart. "fingerprint": an alert is its fingerprint while it is listed firing or resolved
    # (the simulator lists a resolved alert for an hour), pending ones aside. "state": an alert in each of its
    # states is a key of its own (fingerprint:status), firing or not (pending, resolved).
    alert_key: str = "fingerprint"
    # "Newly firing": not yet swept for in this run (True), or not firing at the last inventory sweep (False).
    once_per_alert: bool = False
    # A condition that starts holding (pending) sweeps too, once it has held through a whole tick, unless a
    # sweep already ran while it was pending: the inventory then sees the symptom's first states (a pod's
    # containers before they crash-loop), which a sweep at firing time alone would miss; on a busy cluster
    # the sweeps for other alerts usually saw them already. Dates come from the objects' own times either way
    # (collectors.inventory.dated). A pod bound this tick, Pending only until its container starts seconds
    # later, makes a pending alert that never fires and needs no sweep of its own.
    held_pending: bool = False
    events_on_alert: bool = True  # an alert's sweep takes the events too (when they have their own cadence)
    final: bool = False  # sweep at the moment a fast-forward ends, whatever the cadence
    # Without workers the intake answers first and the in-process worker groups, collects and diagnoses after
    # it: wait (up to this many seconds) for it to finish with the inventory of this moment before sweeping on.
    drain_s: float | None = None
    # SQLite has one writer: a sweep that finds the database locked (the intake holding it) is tried this many
    # times (sweeps are idempotent), then skipped, the next one catching up. None: the error ends the run.
    locked_attempts: int | None = None


def scenario_policy(sweep_every: timedelta = timedelta(minutes=15)) -> Policy:
    """``run_scenario``: every trigger, the lifecycle every tick, the inline worker drained before each sweep."""
    return Policy(
        inventory=sweep_every,
        events=timedelta(minutes=10),  # well inside the 1 h event TTL
        telemetry=timedelta(minutes=30),  # fleet samples; incident evidence reads Prometheus live
        settle=timedelta(0),  # one query on a tick with nothing to do
        alert_key="state",
        once_per_alert=True,
        held_pending=True,
        drain_s=600.0,
    )


def demo_policy(sweep_every: timedelta = timedelta(minutes=20)) -> Policy:
    """The demo's fast-forward to now: inventory and events together; alerts wait in a queue meanwhile."""
    return Policy(
        inventory=sweep_every,
        firing_gap=max(timedelta(minutes=5), sweep_every / 2),
        final=True,
        locked_attempts=3,
    )


def live_policy() -> Policy:
    """The demo once live, at wall-clock cadences: beat's schedule (settings, ``incidents.tasks``)."""
    return Policy(
        inventory=timedelta(seconds=settings.RCAWEB_SWEEP_INVENTORY_S),
        events=timedelta(seconds=settings.RCAWEB_SWEEP_EVENTS_S),
        telemetry=timedelta(seconds=settings.RCAWEB_SWEEP_TELEMETRY_S),
        settle=timedelta(seconds=SETTLE_EVERY_S),
        events_on_alert=False,
        locked_attempts=3,
    )


def once_policy() -> Policy:
    """``Harness.sweep``: the sweeps asked for, run once as asked (no cadence, no trigger); a locked database or
    a failed sweep raises, and nothing waits for the inline worker."""
    return Policy(inventory=timedelta(0))
