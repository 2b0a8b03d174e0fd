"""Every bundled scenario's ``expect`` holds through the real pipeline.

simulator (loopback HTTP) → collectors' sweeps → the simulator's Alertmanager posting to the intake served in
a thread → grouping → evidence → diagnosis. Nothing here calls the diagnosis directly: the hypotheses checked
are the ones the pipeline stored. demo.yaml is the 12 h demo, exercised by ``make demo`` instead.

The same run also holds the bounded diagnosis input to the whole fleet: ``load_incident_input`` reads the
incident's own jobs in full and every other job by the keys the checks read of it, and only the changes the
checks can read (docs/diagnosis.md "Bounded by the incident"). For every incident, at every moment it was
diagnosed, the checks must answer the same from both inputs: the same findings (code, status, scope,
confidence, statement, why, subject, what they cite) and the same actions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.scenario_run import run_scenario_file
from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.checks import Diagnosis, run_checks
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduling_pass import cluster_pass, position
from incidents.diagnosis.types import Derived, DiagnosisInput
from incidents.diagnosis_input import load_incident_input
from incidents.models import DiagnosisRun, Incident

# Scenarios whose expected incident also has a supported hypothesis its expectations do not name, with the
# precision that gives and why (open questions for the diagnosis, not accepted answers).
KNOWN_IMPRECISE: dict[str, tuple[float, str]] = {
    # preempted (0.85): the job was preempted by a reclaim within the cohort before it waited on the
    # department's limit; true of the job, but not named by the expectation
    "department-cohort-kueue": (0.5, "the preemption that started the wait is supported beside the cause"),
}

SCENARIOS = sorted(
    p
    for p in (Path(__file__).resolve().parents[2] / "simulator" / "scenarios").glob("*.yaml")
    if p.name != "demo.yaml"
)
# The slowest tests of the suite: CI runs them once, in the SQLite pass (.ci/run deselects "scenarios" on PostgreSQL).
pytestmark = pytest.mark.scenarios


def _cite(c: Any) -> Any:
    return c.key if isinstance(c, Derived) else c


def answer(result: Diagnosis) -> dict[str, Any]:
    return {
        "findings": [
            (
                f.code,
                f.status,
                f.scope,
                round(f.confidence, 4),
                f.statement,
                f.why,
                f.subject,
                [_cite(c) for c in f.supports],
                [_cite(c) for c in f.refutes],
            )
            for f in result.findings
        ],
        "actions": [(a.code, a.title, a.command, a.impact, a.verify, a.rollback) for a in result.actions],
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")  # the webhook's server threads must see the database
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_it_meets_the_scenario_expectations(path: Path) -> None:
    result = run_scenario_file(str(path))
    assert result.expect, f"{path.name} has no expect block"
    failed = [f"{e['alert']}: {e['why']}" for e in result.expect if not e["passed"]]
    tops = {i["id"]: [h["code"] for h in i["hypotheses"][:3]] for i in result.incidents}
    assert not failed, f"{path.name}: {failed}; incidents' top hypotheses: {tops}"
    # No cause supported on an expected incident that its expectations do not name (a fault elsewhere in the
    # cluster called a cause): precision 1.0, but for the known gaps below, held at their value so that a
    # fix or a further slip both show.
    assert result.precision in (None, KNOWN_IMPRECISE.get(path.stem, (1.0, ""))[0]), (
        f"{path.name}: precision {result.precision}; {tops}"
    )
    compared = 0
    for incident in Incident.objects.select_related("cluster").order_by("pk"):
        for at in DiagnosisRun.objects.filter(incident=incident).values_list("at", flat=True).distinct():
            bounded = load_incident_input(incident, at)
            whole = load_incident_input(incident, at, bounded=False)
            assert len(bounded.jobs) == len(whole.jobs)
            assert len(bounded.changes) <= len(whole.changes)
            result = run_checks(bounded)
            assert answer(result) == answer(run_checks(whole)), (path.name, incident.pk, at)
            assert not inconsistencies(bounded, result), (
                path.name,
                incident.pk,
                at,
                inconsistencies(bounded, result),
            )
            compared += 1
        for run in DiagnosisRun.objects.filter(incident=incident).exclude(top_code="").exclude(title=""):
            assert not title_numbers_apart(run.title, run.top_statement), (
                path.name,
                incident.pk,
                run.at,
                run.title,
            )
    assert compared, f"{path.name}: no diagnosis to compare"


# One set of facts per diagnosis (issue: "one page, two stories"): what one part of an answer says, no other
# part of the same answer contradicts.
CAPACITY_TYPE = {
    C.GPU_CAPACITY_SHORTAGE,
    C.GPU_FRAGMENTATION,
    C.GPU_MISSING,
    C.GPU_NODE_UNAVAILABLE,
    C.DEVICE_PLUGIN_UNHEALTHY,
}


def inconsistencies(di: DiagnosisInput, result: Diagnosis) -> list[str]:
    out = []
    causes = [f for f in result.findings if f.scope == "cause" and f.supported]
    with di.indexed():
        for ref in di.subjects:
            job = di.find("job", ref.name, ref.namespace) if ref.kind == "job" else None
            if job is None or not is_pending(job):
                continue
            req = job_request(di, job)
            if req.pods and F.fits(F.node_fits(di, req), req):
                wrong = [f.code for f in causes if f.code in CAPACITY_TYPE and f.subject == ref]
                if wrong:
                    out.append(f"{ref.label} fits now, yet {wrong} supported")
    nothing = [
        f
        for f in result.findings
        if f.code == C.RECENT_CHANGE and not f.supported and f.statement.startswith("Nothing was changed")
    ]
    if nothing:
        citing = [
            f.code for f in causes if any(isinstance(c, Derived) and c.kind == "change" for c in f.supports)
        ]
        if citing:
            out.append(f"{citing} cite a change while recent_change says nothing changed")
    out += ahead_apart(di, result)
    for f in result.findings:  # a reader sees words, never the codes the checks use among themselves
        named = [code for code in C.NAMES if "_" in code and re.search(rf"(?<![\w/|]){code}(?![\w/|])", f.statement)]
        if named:
            out.append(f"{f.code}'s statement names {named}: {f.statement[:120]}")
    return out


def ahead_apart(di: DiagnosisInput, result: Diagnosis) -> list[str]:
    """Jobs-ahead counts an incident cites that the job's position in the cluster's order at the same t (the
    why-pending panel's, the job list's) does not give: the count is that position less one."""
    counted = {
        c.content["job"]: c.content.get("count", len(c.content.get("ahead") or []))
        for f in result.findings
        for c in [*f.supports, *f.refutes]
        if isinstance(c, Derived) and c.kind == "queue_order"
    }
    if not counted:
        return []
    out = []
    with di.indexed():
        cp = cluster_pass(di)
        for label, count in sorted(counted.items()):
            namespace, _, name = label.partition("/")
            job = di.find("job", name, namespace)
            pos = position(di, job, cp) if job is not None else None
            if pos is None:
                out.append(f"{label}: {count} job(s) ahead, yet it does not wait")
            elif pos.in_cluster is not None and count != pos.in_cluster - 1:
                out.append(f"{label}: {count} job(s) ahead, yet {pos.in_cluster} in the cluster's order")
            elif pos.in_cluster is None and count < pos.ahead:
                out.append(f"{label}: {count} job(s) ahead, yet beyond the first {pos.ahead} in the cluster's order")
    return out


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def title_numbers_apart(title: str, statement: str) -> list[str]:
    """Numbers the title's cause part gives that its top cause's statement does not (its own computation)."""
    if ": " not in title:
        return []
    tail = title.split(": ", 1)[1]
    known = set(_NUMBER.findall(statement))
    return [n for n in _NUMBER.findall(tail) if n not in known]
