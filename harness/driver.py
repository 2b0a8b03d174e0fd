"""The simulation harness: the simulator on its own clock, read by the real collectors, alerting the real intake.

One driver for everything that runs the pipeline against the simulated cluster: ``manage.py run_scenario``
(``harness.scenario_run``; the scenario tests, the browser tests' server and the bench scripts run it) and
``manage.py demo`` (``harness.demo``). It

- serves this Django app in a thread (``harness.webserver``) and points the simulator's Alertmanager at its
  webhook (``/api/v1/alerts/alertmanager``), posting as the simulator advances, or holding the notifications
  in a queue until :meth:`Harness.release_alerts` (the demo's backlog, posted once the console is up);
- moves the simulated clock tick by tick (:meth:`Harness.fast_forward`) or with the wall clock from an anchor
  (:meth:`Harness.live`), and at each tick sweeps the inventory, the events and the telemetry and settles the
  incident lifecycle, as Celery beat would, at simulated time, when its ``Policy`` says so
  (``harness.policy``, ``harness.tick``);
- backfills telemetry hour by hour backwards (:meth:`Harness.backfill`);
- for a caller that drives the clock itself (the bench scripts), moves it to a moment
  (:meth:`Harness.advance_to`) and runs the sweeps asked for once, there (:meth:`Harness.sweep`).

It never calls the intake, the grouping or the diagnosis itself: those run because the webhook was posted
to (inline without a Celery worker, ``incidents.inline_worker``). ``simulator`` imports nothing of this.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections
from django.utils import timezone

from collectors import sweep
from collectors.models import Cluster
from collectors.sweep import SweepSummary
from harness.cluster import register_cluster
from harness.database import refuse_in_memory_database
from harness.policy import Policy, once_policy
from harness.tick import Due, due_at, sweep_tick
from harness.triggers import AlertTriggers
from harness.webserver import AlertPoster, WebServer
from rcaweb import gc_policy
from simulator.process import SimProcess
from simulator.server import SimServer

logger = logging.getLogger(__name__)

INTAKE_PATH = "/api/v1/alerts/alertmanager"
PROGRESS_EVERY_S = 10.0  # wall seconds between two progress lines of a fast-forward


def simulator_process(scenario: Any) -> SimProcess:
    """The scenario's simulated cluster, to run in a process of its own (``Harness(None, process=...)``), its
    cycle collector set as this app's processes set theirs (``rcaweb.gc_policy``)."""
    return SimProcess(scenario, gc_thresholds=gc_policy.thresholds(settings.RCAWEB_GC_THRESHOLDS))


class Harness:
    """The simulator, this app's webhook and the sweeps of one simulated cluster (a context manager).

    ``serve``: ``HOST:PORT`` to serve this app on (port 0: a free loopback port), or None for no server and no
    alerts. ``token``: the webhook's bearer token (one of ``settings.WEBHOOK_TOKENS``). ``hold_alerts``: queue
    the notifications until :meth:`release_alerts` instead of posting them as the simulator advances.
    ``quiet``/``serialize``: see :class:`harness.webserver.WebServer`; while serialized, the harness keeps
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
        # The id of the simulator's process once started (``process``), for a caller that reads its CPU time;
        # None in this process.
        self.simulator_pid: int | None = None
        self.cluster: Cluster | None = None
        self.sweeps = 0
        self.timings: dict[str, float] = {"sweeps_s": 0.0, "advance_s": 0.0}
        self.tick = timedelta(seconds=getattr(world, "tick_seconds", 60))  # (a process' world: at start)
        self._serve, self._token, self._hold = (serve, quiet, serialize), token, hold_alerts
        self.triggers = AlertTriggers()  # what the alerts asked for so far (Policy.once_per_alert, .held_pending)

    #
    # Setup
    #

    def start(self) -> Harness:
        serve, quiet, serialize = self._serve
        alert_url = None
        try:
            if serve is not None:
                refuse_in_memory_database()
                self.web = WebServer(serve, quiet=quiet, serialize=serialize).start()
                if self._token:
                    alert_url = self.web.url + INTAKE_PATH
            if self.process is not None:
                if self._hold:
                    raise ImproperlyConfigured("a simulator in its own process posts its alerts as it goes")
                self.process.alert_url, self.process.alert_token = alert_url, self._token
                self.sim = self.process.start()
                self.simulator_pid = self.process.pid
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

    def register(self, scenario: Any = None, *, replace: bool = False) -> bool:
        """The scenario's Cluster (default: the one simulated), reading this simulator; ``replace``: its old data
        dropped first (returns whether there was any; history is append-only and a new timeline may start
        before the old one ended)."""
        assert self.sim is not None
        if scenario is None:
            scenario = self.process.scenario if self.process is not None else self.world.scenario
        self.cluster, dropped = register_cluster(scenario, self.sim, replace=replace)
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
            self.advance_to(t)
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
                    self.advance_to(target.replace(microsecond=0))
                self._tick(self.world.now, policy, last, clock=time.monotonic(), final=False)
            except Exception:
                logger.exception("live loop")
            finally:
                close_old_connections()
            self.stop.wait(1.0)

    def advance_to(self, t: datetime) -> None:
        """The simulated cluster moved to ``t``, tick by tick: its servers publish it and its Alertmanager posts
        what fires to the intake (when served). Sweeps nothing: :meth:`fast_forward` does, or :meth:`sweep`."""
        assert self.sim is not None
        started = time.monotonic()
        self.sim.advance_to(t)
        self.timings["advance_s"] += time.monotonic() - started

    def sweep(
        self, *, inventory: bool = True, events: bool = False, telemetry: bool = False, settle: bool = False
    ) -> SweepSummary | None:
        """The sweeps asked for, once, at the world's time (whatever a policy's cadence), as a tick runs them;
        returns the inventory sweep's summary (None when not asked). A failed sweep raises."""
        assert self.cluster is not None
        t = self.world.now
        due = Due(inventory=inventory, events=events, telemetry=telemetry, settle=settle)
        started = time.monotonic()
        busy = self.web.busy if self.web is not None else None
        summary = sweep_tick(
            self.cluster.name, t, once_policy(), due, {}, clock=t.timestamp(), triggers=self.triggers, busy=busy
        )
        if summary is not None:
            self.sweeps += 1
        self.timings["sweeps_s"] += time.monotonic() - started
        return summary

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

    def _tick(
        self, t: datetime, policy: Policy, last: dict[str, float], *, clock: float, final: bool
    ) -> None:
        """The sweeps due at ``t``; ``last`` holds each kind's last ``clock`` value (simulated or wall seconds)."""
        alert = self.triggers.due(self.world, policy, last, clock)
        due = due_at(policy, last, clock, alert=alert, final=final)
        if not (due.any() or policy.drain_s is not None):
            return
        assert self.cluster is not None
        started = time.monotonic()
        busy = self.web.busy if self.web is not None else None
        stored = sweep_tick(self.cluster.name, t, policy, due, last, clock=clock, triggers=self.triggers, busy=busy)
        if stored is not None:
            self.sweeps += 1
        self.timings["sweeps_s"] += time.monotonic() - started
