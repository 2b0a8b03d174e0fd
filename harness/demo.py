"""``manage.py demo``: the bundled demo scenario on the simulator, read by the real collectors, served live.

1. Loads ``simulator/scenarios/demo.yaml`` so that its 12 h end now (the timeline is extended by the
   live span so the world keeps moving after startup), starts the SimServer on loopback and this Django app.
2. Registers the Cluster with the simulator's kubeconfig and Prometheus/Run:ai URLs (the cluster's old demo
   data is dropped first: history is append-only and the new timeline starts earlier than the old one ended).
3. Fast-forwards the world to now, sweeping the inventory every ``sweep_every`` simulated minutes (and when
   an alert starts firing, at most every half interval), events along, telemetry for the last hour; the
   simulator's Alertmanager notifications for this app's own ``/api/v1/alerts/alertmanager`` (with the
   webhook token) wait in a queue meanwhile.
4. Posts the queued notifications and waits until the intake has grouped every alert and collected and
   diagnosed every incident, with progress lines, then settles the lifecycle: the console opens with its
   answers, not a backlog (``Demo._answer_backlog``).
5. Creates the ``demo`` login, prints user and password, keeps the world advancing in real time (``speed``
   simulated seconds per second) with periodic sweeps, backfills older telemetry in the background, and
   serves until interrupted.

The driving (simulator, web server, sweeps, lifecycle) is the simulation harness's, ``harness.driver``
(:func:`harness.policy.demo_policy` while fast-forwarding, :func:`harness.policy.live_policy` once live).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import secrets
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from harness.database import sqlite_wal
from harness.driver import PROGRESS_EVERY_S, Harness
from harness.policy import demo_policy, live_policy

logger = logging.getLogger(__name__)

DEMO_SCENARIO = Path(__file__).resolve().parents[1] / "simulator" / "scenarios" / "demo.yaml"
LIVE_SPAN = timedelta(hours=24)
# The longest the login waits for the fast-forward's alerts to be grouped and diagnosed (the demo's ~120
# alerts take about a minute on a quiet machine); past it, the console serves what is done.
BACKLOG_WAIT_S = 600.0


@dataclasses.dataclass
class DemoOptions:
    scenario: str = str(DEMO_SCENARIO)
    serve: str | None = "127.0.0.1:8000"  # None: fast-forward, then stop (tests, CI)
    speed: float = 1.0
    sweep_every: timedelta = timedelta(minutes=20)
    user: str = "demo"
    live_span: timedelta = LIVE_SPAN


class Demo:
    def __init__(self, opts: DemoOptions, out: Callable[[str], None] = print) -> None:
        self.opts = opts
        self.out = out
        self.stop = threading.Event()
        self.harness: Harness | None = None
        # The wall-clock instant the fast-forward ends at: live, world time follows the wall clock from it.
        self.anchor: datetime | None = None

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        sqlite_wal()  # pages read while sweeps write
        now = timezone.now().replace(second=0, microsecond=0)
        self.anchor = now
        scenario, world = self._world(now)
        token = self._webhook_token() if self.opts.serve else None
        harness = self.harness = Harness(
            world, serve=self.opts.serve, token=token, hold_alerts=True, stop=self.stop
        )
        with harness:
            if harness.register(scenario, replace=True):
                self.out(f"dropping the previous demo data of cluster {scenario.cluster.name!r}")
            sim = harness.sim
            assert sim is not None and harness.cluster is not None
            self.out(
                f"simulated cluster {scenario.cluster.name!r}: kube {sim.kube_url}, "
                f"prometheus {sim.prometheus_url}, run:ai {sim.runai_url}"
            )
            self.out(
                f"fast-forwarding {scenario.start:%H:%M} → {now:%H:%M} UTC, a sweep every "
                f"{int(self.opts.sweep_every.total_seconds() // 60)} simulated minutes…"
            )
            now = min(now, world.end)  # a scenario with a fixed start may end before now
            harness.fast_forward(now, demo_policy(self.opts.sweep_every), progress=self.out)
            backfill_from = max(scenario.start, now - timedelta(hours=1))
            harness.backfill(backfill_from, now)  # the last hour now; older telemetry once the console is up
            answered = self._answer_backlog(harness, now) if self.opts.serve else {}
            user, password = create_login(self.opts.user)
            took = time.monotonic() - started
            timings = harness.timings
            summary = {
                "cluster": harness.cluster.name,
                "sweeps": harness.sweeps,
                "startup_s": round(took, 1),
                "user": user,
                "password": password,
                **answered,
                **{k: round(v, 1) for k, v in timings.items()},
            }
            self.out(
                f"ready in {took:.0f} s ({harness.sweeps} sweeps: {timings['sweeps_s']:.0f} s sweeping, "
                f"{timings['advance_s']:.0f} s simulating and posting alerts)"
            )
            if self.opts.serve:
                self.out(f"\n  console: http://{self.opts.serve}/   login: {user} / {password}\n")
                self._serve_live(harness, backfill=(scenario.start, backfill_from))
            return summary

    def _world(self, now: datetime) -> tuple[Any, Any]:
        """The scenario, its 12 h ending ``now`` (and, served, going on for the live span), and its world."""
        from simulator.engine.world import World
        from simulator.scenario import load_scenario

        scenario = load_scenario(self.opts.scenario, now=now)
        if self.opts.serve:  # keep the world going after now: the live part of the timeline
            scenario = dataclasses.replace(
                scenario, duration_s=scenario.duration_s + int(self.opts.live_span.total_seconds())
            )
        world = World.from_scenario(scenario)
        gc.freeze()  # the simulated world lives in this process: keep the collector from rescanning it
        return scenario, world

    def _serve_live(self, harness: Harness, *, backfill: tuple[datetime, datetime]) -> None:
        """Until stopped: the world follows the wall clock, swept at live cadences, while older telemetry
        (``backfill``: from, to) is filled in the background."""
        threading.Thread(
            target=harness.live,
            args=(live_policy(),),
            kwargs={"anchor": self.anchor, "speed": self.opts.speed},
            name="demo-live",
            daemon=True,
        ).start()
        threading.Thread(
            target=self._backfill,
            args=(harness, *backfill),
            name="demo-backfill",
            daemon=True,
        ).start()
        try:
            while not self.stop.wait(1.0):
                pass
        except KeyboardInterrupt:
            self.out("stopping…")

    def _answer_backlog(self, harness: Harness, now: datetime) -> dict[str, Any]:
        """Post the notifications held while fast-forwarding and wait until the intake has grouped, collected
        and diagnosed every one, bring their answers up to ``now`` (each was diagnosed at its onset; the cluster
        moved since), then settle the lifecycle at ``now``: the first page then shows today's answers, not a
        backlog. Progress lines count from the database (alerts grouped, incidents diagnosed)."""
        from incidents import diagnosis_run, inline_worker, lifecycle

        assert harness.poster is not None and harness.cluster is not None
        started = time.monotonic()
        queued = harness.release_alerts()
        self.out(f"answering the backlog: {queued} alert notification(s) for the intake…")
        reported = time.monotonic()
        while not self.stop.is_set():
            posted = harness.poster.posted + harness.poster.failed
            if posted >= queued and inline_worker.drain(timeout=1.0) and not backlog(harness.cluster.name):
                break
            if time.monotonic() - started > BACKLOG_WAIT_S:
                self.out(
                    f"  the intake is still busy after {BACKLOG_WAIT_S:.0f} s: serving now, "
                    "the remaining incidents appear as it finishes them"
                )
                break
            self.stop.wait(0.5)
            if time.monotonic() - reported > PROGRESS_EVERY_S:
                self.out(f"  … {progress_line(harness.cluster.name, posted, queued)}")
                reported = time.monotonic()
        rechecked = 0
        if not self.stop.is_set():
            self.out("  … bringing the open incidents' answers up to now")
            rechecked = diagnosis_run.rediagnose_changed(now, cluster_id=harness.cluster.pk)
        settled = lifecycle.settle(now)
        took = time.monotonic() - started
        self.out(f"backlog answered in {took:.0f} s: {progress_line(harness.cluster.name, queued, queued)}")
        return {
            "alerts_posted": queued,
            "backlog_s": round(took, 1),
            "resolved_at_start": settled.get("resolved", 0),
            "rechecked_at_start": rechecked,
        }

    def _webhook_token(self) -> str:
        if not settings.WEBHOOK_TOKENS:
            token = secrets.token_urlsafe(24)
            settings.WEBHOOK_TOKENS = [token]  # this process only: the simulator's Alertmanager uses it
            self.out(
                "alerts: no RCAWEB_WEBHOOK_TOKEN set; using a one-off token for the simulator's Alertmanager"
            )
        return str(settings.WEBHOOK_TOKENS[0])

    def _backfill(self, harness: Harness, start: datetime, end: datetime) -> None:
        """Older telemetry, hour by hour backwards, while the console is already up."""
        if harness.backfill(start, end, own_thread=True):
            self.out("telemetry backfilled for the whole scenario")


def backlog(cluster: str) -> bool:
    """Whether the intake still has work for ``cluster``: an alert not grouped yet, or an incident whose evidence
    collection and diagnosis has not finished (``collection_state``: pending or running)."""
    from incidents.models import Alert, Incident

    return (
        Alert.objects.filter(cluster_name=cluster, processed_at=None).exists()
        or Incident.objects.filter(
            cluster__name=cluster, collection_state__in=("pending", "running")
        ).exists()
    )


def progress_line(cluster: str, posted: int, queued: int) -> str:
    """``120 of 183 notifications posted, 95 of 118 alerts grouped, 40 of 64 incidents diagnosed``."""
    from incidents.models import Alert, Incident

    alerts = Alert.objects.filter(cluster_name=cluster)
    opened = Incident.objects.filter(cluster__name=cluster)
    return (
        f"{posted} of {queued} notifications posted, "
        f"{alerts.exclude(processed_at=None).count()} of {alerts.count()} alerts grouped, "
        f"{opened.exclude(diagnosed_at=None).count()} of {opened.count()} incidents diagnosed"
    )


def create_login(username: str) -> tuple[str, str]:
    """The demo user, a responder with a fresh random password (printed once)."""
    from django.contrib.auth.models import Group, User

    password = secrets.token_urlsafe(9)
    user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.org"})
    user.set_password(password)
    user.is_active = True
    user.save()
    group, _ = Group.objects.get_or_create(name="responder")
    user.groups.add(group)
    return username, password
