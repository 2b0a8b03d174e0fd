"""The simulation harness: the simulator on its own clock, read by the real collectors, alerting the real intake.

One driver for everything that runs the pipeline against the simulated cluster: ``manage.py run_scenario``
(``incidents.scenario_run``; the scenario tests, the browser tests' server and the bench scripts run it) and
``manage.py demo`` (``collectors.demo``). It

- serves this Django app in a thread (``rcaweb.webserver``) and points the simulator's Alertmanager at its
  webhook (``/api/v1/alerts/alertmanager``), posting as the simulator advances, or holding the notifications
  in a queue until :meth:`Harness.release_alerts` (the demo's backlog, posted once the console is up);
- moves the simulated clock tick by tick (:meth:`Harness.fast_forward`) or with the wall clock from an anchor
  (:meth:`Harness.live`), and at each tick sweeps the inventory, the events and the telemetry and settles the
  incident lifecycle, as Celery beat would, at simulated time, when its :class:`Policy` says so;
- backfills telemetry hour by hour backwards (:meth:`Harness.backfill`).

It never calls the intake, the grouping or the diagnosis itself: those run because the webhook was posted
to (inline without a Celery worker, ``incidents.inline``). ``simulator`` imports nothing of this.

The policies of its callers, side by side in docs/design.md §9: :func:`scenario_policy`, :func:`demo_policy`
(the demo's fast-forward to now) and :func:`live_policy` (the demo once live, at wall-clock cadences).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, close_old_connections, connections, transaction
from django.db.models import Q
from django.utils import timezone

from collectors import sweep
from collectors.models import Cluster
from incidents import inline, lifecycle
from incidents.models import Alert, Incident
from incidents.tasks import SETTLE_EVERY_S
from rcaweb.webserver import AlertPoster, WebServer
from simulator.process import SimProcess
from simulator.server import SimServer

logger = logging.getLogger(__name__)

INTAKE_PATH = "/api/v1/alerts/alertmanager"
PROGRESS_EVERY_S = 10.0  # wall seconds between two progress lines of a fast-forward


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


class Harness:
    """The simulator, this app's webhook and the sweeps of one simulated cluster (a context manager).

    ``serve``: ``HOST:PORT`` to serve this app on (port 0: a free loopback port), or None for no server and no
    alerts. ``token``: the webhook's bearer token (one of ``settings.WEBHOOK_TOKENS``). ``hold_alerts``: queue
    the notifications until :meth:`release_alerts` instead of posting them as the simulator advances.
    ``quiet``/``serialize``: see :class:`rcaweb.webserver.WebServer`; while serialized, the harness keeps
    requests out while it sweeps.
    """

    def __init__(
        self,
        world: Any,
        *,
        serve: str | None = None,
        token: str | None = None,
        hold_alerts: bool = False,
        quiet: bool = False,
        serialize: bool = False,
        stop: threading.Event | None = None,
        process: SimProcess | None = None,
    ) -> None:
        self.world = world
        # The simulator in a process of its own (``simulator.process``; ``world`` is then None until
        # ``start``, which starts it with this app's webhook as its Alertmanager's receiver).
        self.process = process
        self.stop = stop or threading.Event()
        self.web: WebServer | None = None
        self.poster: AlertPoster | None = None
        self.sim: SimServer | SimProcess | None = None
        self.cluster: Cluster | None = None
        self.sweeps = 0
        self.timings: dict[str, float] = {"sweeps_s": 0.0, "advance_s": 0.0}
        self.tick = timedelta(seconds=getattr(world, "tick_seconds", 60))  # (a process' world: at start)
        self._serve, self._token, self._hold = (serve, quiet, serialize), token, hold_alerts
        # What the alert triggers remember (Policy.once_per_alert, .held_pending).
        self._notified: set[str] = set()  # swept for, in this run
        self._at_last_sweep: set[str] = set()  # firing (or held) at the last inventory sweep
        self._held: set[str] = set()  # pending at the previous tick
        self._pending_swept: set[str] = set()  # pending now, and already so at an inventory sweep
        self._due_keys: set[str] = set()  # asking for a sweep at this tick

    #
    # Setup
    #

    def start(self) -> Harness:
        serve, quiet, serialize = self._serve
        alert_url = None
        try:
            if serve is not None:
                _refuse_in_memory_database()
                self.web = WebServer(serve, quiet=quiet, serialize=serialize).start()
                if self._token:
                    alert_url = self.web.url + INTAKE_PATH
            if self.process is not None:
                if self._hold:
                    raise ImproperlyConfigured("a simulator in its own process posts its alerts as it goes")
                self.process.alert_url, self.process.alert_token = alert_url, self._token
                self.sim = self.process.start()
                self.world = self.process.world
                self.tick = timedelta(seconds=getattr(self.world, "tick_seconds", 60))
            elif alert_url and self._hold:
                self.poster = AlertPoster(alert_url, str(self._token), self.stop)
                self.sim = SimServer(self.world, alert_sink=self.poster).start()
            else:
                self.sim = SimServer(self.world, alert_url=alert_url, alert_token=self._token).start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        self.stop.set()
        if self.sim is not None:
            self.sim.stop()
        if self.web is not None:
            self.web.stop()

    def __enter__(self) -> Harness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register(self, scenario: Any, *, replace: bool = False) -> bool:
        """The scenario's Cluster, reading this simulator; ``replace``: its old data dropped first (returns
        whether there was any; history is append-only and a new timeline may start before the old one ended)."""
        assert self.sim is not None
        name = scenario.cluster.name
        where = {
            "scheduler": scenario.cluster.scheduler,
            "kubeconfig": self.sim.kubeconfig_path,
            "prometheus_url": self.sim.prometheus_url,
            "runai_url": self.sim.runai_url,
        }
        dropped = False
        if replace and Cluster.objects.filter(name=name).exists():
            # Its incidents and their alerts go too: left behind they would stay open forever beside the
            # new timeline's (their cluster gone), every problem listed twice on the console. Those a run
            # before this rule left without a cluster are found by their alerts' cluster label.
            with transaction.atomic():
                ids = set(
                    Incident.objects.filter(Q(cluster__name=name) | Q(alerts__cluster_name=name)).values_list(
                        "pk", flat=True
                    )
                )
                Alert.objects.filter(Q(incident__in=ids) | Q(cluster_name=name)).delete()
                Incident.objects.filter(pk__in=ids).delete()
                Cluster.objects.filter(name=name).delete()
            dropped = True
        self.cluster, _ = Cluster.objects.update_or_create(name=name, defaults=where)
        return dropped

    def release_alerts(self) -> int:
        """Post the held notifications (and every later one as it comes); returns how many were waiting."""
        if self.poster is None:
            return 0
        self.poster.resume()
        return self.poster.queue.qsize()

    #
    # The clock
    #

    def fast_forward(
        self, until: datetime, policy: Policy, *, progress: Callable[[str], None] | None = None
    ) -> None:
        """Tick by tick from the world's time to ``until``, sweeping as ``policy`` says at each tick."""
        assert self.sim is not None
        last: dict[str, float] = {}
        t = self.world.now
        reported = time.monotonic()
        while True:
            self._tick(t, policy, last, clock=t.timestamp(), final=policy.final and t >= until)
            if t >= until:
                break
            t = min(t + self.tick, until)
            started = time.monotonic()
            self.sim.advance_to(t)  # the simulator's Alertmanager posts what fires to the intake
            self.timings["advance_s"] += time.monotonic() - started
            if progress is not None and time.monotonic() - reported > PROGRESS_EVERY_S:
                progress(f"  … {t:%H:%M} UTC ({self.sweeps} sweeps)")
                reported = time.monotonic()

    def live(self, policy: Policy, *, anchor: datetime, speed: float = 1.0) -> None:
        """Until stopped: the world's time follows the wall clock from ``anchor`` (at speed 1 world time is wall
        time: the first advance catches up the time since, and kubectl's AGE and event times are right), with
        the sweeps of ``policy`` at wall-clock cadences. An error is logged and the loop goes on."""
        assert self.sim is not None
        last: dict[str, float] = {}
        sim_start = self.world.now
        while not self.stop.is_set():
            try:
                wall_elapsed = (timezone.now() - anchor).total_seconds()
                target = sim_start + timedelta(seconds=max(0.0, wall_elapsed) * speed)
                if target > self.world.now:
                    self.sim.advance_to(target.replace(microsecond=0))
                self._tick(self.world.now, policy, last, clock=time.monotonic(), final=False)
            except Exception:
                logger.exception("live loop")
            finally:
                close_old_connections()
            self.stop.wait(1.0)

    def backfill(self, start: datetime, end: datetime, *, own_thread: bool = False) -> bool:
        """Telemetry from ``end`` back to ``start``, an hour per sweep; False when stopped before the end.

        ``own_thread``: it runs in a thread of its own, whose connections are closed after each sweep (as a
        request's are). Not in the caller's thread: closing there would end the caller's transaction (a test's,
        on PostgreSQL)."""
        assert self.cluster is not None
        t = end
        while t > start and not self.stop.is_set():
            since = max(start, t - timedelta(hours=1))
            try:
                sweep.sweep_telemetry(self.cluster.name, t, since=since)
            except Exception:
                logger.exception("telemetry backfill")
            finally:
                if own_thread:
                    close_old_connections()
            t = since
        return not self.stop.is_set()

    #
    # One tick
    #

    def _tick(
        self, t: datetime, policy: Policy, last: dict[str, float], *, clock: float, final: bool
    ) -> None:
        """The sweeps due at ``t``; ``last`` holds each kind's last ``clock`` value (simulated or wall seconds)."""
        alert = self._alert_due(policy, last, clock)

        def due(kind: str, every: timedelta | None, triggered: bool = False) -> bool:
            if every is None:
                return False
            return kind not in last or triggered or clock - last[kind] >= every.total_seconds()

        inventory = due("inventory", policy.inventory, alert or final)
        events = (
            inventory
            if policy.events is None
            else due("events", policy.events, alert and policy.events_on_alert)
        )
        telemetry = due("telemetry", policy.telemetry)
        settle = due("settle", policy.settle)
        if not (inventory or events or telemetry or settle or policy.drain_s is not None):
            return
        assert self.cluster is not None
        name = self.cluster.name
        started = time.monotonic()
        busy = self.web.busy if self.web is not None else None
        # While the inline worker is busy, the sweeps' reads go out first: the simulator (on its own core)
        # answers them while the worker finishes, and the answers are mapped and stored where the sweeps ran
        # before. The inventory's listings and GPU queries read the cluster as it is at this tick, and it does
        # not move until the next advance (the worker only reads it); what telemetry's queries ask and what a
        # past window holds depend on nothing done in between. With the worker idle they wait: sent now, the
        # telemetry queries would only hold up the inventory's own.
        early = policy.drain_s is not None and inline.working()
        asked = [
            self._attempt(policy, sweep.ask_telemetry, name, t) if early and telemetry else None,
            self._attempt(policy, sweep.ask_inventory, name, t) if early and inventory else None,
        ]
        with busy or contextlib.nullcontext(), _closing(asked):  # serialized requests: one in flight first
            if policy.drain_s is not None and not inline.drain(timeout=policy.drain_s):
                logger.warning("inline worker still busy after %d s; sweeping anyway", policy.drain_s)
            if inventory:

                def sweep_cluster(cluster: str, at: datetime) -> Any:
                    first, asked[1] = asked[1], None  # a second attempt reads again
                    return sweep.sweep_cluster(cluster, at, asked=first)

                summary = self._attempt(policy, sweep_cluster, name, t)
                last["inventory"] = clock
                self._at_last_sweep = self._due_keys
                self._pending_swept |= self._held  # this sweep saw what pends now in its pending state
                if summary is not None:
                    self.sweeps += 1
                    if summary.errors:
                        logger.warning("sweep at %s: %s", t, "; ".join(summary.errors))
                elif policy.events is None:
                    events = False  # skipped: the next sweep catches up, events with it
            if events:
                self._attempt(policy, sweep.sweep_events, name, t)
                last["events"] = clock
            if telemetry:

                def sweep_telemetry(cluster: str, at: datetime) -> Any:
                    first, asked[0] = asked[0], None  # a second attempt asks again
                    return sweep.sweep_telemetry(cluster, at, asked=first)

                self._attempt(policy, sweep_telemetry, name, t)
                last["telemetry"] = clock
            if settle:
                lifecycle.settle(t)  # what beat's settle_incidents does, at simulated time
                last["settle"] = clock
        self.timings["sweeps_s"] += time.monotonic() - started

    def _alert_due(self, policy: Policy, last: dict[str, float], clock: float) -> bool:
        """Whether the alerts ask for a sweep now: an alert starting to fire, or pending through a whole tick
        without a sweep having seen it pending (``Policy.held_pending``). One that stops asks for none: the next sweep dates its subject's recovery
        by the objects' own times (a GPU, which has none, when it sees it), and the incident's quiet period
        starts then (incidents.lifecycle)."""
        firing: set[str] = set()
        pending: set[str] = set()
        for a in self.world.alerts(include_pending=True):
            status = a.get("status")
            if policy.alert_key == "state":
                key, up = f"{a['fingerprint']}:{status}", status == "firing"
            else:
                key, up = str(a["fingerprint"]), status != "pending"
            if up:
                firing.add(key)
            elif status == "pending":
                pending.add(key)
        # A condition pending through a tick needs one sweep while it pends, not one of its own: a sweep since
        # it started pending (for another alert, or the idle cadence) already saw its first states.
        self._pending_swept &= pending
        held = (pending & self._held) - self._pending_swept
        due = firing | held if policy.held_pending else firing
        self._held = pending
        self._due_keys = due
        started = due - (self._notified if policy.once_per_alert else self._at_last_sweep)
        if policy.once_per_alert:
            self._notified |= due
        gap_ok = "inventory" not in last or clock - last["inventory"] >= policy.firing_gap.total_seconds()
        return bool(started) and gap_ok

    def _attempt(self, policy: Policy, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``; on a locked database again, up to ``policy.locked_attempts`` times, then None."""
        if policy.locked_attempts is None:
            return fn(*args)
        for attempt in range(1, policy.locked_attempts + 1):
            try:
                return fn(*args)
            except OperationalError as exc:
                logger.warning("%s at %s, attempt %d: %s", fn.__name__, args[-1], attempt, exc)
        return None


@contextlib.contextmanager
def _closing(asked: list[Any]) -> Iterator[None]:
    """Reads asked and never used (a sweep before them failed) are not left running."""
    try:
        yield
    finally:
        for one in asked:
            if one is not None:
                one.close()


@contextlib.contextmanager
def settings_set(**values: Any) -> Iterator[None]:
    """Settings of this process set for the block, then put back (the webhook's token for one run)."""
    missing = object()
    saved = {name: getattr(settings, name, missing) for name in values}
    for name, value in values.items():
        setattr(settings, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                delattr(settings, name)
            else:
                setattr(settings, name, value)


def _refuse_in_memory_database() -> None:
    """The webhook's request threads open their own connections: an in-memory SQLite database is invisible to
    them (or, shared-cache, fails with "table is locked"). Say so rather than lose every alert."""
    for conn in connections.all():
        if conn.vendor == "sqlite" and conn.is_in_memory_db():  # type: ignore[attr-defined]  # sqlite's own
            raise ImproperlyConfigured(
                f"database {conn.alias!r} is an in-memory SQLite database, which the webhook's server threads "
                "cannot share: use a file (run_scenario's default --database temp does)"
            )
