"""The sweeps of one tick: which are due under a :class:`~harness.policy.Policy`, and running them as Celery
beat would, at simulated time (the inventory, the events, the telemetry, the incident lifecycle)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import OperationalError

from collectors import sweep
from collectors.sweep import SweepSummary
from harness.policy import Policy
from harness.triggers import AlertTriggers
from incidents import inline_worker, lifecycle

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Due:
    """The sweeps due at one tick."""

    inventory: bool
    events: bool
    telemetry: bool
    settle: bool

    def any(self) -> bool:
        return self.inventory or self.events or self.telemetry or self.settle


def due_at(policy: Policy, last: dict[str, float], clock: float, *, alert: bool, final: bool) -> Due:
    """What ``policy`` sweeps at ``clock`` (simulated or wall seconds); ``last`` holds each kind's last sweep.
    ``alert``: the alerts ask for an inventory sweep; ``final``: the fast-forward ends here."""

    def due(kind: str, every: timedelta | None, triggered: bool = False) -> bool:
        if every is None:
            return False
        return kind not in last or triggered or clock - last[kind] >= every.total_seconds()

    inventory = due("inventory", policy.inventory, alert or final)
    if policy.events is None:
        events = inventory
    else:
        events = due("events", policy.events, alert and policy.events_on_alert)
    return Due(
        inventory=inventory,
        events=events,
        telemetry=due("telemetry", policy.telemetry),
        settle=due("settle", policy.settle),
    )


def sweep_tick(
    cluster: str,
    t: datetime,
    policy: Policy,
    due: Due,
    last: dict[str, float],
    *,
    clock: float,
    triggers: AlertTriggers,
    busy: contextlib.AbstractContextManager[Any] | None = None,
) -> SweepSummary | None:
    """Run the sweeps ``due`` at ``t`` (inside ``busy``: the web server's requests kept out); ``last`` records
    ``clock`` for each. Returns the summary of the inventory sweep that stored its states, if one did."""
    # While the inline worker is busy, the sweeps' reads go out first: the simulator (on its own core)
    # answers them while the worker finishes, and the answers are mapped and stored where the sweeps ran
    # before. The inventory's listings and GPU queries read the cluster as it is at this tick, and it does
    # not move until the next advance (the worker only reads it); what telemetry's queries ask and what a
    # past window holds depend on nothing done in between. With the worker idle they wait: sent now, the
    # telemetry queries would only hold up the inventory's own.
    early = policy.drain_s is not None and inline_worker.working()
    ask_telemetry = attempt(policy, sweep.ask_telemetry, cluster, t) if early and due.telemetry else None
    ask_inventory = attempt(policy, sweep.ask_inventory, cluster, t) if early and due.inventory else None
    asked = AskedEarly(inventory=ask_inventory, telemetry=ask_telemetry)
    stored: SweepSummary | None = None
    events = due.events
    with busy or contextlib.nullcontext(), asked:  # serialized requests: one in flight first
        if policy.drain_s is not None and not inline_worker.drain(timeout=policy.drain_s):
            logger.warning("inline worker still busy after %d s; sweeping anyway", policy.drain_s)
        if due.inventory:
            summary = attempt(policy, asked.sweep_cluster, cluster, t)
            last["inventory"] = clock
            triggers.swept()
            if summary is not None:
                stored = summary
                if summary.errors:
                    logger.warning("sweep at %s: %s", t, "; ".join(summary.errors))
            elif policy.events is None:
                events = False  # skipped: the next sweep catches up, events with it
        if events:
            attempt(policy, sweep.sweep_events, cluster, t)
            last["events"] = clock
        if due.telemetry:
            attempt(policy, asked.sweep_telemetry, cluster, t)
            last["telemetry"] = clock
        if due.settle:
            lifecycle.settle(t)  # what beat's settle_incidents does, at simulated time
            last["settle"] = clock
    return stored


class AskedEarly:
    """The reads of a tick's sweeps sent ahead of them, used by the first attempt of each (a second attempt
    reads again); those never used (a sweep before them failed) are not left running, on leaving the block."""

    def __init__(self, *, inventory: Any, telemetry: Any) -> None:
        self.inventory, self.telemetry = inventory, telemetry

    def sweep_cluster(self, cluster: str, at: datetime) -> Any:
        first, self.inventory = self.inventory, None
        return sweep.sweep_cluster(cluster, at, asked=first)

    def sweep_telemetry(self, cluster: str, at: datetime) -> Any:
        first, self.telemetry = self.telemetry, None
        return sweep.sweep_telemetry(cluster, at, asked=first)

    def __enter__(self) -> AskedEarly:
        return self

    def __exit__(self, *exc: object) -> None:
        for one in (self.inventory, self.telemetry):
            if one is not None:
                one.close()


def attempt(policy: Policy, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; on a locked database again, up to ``policy.locked_attempts`` times, then None."""
    if policy.locked_attempts is None:
        return fn(*args)
    for n in range(1, policy.locked_attempts + 1):
        try:
            return fn(*args)
        except OperationalError as exc:
            logger.warning("%s at %s, attempt %d: %s", fn.__name__, args[-1], n, exc)
    return None
