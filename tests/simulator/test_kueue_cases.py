"""The simulator against Kueue's own scheduler, preemption and flavor-assigner tests: 49 of 49 cases end as Kueue expects.

Each case of `kueue_cases/cases.json` (transcribed from kubernetes-sigs/kueue at
ff69552e79ad21652c36caa97038382e55625cf7, see `kueue_cases/README.md`) is a format-1 scenario with a `kueue`
section and Kueue's expected outcome of the scheduling cycle the test runs: which workloads hold quota and in
which flavor, which are evicted and why, and the exact QuotaReserved message of those left waiting. Workloads
Kueue's test starts with quota are submitted at 0s, pinned to their flavor; the rest arrive at 1m, and the
state is read after the simulator's admission pass at 1m.

`DISAGREE` lists, exactly, the cases the simulator does not end as Kueue does, each with the reason: a listed
case that starts agreeing fails too, so the figure above (also in docs/kueue.md and simulator/ENGINE.md, checked below) moves only on purpose.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator import World, load_scenario
from simulator.engine.kueue import assigned_flavor

HERE = Path(__file__).parent
KUEUE_MD = Path(__file__).resolve().parents[2] / "docs" / "kueue.md"
ENGINE_MD = Path(__file__).resolve().parents[2] / "simulator" / "ENGINE.md"
CASES: list[dict[str, Any]] = json.loads((HERE / "kueue_cases" / "cases.json").read_text(encoding="utf-8"))

# case id -> why the simulator ends it otherwise
DISAGREE: dict[str, str] = {}
# Kueue's eviction reasons and the simulator's preemption kinds (world.preemptions)
KINDS = {
    "InClusterQueue": "preempt",
    "InCohortReclamation": "reclaim",
    "InCohortReclaimWhileBorrowing": "reclaim",
}


@cache
def run(case_id: str) -> World:
    case = next(c for c in CASES if c["id"] == case_id)
    world = World.from_scenario(load_scenario(yaml.safe_dump(case["scenario"], sort_keys=False)))
    world.advance_to(world.start + timedelta(minutes=1))
    return world


def kueue_words(case: dict[str, Any], message: str) -> str:
    """Kueue's message as the simulator words it: its jobs have one pod set, main, and quota nvidia.com/gpu."""
    message = message.replace(f"pod set {case['pod_set']}:", "pod set main:")
    return re.sub(rf"\bfor {re.escape(case['resource'])} in flavor", "for nvidia.com/gpu in flavor", message)


def differences(case: dict[str, Any]) -> list[str]:
    world = run(case["id"])
    assert set(world.jobs) == set(case["expected"]), "every workload of the case has an expectation"
    evicted = {p["victim"].split("/", 1)[1]: p["kind"] for p in world.preemptions}
    out = []
    for name, exp in sorted(case["expected"].items()):
        job = world.jobs[name]
        flavor = assigned_flavor(world, job)
        got = f"admitted in {flavor}" if job.admitted else f"pending ({job.condition_message})"
        if name in evicted:
            got = f"evicted ({evicted[name]}), then {got}"
        state = exp["state"]
        if state in ("admitted", "preempting"):
            ok = job.admitted and name not in evicted and (exp.get("flavor") in (None, flavor))
        elif state == "evicted":
            ok = evicted.get(name) == KINDS[exp["reason"]]
        else:
            ok = not job.admitted and name not in evicted
            if ok and exp.get("message"):
                ok = job.condition_message == kueue_words(case, exp["message"])
        if not ok:
            out.append(f"{name}: Kueue {exp}, simulator {got}")
    return out


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_simulator_ends_the_case_as_kueue(case: dict[str, Any]) -> None:
    diff = differences(case)
    if case["id"] in DISAGREE:
        assert diff, f"{case['id']} now ends as Kueue expects: remove it from DISAGREE and raise the figure"
    else:
        assert not diff, f"{case['id']} ({case['what']}):\n" + "\n".join(diff)


def test_the_agreement_figure_is_written_where_readers_look() -> None:
    figure = f"{len(CASES) - len(DISAGREE)} of {len(CASES)}"
    assert re.search(rf"\b{figure} cases\b", __doc__ or ""), f"this module's docstring must say {figure}"
    for doc in (KUEUE_MD, ENGINE_MD):
        assert f"**{figure}**" in doc.read_text(encoding="utf-8"), f"{doc.name} must say **{figure}**"
