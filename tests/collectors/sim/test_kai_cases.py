"""The simulator against KAI Scheduler's own test tables: 31 of 32 cases end as KAI expects.

Each case of `kai_cases/cases.json` (transcribed from kai-scheduler/KAI-Scheduler at
d5bc503a146317e51037d89775d77172c6d12f71, see `kai_cases/README.md`) is a format-1 scenario and KAI's
expected end state: which jobs run, and on which node where KAI's test checks it. The scenario runs in the
simulator's world to its end (ten simulated minutes, a few milliseconds) and the jobs whose pods are all
bound are the running ones.

`DISAGREE` lists, exactly, the cases the simulator does not yet end as KAI does, with the family and the
reason: a listed case that starts agreeing fails too, so the figure above (also in collectors/sim/ENGINE.md,
checked below) moves only on purpose.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from collectors.sim import World, load_scenario

HERE = Path(__file__).parent
CASES: list[dict[str, Any]] = json.loads((HERE / "kai_cases" / "cases.json").read_text(encoding="utf-8"))
ENGINE_MD = Path(__file__).resolve().parents[3] / "collectors" / "sim" / "ENGINE.md"

# case id -> (family, why the simulator ends it otherwise)
DISAGREE: dict[str, tuple[str, str]] = {
    "reclaim-07": (
        "reclaim",
        "the evicted queue0 job (1 of fair share 2) then reclaims from queue2 (2 of fair share 1), as KAI's "
        "fair-share reclaim reads; KAI's test sees no second eviction, for a reason not yet found",
    ),
}


@cache
def end_state(case_id: str) -> dict[str, tuple[str, list[str]]]:
    """job -> ("running" | "pending", the nodes its pods are bound to) at the end of the case's scenario."""
    case = next(c for c in CASES if c["id"] == case_id)
    world = World.from_scenario(load_scenario(yaml.safe_dump(case["scenario"], sort_keys=False)))
    world.advance_to(world.end)
    out = {}
    for name, job in world.jobs.items():
        pods = world.pods_of(job)
        running = bool(pods) and all(p.node is not None for p in pods)
        out[name] = ("running" if running else "pending", sorted({p.node for p in pods if p.node}))
    return out


def differences(case: dict[str, Any]) -> list[str]:
    got = end_state(case["id"])
    assert set(got) == set(case["expected"]), "every job of the case has an expectation"
    out = []
    for name, exp in sorted(case["expected"].items()):
        state, nodes = got[name]
        if state != exp["state"] or (state == "running" and exp["node"] and nodes != [exp["node"]]):
            out.append(f"{name}: KAI {exp['state']} on {exp['node']}, simulator {state} on {nodes}")
    return out


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_simulator_ends_the_case_as_kai(case: dict[str, Any]) -> None:
    diff = differences(case)
    if case["id"] in DISAGREE:
        assert diff, f"{case['id']} now ends as KAI expects: remove it from DISAGREE and raise the figure"
    else:
        assert not diff, f"{case['id']} ({case['what']}):\n" + "\n".join(diff)


def test_the_disagreements_are_cases_of_their_family() -> None:
    families = {c["id"]: c["family"] for c in CASES}
    assert {k: v[0] for k, v in DISAGREE.items()} == {k: families.get(k) for k in DISAGREE}


def test_the_agreement_figure_is_written_where_readers_look() -> None:
    figure = f"{len(CASES) - len(DISAGREE)} of {len(CASES)}"
    assert re.search(rf"\b{figure} cases\b", __doc__ or ""), f"this module's docstring must say {figure}"
    assert re.search(rf"\*\*{figure}\*\*", ENGINE_MD.read_text(encoding="utf-8")), (
        f"collectors/sim/ENGINE.md must say **{figure}**"
    )
