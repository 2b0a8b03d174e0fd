"""Run a scenario file through the real pipeline in fast forward, and check its ``expect`` block.

simulator (collectors.sim, on loopback HTTP) → collectors (inventory/events/telemetry sweeps at simulated
time) → the simulator's Alertmanager posts over HTTP to this Django app, served on a free loopback port in a
thread → intake → grouping → evidence → diagnosis (Celery eager). The driver only moves the simulated clock
and calls the sweeps and the incident lifecycle (incidents.lifecycle.settle), as Celery beat would; it never
calls the intake or the diagnosis itself.

Used by ``manage.py run_scenario`` (docs/scenarios.md §5) and by the scenario tests.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from typing import Any

from django.db import connections
from django.test.testcases import LiveServerThread
from django.test.utils import override_settings

from collectors.models import Cluster, EntityVersion
from incidents import inline
from incidents.models import Alert, DiagnosisRun, Hypothesis, Incident, IncidentSubject

logger = logging.getLogger(__name__)

SWEEP_EVERY = timedelta(minutes=15)  # idle cadence; sweeps also run when alerts fire (see the loop)
TELEMETRY_EVERY = timedelta(minutes=30)  # fleet samples; incident evidence reads Prometheus live
EVENTS_EVERY = timedelta(minutes=10)  # well inside the 1 h event TTL
INLINE_DRAIN_S = 600


@dataclass
class RunResult:
    scenario: str
    incidents: list[dict[str, Any]] = field(default_factory=list)
    expect: list[dict[str, Any]] = field(default_factory=list)
    precision: float | None = (
        None  # supported causes matching an expected cause of their subject / all supported
    )
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of docs/scenarios.md (exactly these keys)."""
        return {
            "scenario": self.scenario,
            "incidents": self.incidents,
            "expect": self.expect,
            "precision": self.precision,
        }

    @property
    def passed(self) -> bool:
        return all(e["passed"] for e in self.expect)


class _Server:
    """This Django app on a free loopback port, in a thread (the intake the simulator's Alertmanager posts to)."""

    def __init__(self) -> None:
        override = {}
        for conn in connections.all():
            # An in-memory SQLite database (the test database) is only visible through the same connection.
            if conn.vendor == "sqlite" and conn.is_in_memory_db():
                override[conn.alias] = conn
        self.override = override
        # Held while the app handles a request: the driver takes it before sweeping, so the pipeline a
        # notification started (which may outlive the sender's 10 s timeout) never writes concurrently with
        # a sweep (SQLite has one writer).
        self.busy = threading.Lock()
        self.thread = LiveServerThread("127.0.0.1", self._serialized, connections_override=override or None)

    def _serialized(self, app: Any) -> Any:
        def handle(environ: dict[str, Any], start_response: Any) -> Any:
            with self.busy:
                return list(app(environ, start_response))

        return handle

    def __enter__(self) -> _Server:
        for conn in self.override.values():
            conn.inc_thread_sharing()
        self.thread.daemon = True
        self.thread.start()
        self.thread.is_ready.wait()
        if self.thread.error:
            raise self.thread.error
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.thread.port}"

    def __exit__(self, *exc: object) -> None:
        self.thread.terminate()
        for conn in self.override.values():
            conn.dec_thread_sharing()


def run_scenario_file(path: Any, *, sweep_every: timedelta = SWEEP_EVERY, log: Any = None) -> RunResult:
    """Simulate the scenario at ``path`` end to end; raises ``ScenarioError`` (with ``problems``) for a bad file.

    ``path`` may also be a ``Scenario`` already loaded (``manage.py run_scenario`` validates the file first:
    a file of 8,000 jobs is then read once, not twice).
    """
    from collectors.sim.engine.world import World
    from collectors.sim.scenario import Scenario, load_scenario
    from collectors.sim.server import SimServer
    from collectors.sweep import sweep_cluster, sweep_events, sweep_telemetry
    from incidents.lifecycle import settle

    scenario = path if isinstance(path, Scenario) else load_scenario(path)
    started = time.monotonic()
    world = World.from_scenario(scenario)
    token = secrets.token_urlsafe(24)
    timings: dict[str, float] = {"sweeps_s": 0.0, "advance_s": 0.0}
    with (
        _Server() as web,
        override_settings(WEBHOOK_TOKENS=[token], ALLOWED_HOSTS=["127.0.0.1", "localhost"]),
    ):
        intake = f"{web.url}/api/v1/alerts/alertmanager"
        with SimServer(world, alert_url=intake, alert_token=token) as sim:
            cluster, _ = Cluster.objects.update_or_create(
                name=scenario.cluster.name,
                defaults={
                    "scheduler": scenario.cluster.scheduler,
                    "kubeconfig": sim.kubeconfig_path,
                    "prometheus_url": sim.prometheus_url,
                    "runai_url": sim.runai_url,
                },
            )
            tick = timedelta(seconds=getattr(world, "tick_seconds", 60))
            now = world.now
            last_sweep = last_tel = last_ev = None
            sweeps = 0
            notified: set[str] = set()
            held: set[str] = set()  # pending at the previous check
            was_firing: set[str] = set()  # firing at the previous check
            while True:
                # Sweep at the idle cadence, and right away when an alert starts firing: Alertmanager sends it
                # group_wait (30 s) later, i.e. during the next advance, and the intake must then find the
                # inventory of the moment it fired.
                # A condition that starts holding (pending) is swept too, once it has held through a whole
                # tick: it dates the symptom before the alert fires (a `for` of a tick or more, so still
                # before its onset), while a pod bound this tick, Pending only until its container starts
                # seconds later, makes a pending alert that never fires and needs no sweep of its own.
                firing, pending = set(), set()
                for a in world.alerts(include_pending=True):
                    key = f"{a['fingerprint']}:{a.get('status')}"
                    (firing if a.get("status") == "firing" else pending).add(key)
                due = firing | (pending & held)
                held = pending
                # An alert that stopped firing is swept too: it dates the subject's recovery (the incident's
                # quiet period starts when the inventory shows it healthy again, incidents.lifecycle).
                fresh = bool(due - notified) or bool(was_firing - firing)
                notified |= due
                was_firing = firing
                t0 = time.monotonic()
                with web.busy:  # wait for a pipeline run still in flight
                    # Without workers the intake answered first and the in-process worker groups, collects and
                    # diagnoses after it: let it finish with the inventory of this moment before sweeping on.
                    if not inline.drain(timeout=INLINE_DRAIN_S):
                        logger.warning("inline worker still busy after %d s; sweeping anyway", INLINE_DRAIN_S)
                    if last_sweep is None or fresh or now - last_sweep >= sweep_every:
                        sweep_cluster(cluster.name, now)
                        last_sweep = now
                        sweeps += 1
                    if last_ev is None or fresh or now - last_ev >= EVENTS_EVERY:
                        sweep_events(cluster.name, now)
                        last_ev = now
                    if last_tel is None or now - last_tel >= TELEMETRY_EVERY:
                        sweep_telemetry(cluster.name, now)
                        last_tel = now
                    # What beat's settle_incidents does, at simulated time: one query on a tick with nothing to do.
                    settle(now)
                timings["sweeps_s"] += time.monotonic() - t0
                if now >= scenario.end:
                    break
                now = min(now + tick, scenario.end)
                t0 = time.monotonic()
                # The sender posts due notifications to the intake, which runs the pipeline.
                sim.advance_to(now)
                timings["advance_s"] += time.monotonic() - t0
            timings["sweeps"] = sweeps
    result = RunResult(scenario=scenario.name, incidents=incidents_json(), timings=timings)
    related = related_json()
    result.expect = check_expectations(scenario, result.incidents, related)
    result.precision = precision(scenario, result.incidents, related)
    result.timings["total_s"] = round(time.monotonic() - started, 2)
    if log is not None:
        log(
            f"{scenario.name}: {len(result.incidents)} incident(s) in {result.timings['total_s']} s "
            f"({sweeps} sweeps)"
        )
    return result


#
# The JSON document
#
def incidents_json() -> list[dict[str, Any]]:
    out = []
    for inc in Incident.objects.order_by("id"):
        alerts: list[str] = []
        for name in (
            Alert.objects.filter(incident=inc).order_by("starts_at", "id").values_list("name", flat=True)
        ):
            if name not in alerts:
                alerts.append(name)
        subjects = [
            {"kind": e.kind, "cluster": e.cluster.name, "namespace": e.namespace, "name": e.name}
            for e in (
                lk.entity
                for lk in IncidentSubject.objects.filter(incident=inc, role="subject")
                .select_related("entity", "entity__cluster")
                .order_by("id")
            )
        ]
        # The onset's diagnosis: what on-call sees first, about the problem the scenario injected. Later
        # runs (joining alerts, subject changes) are kept on the incident and shown at their own t.
        run = DiagnosisRun.objects.filter(incident=inc).order_by("at", "id").first()
        mine = Hypothesis.objects.filter(run=run) if run else Hypothesis.objects.current()
        hyps = [
            {
                "code": h.code,
                "status": h.status,
                "confidence": round(h.confidence, 2),
                "statement": h.statement,
                "evidence": sorted(h.evidence.values_list("id", flat=True)),
            }
            for h in mine.filter(incident=inc, scope="cause").order_by("rank", "id")
        ]
        out.append(
            {
                "id": inc.pk,
                "url": inc.get_absolute_url(),
                "alerts": alerts,
                "subjects": subjects,
                "diagnosed_at": run.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if run else None,
                "hypotheses": hyps,
            }
        )
    return out


def related_json() -> dict[int, list[dict[str, Any]]]:
    """Per incident, the entities linked as related (context), in the same shape as subjects."""
    out: dict[int, list[dict[str, Any]]] = {}
    for lk in IncidentSubject.objects.exclude(role="subject").select_related("entity", "entity__cluster"):
        e = lk.entity
        out.setdefault(lk.incident_id, []).append(
            {"kind": e.kind, "cluster": e.cluster.name, "namespace": e.namespace, "name": e.name}
        )
    return out


#
# Expectations
#
def subject_matches(expect_subject: dict[str, Any], subjects: list[dict[str, Any]], cluster: str) -> bool:
    for kind in ("job", "node", "project"):
        if kind in expect_subject:
            return any(s["kind"] == kind and s["name"] == expect_subject[kind] for s in subjects)
    gpu = expect_subject.get("gpu")
    if isinstance(gpu, dict):
        uuids = gpu_uuids(cluster, str(gpu.get("node")), int(gpu.get("index", -1)))
        return any(s["kind"] == "gpu" and s["name"] in uuids for s in subjects)
    return False


def gpu_uuids(cluster: str, node: str, index: int) -> set[str]:
    """UUIDs of the GPU that sat at (node, index) in any version (a GPU entity is named by its UUID)."""
    out = set()
    for v in EntityVersion.objects.filter(cluster__name=cluster, kind="gpu", node=node).select_related(
        "entity"
    ):
        if (v.state or {}).get("index") == index:
            out.add(v.entity.name)
    return out


def check_expectations(
    scenario: Any, incidents: list[dict[str, Any]], related: dict[int, list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    """Each expect entry against the incident with its alert about its subject.

    The subject is looked for among the incident's subjects first, then among the entities linked to it as
    related (a GPU alert that names the pod holding the GPU is grouped about the GPU, with the pod and job
    as context; the expectation names the job).
    """
    related = related or {}
    out = []
    for exp in scenario.expect:
        matching = incidents_for(scenario, exp, incidents, related)
        if not matching:
            seen = sorted({a for i in incidents for a in i["alerts"]})
            out.append(
                {
                    "alert": exp.alert,
                    "passed": False,
                    "why": f"no incident with alert {exp.alert} about {exp.subject} (alerts seen: {seen or 'none'})",
                }
            )
            continue
        problems: list[str] = []
        inc = matching[0]
        hyps = inc["hypotheses"]
        status = {h["code"]: h["status"] for h in hyps}
        if exp.top is not None:
            top = top_code(hyps)
            if top != exp.top:
                problems.append(f"top is {top or 'no cause found'}, expected {exp.top}")
        for code in exp.supported:
            if status.get(code) != "supported":
                problems.append(f"{code} is {status.get(code, 'absent')}, expected supported")
        for code in exp.not_supported:
            if status.get(code) == "supported":
                problems.append(f"{code} is supported, expected not")
        out.append(
            {
                "alert": exp.alert,
                "passed": not problems,
                "why": f"incident {inc['id']}: " + "; ".join(problems) if problems else "",
            }
        )
    return out


def top_code(hyps: list[dict[str, Any]]) -> str | None:
    """The incident's top: its first supported hypothesis (a refuted or unverified one is never the top)."""
    return next((h["code"] for h in hyps if h["status"] == "supported"), None)


def incidents_for(
    scenario: Any, exp: Any, incidents: list[dict[str, Any]], related: dict[int, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The incidents with the expectation's alert about its subject (subjects first, then related)."""
    with_alert = [i for i in incidents if exp.alert in i["alerts"]]
    matching = [i for i in with_alert if subject_matches(exp.subject, i["subjects"], scenario.cluster.name)]
    return matching or [
        i for i in with_alert if subject_matches(exp.subject, related.get(i["id"], []), scenario.cluster.name)
    ]


def precision(
    scenario: Any, incidents: list[dict[str, Any]], related: dict[int, list[dict[str, Any]]] | None = None
) -> float | None:
    """Of the supported hypotheses of the incidents an expectation is about, the share it expects.

    An expected cause is the expectation's ``top`` or one of its ``supported`` codes; several expectations
    about one incident pool their codes. None when no expected incident has a supported hypothesis.
    """
    related = related or {}
    wanted: dict[int, set[str]] = {}
    for exp in scenario.expect:
        for inc in incidents_for(scenario, exp, incidents, related)[:1]:
            codes = wanted.setdefault(inc["id"], set())
            codes.update([exp.top] if exp.top else [])
            codes.update(exp.supported)
    supported = matched = 0
    for inc in incidents:
        if inc["id"] not in wanted:
            continue
        for h in inc["hypotheses"]:
            if h["status"] == "supported":
                supported += 1
                matched += h["code"] in wanted[inc["id"]]
    return round(matched / supported, 3) if supported else None


__all__ = ["RunResult", "check_expectations", "incidents_json", "precision", "run_scenario_file", "top_code"]
