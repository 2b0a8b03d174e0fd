"""Run a scenario file through the real pipeline in fast forward, and check its ``expect`` block.

simulator (simulator, on loopback HTTP) → collectors (inventory/events/telemetry sweeps at simulated
time) → the simulator's Alertmanager posts over HTTP to this Django app, served on a free loopback port in a
thread → intake → grouping → evidence → diagnosis (Celery eager). The driving is the simulation harness's
(``rcaweb.harness``, with :func:`rcaweb.harness.scenario_policy`): it only moves the simulated clock and calls
the sweeps and the incident lifecycle (incidents.lifecycle.settle), as Celery beat would; it never calls the
intake or the diagnosis itself. This module reads the result: the JSON document and the expectations.

Used by ``manage.py run_scenario`` (docs/scenarios.md §5) and by the scenario tests. The webhook's server
threads open their own database connections: the database must be a file or a server (the tests put an
in-memory test database on a file first, ``tests/conftest.py``).
"""

from __future__ import annotations

import gc
import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings

from collectors.models import EntityVersion
from incidents.models import (
    Alert,
    Citation,
    DiagnosisRun,
    Hypothesis,
    Incident,
    IncidentSubject,
    ProposedAction,
)
from rcaweb import gc_policy
from rcaweb.timestamps import format_t_or_none

logger = logging.getLogger(__name__)

SWEEP_EVERY = timedelta(minutes=15)  # idle cadence; sweeps also run when alerts fire (rcaweb.harness)


@dataclass
class RunResult:
    scenario: str
    start: str | None = None  # the scenario's simulated start and end (ISO 8601 UTC)
    end: str | None = None
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
            "start": self.start,
            "end": self.end,
            "incidents": self.incidents,
            "expect": self.expect,
            "precision": self.precision,
        }

    @property
    def passed(self) -> bool:
        return all(e["passed"] for e in self.expect)


def run_scenario_file(
    path: Any, *, sweep_every: timedelta = SWEEP_EVERY, log: Any = None, sim_process: bool = False
) -> RunResult:
    """Simulate the scenario at ``path`` end to end; raises ``ScenarioError`` (with ``problems``) for a bad file.

    ``path`` may also be a ``Scenario`` already loaded (``manage.py run_scenario`` validates the file first:
    a file of 8,000 jobs is then read once, not twice). ``sim_process``: the simulated cluster runs in a
    process of its own (``simulator.process``), on another core than the pipeline; the answers are the
    same, and ``timings`` add the process' CPU seconds and peak memory.
    """
    from rcaweb.harness import Harness, scenario_policy, settings_set
    from simulator.engine.world import World
    from simulator.process import SimProcess
    from simulator.scenario import Scenario, load_scenario

    scenario = path if isinstance(path, Scenario) else load_scenario(path)
    started = time.monotonic()
    process = SimProcess(scenario, gc_thresholds=gc_policy.thresholds(settings.RCAWEB_GC_THRESHOLDS)) if sim_process else None
    world = None if process is not None else World.from_scenario(scenario)
    token = secrets.token_urlsafe(24)
    # One request at a time, kept out while the harness sweeps: the pipeline a notification started (which may
    # outlive the sender's 10 s timeout) never writes concurrently with a sweep (SQLite has one writer).
    harness = Harness(world, serve="127.0.0.1:0", token=token, quiet=True, serialize=True, process=process)
    with settings_set(WEBHOOK_TOKENS=[token], ALLOWED_HOSTS=["127.0.0.1", "localhost"]), harness:
        harness.register(scenario)
        harness.fast_forward(scenario.end, scenario_policy(sweep_every))
    timings: dict[str, float] = {**harness.timings, "sweeps": harness.sweeps}
    if process is not None:
        timings["sim_process_cpu_s"] = round(process.child_cpu_s, 2)
        timings["sim_process_peak_mib"] = round(process.child_peak_mib)
    # The simulated cluster (its world, rendered API objects and watch history: hundreds of MB at the public
    # trace's size) is done with: freed before the report is read, not held beside it.
    del harness, world
    gc.collect()
    result = RunResult(
        scenario=scenario.name,
        start=format_t_or_none(scenario.start),
        end=format_t_or_none(scenario.end),
        incidents=incidents_json(),
        timings=timings,
    )
    related = related_json()
    result.expect = check_expectations(scenario, result.incidents, related)
    result.precision = precision(scenario, result.incidents, related)
    result.timings["total_s"] = round(time.monotonic() - started, 2)
    if log is not None:
        log(
            f"{scenario.name}: {len(result.incidents)} incident(s) in {result.timings['total_s']} s "
            f"({timings['sweeps']} sweeps)"
        )
    return result


#
# The JSON document
#


def incidents_json() -> list[dict[str, Any]]:
    """Every incident with its first diagnosis (``hypotheses``) and every diagnosis in time order (``diagnoses``).

    Read in a fixed number of queries whatever the number of incidents and runs (the whole trace has
    thousands): runs, their cause hypotheses, citations and actions are each read once and joined here.
    """
    runs: dict[int, list[DiagnosisRun]] = {}
    for run in DiagnosisRun.objects.order_by("incident_id", "at", "id").iterator(chunk_size=5000):
        runs.setdefault(run.incident_id, []).append(run)
    hyps_by_run: dict[int, list[dict[str, Any]]] = {}
    unrun: dict[int, list[dict[str, Any]]] = {}  # current hypotheses saved without a run, per incident
    by_hyp: dict[int, dict[str, Any]] = {}
    for pk, incident_id, run_id, superseded, code, status, confidence, statement in (
        Hypothesis.objects.filter(scope="cause")
        .order_by("run_id", "rank", "id")
        .values_list("pk", "incident_id", "run_id", "superseded", "code", "status", "confidence", "statement")
        .iterator(chunk_size=5000)
    ):
        h = {
            "code": code,
            "status": status,
            "confidence": round(confidence, 2),
            "statement": statement,
            "evidence": [],
            "actions": [],
        }
        by_hyp[pk] = h
        if run_id is not None:
            hyps_by_run.setdefault(run_id, []).append(h)
        elif not superseded:
            unrun.setdefault(incident_id, []).append(h)
    for hyp_id, obs_id in (
        Citation.objects.order_by("hypothesis_id", "observation_id")
        .values_list("hypothesis_id", "observation_id")
        .iterator(chunk_size=5000)
    ):
        if hyp_id in by_hyp:
            by_hyp[hyp_id]["evidence"].append(obs_id)
    for hyp_id, title, command, impact, verify, rollback in (
        ProposedAction.objects.filter(hypothesis__isnull=False)
        .order_by("hypothesis_id", "rank", "id")
        .values_list("hypothesis_id", "title", "command", "impact", "verify", "rollback")
        .iterator(chunk_size=5000)
    ):
        if hyp_id in by_hyp:
            by_hyp[hyp_id]["actions"].append(
                {"title": title, "command": command, "impact": impact, "verify": verify, "rollback": rollback}
            )
    alerts: dict[int, list[str]] = {}
    for incident_id, name in Alert.objects.order_by("starts_at", "id").values_list("incident_id", "name"):
        names = alerts.setdefault(incident_id, [])
        if name not in names:
            names.append(name)
    subjects: dict[int, list[dict[str, Any]]] = {}
    for incident_id, kind, cluster, namespace, name in (
        IncidentSubject.objects.filter(role="subject")
        .order_by("id")
        .values_list(
            "incident_id", "entity__kind", "entity__cluster__name", "entity__namespace", "entity__name"
        )
    ):
        subjects.setdefault(incident_id, []).append(
            {"kind": kind, "cluster": cluster, "namespace": namespace, "name": name}
        )
    out = []
    for inc in Incident.objects.order_by("id"):
        mine = runs.get(inc.pk, [])
        # The onset's diagnosis: what on-call sees first, about the problem the scenario injected. Later
        # runs (joining alerts, subject changes) are in ``diagnoses``, each shown at its own t.
        first = mine[0] if mine else None
        out.append(
            {
                "id": inc.pk,
                "url": inc.get_absolute_url(),
                "title": inc.title,
                "status": inc.status,
                "resolved_at": format_t_or_none(inc.resolved_at),
                "alerts": alerts.get(inc.pk, []),
                "subjects": subjects.get(inc.pk, []),
                "diagnosed_at": format_t_or_none(first.at) if first else None,
                "hypotheses": hyps_by_run.get(first.pk, []) if first else unrun.get(inc.pk, []),
                "diagnoses": [
                    {"at": format_t_or_none(run.at), "hypotheses": hyps_by_run.get(run.pk, [])} for run in mine
                ],
            }
        )
    return out


def related_json() -> dict[int, list[dict[str, Any]]]:
    """Per incident, the entities linked as related (context), in the same shape as subjects."""
    out: dict[int, list[dict[str, Any]]] = {}
    # Plain values, streamed: the whole trace links ~10^5 related entities (a model instance and its
    # cluster's for each were ~60 MB at a quarter of it, at the end of the run: bench/trace.py)
    rows = (
        IncidentSubject.objects.exclude(role="subject")
        .order_by("id")
        .values_list(
            "incident_id", "entity__kind", "entity__cluster__name", "entity__namespace", "entity__name"
        )
    )
    for incident_id, kind, cluster, namespace, name in rows.iterator(chunk_size=5000):
        out.setdefault(incident_id, []).append(
            {"kind": kind, "cluster": cluster, "namespace": namespace, "name": name}
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
        moment, diagnosis = judged_diagnosis(scenario, exp, inc)
        if diagnosis is None:
            out.append(
                {
                    "alert": exp.alert,
                    "passed": False,
                    "why": f"incident {inc['id']}: no diagnosis in force at {moment}",
                }
            )
            continue
        hyps = diagnosis["hypotheses"]
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
        at = f" at {moment}" if moment else ""
        out.append(
            {
                "alert": exp.alert,
                "passed": not problems,
                "why": f"incident {inc['id']}{at}: " + "; ".join(problems) if problems else "",
            }
        )
    return out


def judged_diagnosis(scenario: Any, exp: Any, inc: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The moment an expectation is judged at ("" for the first diagnosis) and that diagnosis (``at``,
    ``hypotheses``).

    Without ``at``, the incident's first diagnosis (``hypotheses``). With it, the diagnosis in force at
    ``start + at``: the last of ``diagnoses`` whose ``at`` is not later; None when there is none yet.
    """
    at_s = getattr(exp, "at_s", None)
    if at_s is None:
        return "", {"at": inc.get("diagnosed_at"), "hypotheses": inc["hypotheses"]}
    moment = format_t_or_none(scenario.start + timedelta(seconds=at_s)) or ""
    in_force = None
    for d in inc.get("diagnoses", []):
        if d["at"] <= moment:  # both are ISO 8601 UTC with Z: text order is time order
            in_force = d
    return moment, in_force


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
    """Of the supported hypotheses of every diagnosis an expectation judges, the share it expects.

    An expected cause is the expectation's ``top`` or one of its ``supported`` codes; several expectations
    judging one diagnosis (one incident, at one moment) pool their codes. Each judged diagnosis counts once:
    the first diagnosis for an expectation without ``at``, the one in force at ``at`` otherwise. None when no
    judged diagnosis has a supported hypothesis.
    """
    related = related or {}
    wanted: dict[tuple[int, str], set[str]] = {}
    judged: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for exp in scenario.expect:
        for inc in incidents_for(scenario, exp, incidents, related)[:1]:
            _, diagnosis = judged_diagnosis(scenario, exp, inc)
            if diagnosis is None:
                continue
            # The same diagnosis reached from two moments (or without one) is one judgement.
            key = (inc["id"], str(diagnosis["at"]))
            judged[key] = diagnosis["hypotheses"]
            codes = wanted.setdefault(key, set())
            codes.update([exp.top] if exp.top else [])
            codes.update(exp.supported)
    supported = matched = 0
    for key, hyps in judged.items():
        for h in hyps:
            if h["status"] == "supported":
                supported += 1
                matched += h["code"] in wanted[key]
    return round(matched / supported, 3) if supported else None


__all__ = ["RunResult", "check_expectations", "incidents_json", "precision", "run_scenario_file", "top_code"]
