"""The product's admission model against Kueue's own scheduler, preemption and flavor-assigner tests, directly.

Every case of ``tests/simulator/kueue_cases/cases.json`` (transcribed from kubernetes-sigs/kueue, see its
README) is turned into the model's input by this module, never through the simulator: each ClusterQueue of the
case's ``kueue`` section is a queue with its flavors in order (nominal quota, borrowing and lending limits, the
flavor's node labels), its cohort, queueing strategy, preemption policies and flavor fungibility; the
workloads Kueue's test starts with quota reserved are admitted in the flavor their node selector names; the
others wait, in the case's order. One scheduling cycle of the model (``admission.cycle``) is compared with
Kueue's expectation: which workloads hold quota and in which flavor, which are evicted and why
(InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing), which preempt and in which flavor, and the
QuotaReserved message of those left waiting where Kueue's test states one.

``CANNOT`` names the cases the model does not end as Kueue does, and why; they are strict xfails, so a case
that starts agreeing fails until it is taken off the list. The figure, also in docs/kueue.md, is checked below.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from incidents.diagnosis.admission import cycle
from incidents.diagnosis.types import DiagnosisInput, EntityState

CASES_FILE = Path(__file__).resolve().parents[2] / "simulator" / "kueue_cases" / "cases.json"
KUEUE_MD = Path(__file__).resolve().parents[3] / "docs" / "kueue.md"
CASES: list[dict[str, Any]] = json.loads(CASES_FILE.read_text(encoding="utf-8"))

# case id -> why the model does not end it as Kueue does
CANNOT: dict[str, str] = {}


def _offset(text: str) -> timedelta:
    total = timedelta()
    for n, unit in re.findall(r"(\d+)([smh])", text):
        total += timedelta(**{{"s": "seconds", "m": "minutes", "h": "hours"}[unit]: int(n)})
    return total


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def model_input(scenario: dict[str, Any]) -> DiagnosisInput:
    """The case's scenario as the model's input (module doc)."""
    start = datetime.fromisoformat(scenario["start"].replace("Z", "+00:00"))
    kueue = scenario["kueue"]
    labels = {f["name"]: dict(f.get("node_labels") or {}) for f in kueue["flavors"]}
    queues = []
    for cq in kueue["cluster_queues"]:
        flavors = [
            {
                "flavor": f["flavor"],
                "nominal": f["nominal"],
                "borrowing_limit": f.get("borrowing_limit"),
                "lending_limit": f.get("lending_limit"),
                "node_labels": labels.get(f["flavor"], {}),
            }
            for f in cq["flavors"]
        ]
        pre = dict(cq.get("preemption") or {})
        state = {
            "project": cq["project"],
            "scheduler": "kueue",
            "quota_gpus": sum(f["nominal"] for f in cq["flavors"]),
            "cohort": cq.get("cohort"),
            "flavor_quotas": flavors,
            "queueing_strategy": cq.get("queueing_strategy", "BestEffortFIFO"),
            "preemption": pre,
            "flavor_fungibility": dict(cq.get("flavor_fungibility") or {}),
        }
        queues.append(EntityState("queue", cq["project"], state=state, valid_from=start))
    priorities = kueue.get("priorities") or {}
    jobs = []
    for index, spec in enumerate(scenario["jobs"]):
        admitted = _offset(spec["submit"]) == timedelta()
        selector = dict(spec.get("node_selector") or {})
        flavor = None
        if admitted:  # pinned to its flavor by the flavor's labels, as the case writes it
            flavor = next(
                n for n, lab in labels.items() if lab and all(selector.get(k) == v for k, v in lab.items())
            )
        pods, per = int(spec.get("pods", 1)), int(spec.get("gpus_per_pod", 1))
        state = {
            "phase": "Running" if admitted else "Pending",
            "active": pods if admitted else 0,
            "queue": spec["project"],
            "project": spec["project"],
            "pods": pods,
            "gpus_per_pod": per,
            "gpus_total": pods * per,
            "priority_value": int(priorities.get(spec["name"], 0)),
            "node_selector": selector,
            "flavor": flavor,
            # the case lists workloads created together in Kueue's order: a second apart keeps it
            "submitted": _stamp(start + _offset(spec["submit"]) + timedelta(seconds=index)),
        }
        jobs.append(EntityState("job", spec["name"], spec["project"], state=state, valid_from=start))
    return DiagnosisInput(
        t=start + timedelta(minutes=1),
        onset=start,
        cluster=scenario["cluster"]["name"],
        scheduler="kueue",
        queues=queues,
        jobs=jobs,
    )


def kueue_words(case: dict[str, Any], message: str) -> str:
    """Kueue's message in the model's words: one pod set, main, and quota in nvidia.com/gpu."""
    message = message.replace(f"pod set {case['pod_set']}:", "pod set main:")
    return re.sub(rf"\bfor {re.escape(case['resource'])} in flavor", "for nvidia.com/gpu in flavor", message)


def differences(case: dict[str, Any]) -> list[str]:
    di = model_input(case["scenario"])
    got = cycle(di)
    by_name = {j.name: j.ref.label for j in di.jobs}
    out = []
    for name, exp in sorted(case["expected"].items()):
        o = got.get(by_name[name])
        state = exp["state"]
        if o is None:
            ok = False
        elif state in ("admitted", "preempting"):
            ok = o.state == state and exp.get("flavor") in (None, o.flavor)
        elif state == "evicted":
            ok = o.state == "evicted" and o.reason == exp["reason"]
        else:
            ok = o.state == "pending" and (
                not exp.get("message") or o.reason == kueue_words(case, exp["message"])
            )
        if not ok:
            out.append(f"{name}: Kueue {exp}, model {o}")
    return out


def _param(case: dict[str, Any]) -> Any:
    marks = []
    if case["id"] in CANNOT:
        marks.append(pytest.mark.xfail(strict=True, reason=f"{case['id']}: {CANNOT[case['id']]}"))
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_the_model_ends_the_case_as_kueue(case: dict[str, Any]) -> None:
    diff = differences(case)
    assert not diff, f"{case['id']} ({case['what']}):\n" + "\n".join(diff)


def test_every_listed_case_exists_and_the_figure_is_written_where_readers_look() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "case ids are unique"
    assert set(CANNOT) <= set(ids), f"CANNOT names cases that are gone: {sorted(set(CANNOT) - set(ids))}"
    figure = f"{len(CASES) - len(CANNOT)} of {len(CASES)}"
    assert f"model ends **{figure}**" in KUEUE_MD.read_text(encoding="utf-8"), (
        f"docs/kueue.md must say {figure}"
    )
