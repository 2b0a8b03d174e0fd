"""``manage.py demo``: the bundled demo scenario on the simulator, read by the real collectors, served live.

1. Loads ``collectors/sim/scenarios/demo.yaml`` so that its 12 h end now (the timeline is extended by the
   live span so the world keeps moving after startup), starts the SimServer on loopback and this Django app.
2. Registers the Cluster with the simulator's kubeconfig and Prometheus/Run:ai URLs (the cluster's old demo
   data is dropped first: history is append-only and the new timeline starts earlier than the old one ended).
3. Fast-forwards the world to now, sweeping the inventory every ``sweep_every`` simulated minutes (and when the
   set of pending/firing alerts changes), events along, telemetry for the last hour; the simulator's
   Alertmanager posts to this app's own ``/api/v1/alerts/alertmanager`` with the webhook token.
4. Creates the ``demo`` login, prints user and password, then keeps the world advancing in real time
   (``speed`` simulated seconds per second) with periodic sweeps, backfills older telemetry in the
   background, and serves until interrupted.
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
from django.db import OperationalError, close_old_connections
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from collectors.models import Cluster
from collectors.sweep import sweep_cluster, sweep_events, sweep_telemetry

logger = logging.getLogger(__name__)

DEMO_SCENARIO = Path(__file__).resolve().parent / "sim" / "scenarios" / "demo.yaml"
LIVE_SPAN = timedelta(hours=24)


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
        self.web: Any = None
        self.sim: Any = None
        self.cluster: Cluster | None = None
        self.alert_key: frozenset[str] = frozenset()
        self.sweeps = 0
        self.poster: AlertPoster | None = None
        self.timings = {"sweeps_s": 0.0, "advance_s": 0.0}
        self.anchor: datetime | None = None  # the wall-clock instant the fast-forward ends at (world time = wall)

    #
    # Setup
    #

    def run(self) -> dict[str, Any]:
        from collectors.sim.engine.world import World
        from collectors.sim.scenario import load_scenario
        from collectors.sim.server import SimServer

        started = time.monotonic()
        _sqlite_for_concurrency()
        now = timezone.now().replace(second=0, microsecond=0)
        self.anchor = now
        scenario = load_scenario(self.opts.scenario, now=now)
        if self.opts.serve:  # keep the world going after now: the live part of the timeline
            scenario = dataclasses.replace(
                scenario, duration_s=scenario.duration_s + int(self.opts.live_span.total_seconds())
            )
        world = World.from_scenario(scenario)
        gc.freeze()  # the simulated world lives in this process: keep the collector from rescanning it
        poster: AlertPoster | None = None
        if self.opts.serve:
            self.web = _start_web(self.opts.serve)
            alert_url, token = self._alert_target()
            if alert_url and token:
                poster = AlertPoster(alert_url, token, self.stop)
        self.poster = poster
        self.sim = SimServer(world, alert_sink=poster)
        self.sim.start()
        try:
            self.cluster = self._register(scenario)
            self.out(
                f"simulated cluster {scenario.cluster.name!r}: kube {self.sim.kube_url}, "
                f"prometheus {self.sim.prometheus_url}, run:ai {self.sim.runai_url}"
            )
            self.out(
                f"fast-forwarding {scenario.start:%H:%M} → {now:%H:%M} UTC, a sweep every "
                f"{int(self.opts.sweep_every.total_seconds() // 60)} simulated minutes…"
            )
            now = min(now, world.end)  # a scenario with a fixed start may end before now
            self._fast_forward(now)
            backfill_from = max(scenario.start, now - timedelta(hours=1))
            sweep_telemetry(self.cluster.name, now, since=backfill_from)
            user, password = create_login(self.opts.user)
            took = time.monotonic() - started
            summary = {
                "cluster": self.cluster.name,
                "sweeps": self.sweeps,
                "startup_s": round(took, 1),
                "user": user,
                "password": password,
                **{k: round(v, 1) for k, v in self.timings.items()},
            }
            self.out(
                f"ready in {took:.0f} s ({self.sweeps} sweeps: {self.timings['sweeps_s']:.0f} s sweeping, "
                f"{self.timings['advance_s']:.0f} s simulating and posting alerts)"
            )
            if not self.opts.serve:
                return summary
            self.out(f"\n  console: http://{self.opts.serve}/   login: {user} / {password}\n")
            if self.poster is not None:
                self.poster.resume()
            if self.poster is not None and not self.poster.queue.empty():
                self.out(
                    f"  {self.poster.queue.qsize()} alert notification(s) still queued for the intake; "
                    "incidents appear as it processes them"
                )
            threading.Thread(target=self._live, name="demo-live", daemon=True).start()
            threading.Thread(
                target=self._backfill, args=(scenario.start, backfill_from), name="demo-backfill", daemon=True
            ).start()
            try:
                while not self.stop.wait(1.0):
                    pass
            except KeyboardInterrupt:
                self.out("stopping…")
            return summary
        finally:
            self.stop.set()
            self.sim.stop()
            if self.web is not None:
                self.web.shutdown()

    def _alert_target(self) -> tuple[str | None, str | None]:
        try:
            path = reverse("incidents:api-alertmanager")
        except NoReverseMatch:
            self.out(
                "alerts: the intake endpoint /api/v1/alerts/alertmanager does not exist yet; not posting alerts"
            )
            return None, None
        if not settings.WEBHOOK_TOKENS:
            token = secrets.token_urlsafe(24)
            settings.WEBHOOK_TOKENS = [token]  # this process only: the simulator's Alertmanager uses it
            self.out(
                "alerts: no RCAWEB_WEBHOOK_TOKEN set; using a one-off token for the simulator's Alertmanager"
            )
        host, port = self.opts.serve.rsplit(":", 1)
        host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        return f"http://{host}:{port}{path}", settings.WEBHOOK_TOKENS[0]

    def _register(self, scenario: Any) -> Cluster:
        name = scenario.cluster.name
        if Cluster.objects.filter(name=name).exists():
            self.out(f"dropping the previous demo data of cluster {name!r}")
            Cluster.objects.filter(name=name).delete()
        return Cluster.objects.create(
            name=name,
            scheduler=scenario.cluster.scheduler,
            kubeconfig=self.sim.kubeconfig_path,
            prometheus_url=self.sim.prometheus_url,
            runai_url=self.sim.runai_url,
        )

    #
    # Sweeping
    #

    def _fast_forward(self, now: datetime) -> None:
        world = self.sim.world
        t = world.now
        last_sweep: datetime | None = None
        tick = timedelta(seconds=getattr(world, "tick_seconds", 60))
        report = time.monotonic()
        while True:
            key = _alert_key(world)
            # A newly firing alert: the intake will want inventory from around its start, so sweep early, but
            # at most every half interval (dozens of per-GPU alerts fire within minutes of each other).
            new_alert = bool(key - self.alert_key) and (
                last_sweep is None or t - last_sweep >= max(timedelta(minutes=5), self.opts.sweep_every / 2)
            )
            if last_sweep is None or t - last_sweep >= self.opts.sweep_every or new_alert or t >= now:
                self._sweep(t, events=True)
                last_sweep = t
                self.alert_key = key
            if t >= now:
                break
            t = min(t + tick, now)
            started = time.monotonic()
            self.sim.advance_to(t)  # the simulator's Alertmanager posts what fires to the intake
            self.timings["advance_s"] += time.monotonic() - started
            if time.monotonic() - report > 10:
                self.out(f"  … {t:%H:%M} UTC ({self.sweeps} sweeps)")
                report = time.monotonic()

    def _sweep(self, t: datetime, *, events: bool) -> None:
        """One inventory (+ events) sweep. SQLite has one writer: when the intake (web thread) holds it too long
        the sweep is tried again (it is idempotent), then skipped — the next one catches up."""
        assert self.cluster is not None
        started = time.monotonic()
        try:
            for attempt in (1, 2, 3):
                try:
                    summary = sweep_cluster(self.cluster.name, t)
                    if events:
                        sweep_events(self.cluster.name, t)
                    break
                except OperationalError as exc:
                    logger.warning("demo sweep at %s, attempt %d: %s", t, attempt, exc)
            else:
                return
        finally:
            self.timings["sweeps_s"] += time.monotonic() - started
        self.sweeps += 1
        if summary.errors:
            logger.warning("demo sweep at %s: %s", t, "; ".join(summary.errors))

    def _live(self) -> None:
        """Real time: advance the world with the wall clock; inventory every 30 s, events 15 s, telemetry 60 s, and
        the incident lifecycle every minute (as beat would), at the world's time."""
        assert self.cluster is not None
        # The world's time follows the wall clock from the instant the fast-forward aimed at (self.anchor): the
        # first advance catches up the startup time, so at speed 1 world time = wall time and kubectl's AGE and
        # event times are right.
        sim_start = self.sim.world.now
        anchor = self.anchor or sim_start
        from incidents.lifecycle import settle
        from incidents.tasks import SETTLE_EVERY_S

        due = {"inventory": 0.0, "events": 0.0, "telemetry": 0.0, "lifecycle": 0.0}
        every = {
            "inventory": settings.RCAWEB_SWEEP_INVENTORY_S,
            "events": settings.RCAWEB_SWEEP_EVENTS_S,
            "telemetry": settings.RCAWEB_SWEEP_TELEMETRY_S,
            "lifecycle": SETTLE_EVERY_S,
        }
        while not self.stop.is_set():
            try:
                wall_elapsed = (timezone.now() - anchor).total_seconds()
                target = sim_start + timedelta(seconds=max(0.0, wall_elapsed) * self.opts.speed)
                if target > self.sim.world.now:
                    self.sim.advance_to(target.replace(microsecond=0))
                t = self.sim.world.now
                wall = time.monotonic()
                if wall >= due["inventory"] or _alert_key(self.sim.world) - self.alert_key:
                    self._sweep(t, events=False)
                    self.alert_key = _alert_key(self.sim.world)
                    due["inventory"] = wall + every["inventory"]
                if wall >= due["events"]:
                    sweep_events(self.cluster.name, t)
                    due["events"] = wall + every["events"]
                if wall >= due["telemetry"]:
                    sweep_telemetry(self.cluster.name, t)
                    due["telemetry"] = wall + every["telemetry"]
                if wall >= due["lifecycle"]:  # beat's settle_incidents: no worker runs beat in the demo
                    settle(t)
                    due["lifecycle"] = wall + every["lifecycle"]
            except Exception:  # the demo keeps going; the error is in the log
                logger.exception("demo live loop")
            finally:
                close_old_connections()
            self.stop.wait(1.0)

    def _backfill(self, start: datetime, end: datetime) -> None:
        """Older telemetry, hour by hour backwards, while the console is already up."""
        assert self.cluster is not None
        t = end
        while t > start and not self.stop.is_set():
            since = max(start, t - timedelta(hours=1))
            try:
                sweep_telemetry(self.cluster.name, t, since=since)
            except Exception:
                logger.exception("demo telemetry backfill")
            finally:
                close_old_connections()
            t = since
        if not self.stop.is_set():
            self.out("telemetry backfilled for the whole scenario")


class AlertPoster:
    """The simulator's Alertmanager notifications, posted to this app's intake from a queue in a thread.

    Posting inline would stall the fast-forward for as long as the intake takes to process a notification
    (evidence and diagnosis run inline without a Celery worker, and share SQLite's single writer with the
    sweeps). So notifications sent while fast-forwarding wait in the queue and are posted, in order, once the
    console is up (like an Alertmanager backlog); then the incidents appear as the intake gets through them.
    Same HTTP request, same bearer token as a real Alertmanager.
    """

    def __init__(self, url: str, token: str, stop: threading.Event, timeout_s: float = 300.0) -> None:
        import queue

        import requests

        self.url = url
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.timeout_s = timeout_s
        self.stop = stop
        self.posted = 0
        self.failed = 0
        self.go = threading.Event()  # set by resume(): while fast-forwarding, notifications wait in the queue
        threading.Thread(target=self._run, name="demo-alerts", daemon=True).start()

    def resume(self) -> None:
        self.go.set()

    def __call__(self, payload: dict[str, Any]) -> None:
        self.queue.put(payload)

    def _run(self) -> None:
        import queue

        import requests

        while not self.go.wait(0.5):
            if self.stop.is_set():
                return
        while not self.stop.is_set():
            try:
                payload = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                resp = self.session.post(self.url, json=payload, timeout=self.timeout_s)
                if resp.status_code >= 300:
                    self.failed += 1
                    logger.warning("alert intake answered %s: %s", resp.status_code, resp.text[:200])
                else:
                    self.posted += 1
            except requests.RequestException as exc:
                self.failed += 1
                logger.warning("alert intake unreachable: %s", exc)


def _alert_key(world: Any) -> frozenset[str]:
    """Fingerprints of the firing alerts: a new one means the intake will soon want fresh inventory."""
    try:
        alerts = world.alerts(include_pending=False)
    except Exception:
        return frozenset()
    return frozenset(str(a.get("fingerprint", "")) for a in alerts if isinstance(a, dict))


def _sqlite_for_concurrency() -> None:
    """SQLite in WAL mode: pages read while sweeps write.

    Only for the demo process (every connection it opens); PostgreSQL is left alone. The settings' own SQLite
    options ask for WAL too (``rcaweb.settings.SQLITE_OPTIONS``); this covers a database configured without
    them. Sync stays FULL: the webhook answers 200 only once its alerts are on disk (docs/intake.md).
    """
    from django.db import connections
    from django.db.backends.signals import connection_created

    def pragmas(sender: Any, connection: Any, **kwargs: Any) -> None:
        if connection.vendor != "sqlite" or connection.in_atomic_block:
            return  # (inside a transaction SQLite refuses; tests run there)
        try:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA journal_mode=WAL")
        except OperationalError as exc:
            logger.info("sqlite pragmas not applied: %s", exc)

    connection_created.connect(pragmas, weak=False, dispatch_uid="rcaweb-demo-sqlite")
    for conn in connections.all():
        if conn.vendor == "sqlite" and conn.connection is not None:
            pragmas(None, conn)


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


def _start_web(address: str) -> Any:
    """This Django app on ``address`` in a thread (threaded WSGI server, as runserver uses)."""
    from django.core.servers.basehttp import (
        ThreadedWSGIServer,
        WSGIRequestHandler,
        get_internal_wsgi_application,
    )

    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"--serve {address!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")

    class Handler(WSGIRequestHandler):
        # TCP_NODELAY: wsgiref writes the headers and the body in two sends; with Nagle the body waits for the
        # client's delayed ACK of the headers (40 ms on Linux), which was most of every webhook answer.
        disable_nagle_algorithm = True

    httpd = ThreadedWSGIServer((host or "127.0.0.1", int(port)), Handler, allow_reuse_address=True)
    httpd.daemon_threads = True
    httpd.set_app(get_internal_wsgi_application())
    threading.Thread(target=httpd.serve_forever, name="demo-web", daemon=True).start()
    return httpd
