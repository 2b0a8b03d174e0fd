"""A scenario run's result: the JSON document of docs/scenarios.md §5 (its keys are a contract), read from the
database once the run has ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from incidents.models import (
    Alert,
    Citation,
    DiagnosisRun,
    Hypothesis,
    Incident,
    IncidentSubject,
    ProposedAction,
)
from rcaweb.timestamps import format_t_or_none

CHUNK = 5000  # rows per fetch of the streamed reads


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


def incidents_json() -> list[dict[str, Any]]:
    """Every incident with its first diagnosis (``hypotheses``) and every diagnosis in time order (``diagnoses``).

    Read in a fixed number of queries whatever the number of incidents and runs (the whole trace has
    thousands): runs, their cause hypotheses, citations and actions are each read once and joined here.
    """
    runs: dict[int, list[DiagnosisRun]] = {}
    for run in DiagnosisRun.objects.order_by("incident_id", "at", "id").iterator(chunk_size=CHUNK):
        runs.setdefault(run.incident_id, []).append(run)
    hyps_by_run, unrun = cause_hypotheses()
    alerts = alert_names()
    subjects = linked_entities(subjects=True)
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


def cause_hypotheses() -> tuple[dict[int, list[dict[str, Any]]], dict[int, list[dict[str, Any]]]]:
    """The cause hypotheses, each with its evidence and actions: per diagnosis run, and per incident those
    current ones saved without a run."""
    by_run: dict[int, list[dict[str, Any]]] = {}
    unrun: dict[int, list[dict[str, Any]]] = {}
    by_hyp: dict[int, dict[str, Any]] = {}
    for pk, incident_id, run_id, superseded, code, status, confidence, statement in (
        Hypothesis.objects.filter(scope="cause")
        .order_by("run_id", "rank", "id")
        .values_list("pk", "incident_id", "run_id", "superseded", "code", "status", "confidence", "statement")
        .iterator(chunk_size=CHUNK)
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
            by_run.setdefault(run_id, []).append(h)
        elif not superseded:
            unrun.setdefault(incident_id, []).append(h)
    for hyp_id, obs_id in (
        Citation.objects.order_by("hypothesis_id", "observation_id")
        .values_list("hypothesis_id", "observation_id")
        .iterator(chunk_size=CHUNK)
    ):
        if hyp_id in by_hyp:
            by_hyp[hyp_id]["evidence"].append(obs_id)
    for hyp_id, title, command, impact, verify, rollback in (
        ProposedAction.objects.filter(hypothesis__isnull=False)
        .order_by("hypothesis_id", "rank", "id")
        .values_list("hypothesis_id", "title", "command", "impact", "verify", "rollback")
        .iterator(chunk_size=CHUNK)
    ):
        if hyp_id in by_hyp:
            by_hyp[hyp_id]["actions"].append(
                {"title": title, "command": command, "impact": impact, "verify": verify, "rollback": rollback}
            )
    return by_run, unrun


def alert_names() -> dict[int, list[str]]:
    """Per incident, the names of its alerts, each once, in the order they started."""
    alerts: dict[int, list[str]] = {}
    for incident_id, name in Alert.objects.order_by("starts_at", "id").values_list("incident_id", "name"):
        names = alerts.setdefault(incident_id, [])
        if name not in names:
            names.append(name)
    return alerts


def linked_entities(*, subjects: bool) -> dict[int, list[dict[str, Any]]]:
    """Per incident, its subjects (``subjects``) or the entities linked to it as related (the context)."""
    links = IncidentSubject.objects.all()
    links = links.filter(role="subject") if subjects else links.exclude(role="subject")
    out: dict[int, list[dict[str, Any]]] = {}
    # Plain values, streamed: the whole trace links ~10^5 related entities (a model instance and its
    # cluster's for each were ~60 MB at a quarter of it, at the end of the run: bench/trace.py)
    rows = links.order_by("id").values_list(
        "incident_id", "entity__kind", "entity__cluster__name", "entity__namespace", "entity__name"
    )
    for incident_id, kind, cluster, namespace, name in rows.iterator(chunk_size=CHUNK):
        out.setdefault(incident_id, []).append(
            {"kind": kind, "cluster": cluster, "namespace": namespace, "name": name}
        )
    return out


def related_json() -> dict[int, list[dict[str, Any]]]:
    """Per incident, the entities linked as related (context), in the same shape as subjects."""
    return linked_entities(subjects=False)
