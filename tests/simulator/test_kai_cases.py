"""The simulator against KAI Scheduler's own test tables: 203 of 203 cases end as KAI expects.

Each file of `kai_cases/` (transcribed from kai-scheduler/KAI-Scheduler at
d5bc503a146317e51037d89775d77172c6d12f71, see `kai_cases/README.md`) is a format-1 scenario whose
`reference` section holds KAI's expected end state: which jobs run, and on which node where KAI's test
checks it (every job, but in a case whose notes say KAI's test checks fewer). The scenario runs in the
simulator's world to its end (ten simulated minutes, a few milliseconds) and the jobs whose pods are all
bound are the running ones.

`DISAGREE` lists, exactly, the cases the simulator does not yet end as KAI does, with the family and the
reason: they are strict xfails, so a listed case that starts agreeing fails too, and the figure above (also
in simulator/ENGINE.md, checked below) moves only on purpose.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from simulator import World, load_scenario
from simulator.scenario.model import Scenario

HERE = Path(__file__).parent
FILES = sorted((HERE / "kai_cases").glob("*.yaml"))
ENGINE_MD = Path(__file__).resolve().parents[2] / "simulator" / "ENGINE.md"

# case id -> (family, why the simulator ends it otherwise)
DISAGREE: dict[str, tuple[str, str]] = {}


@cache
def case(case_id: str) -> Scenario:
    scenario = load_scenario(HERE / "kai_cases" / f"{case_id}.yaml")
    assert scenario.reference is not None, f"{case_id}.yaml has no reference section"
    return scenario


def end_state(case_id: str) -> dict[str, tuple[str, list[str]]]:
    """job -> ("running" | "pending", the nodes its pods are bound to) at the end of the case's scenario."""
    world = World.from_scenario(case(case_id))
    world.advance_to(world.end)
    out = {}
    for name, job in world.jobs.items():
        pods = world.pods_of(job)
        running = bool(pods) and all(p.node is not None for p in pods)
        out[name] = ("running" if running else "pending", sorted({p.node for p in pods if p.node}))
    return out


def differences(case_id: str) -> list[str]:
    ref = case(case_id).reference
    assert ref is not None
    got = end_state(case_id)
    # a case names every job, or those KAI's test checks (its notes say so)
    assert ref.end_state and set(ref.end_state) <= set(got)
    out = []
    for name, (want, node) in sorted(ref.end_state.items()):
        state, nodes = got[name]
        if state != want or (state == "running" and node and nodes != [node]):
            out.append(f"{name}: KAI {want} on {node}, simulator {state} on {nodes}")
    return out


def _param(path: Path) -> object:
    cid = path.stem
    if cid in DISAGREE:
        return pytest.param(cid, id=cid, marks=pytest.mark.xfail(reason=DISAGREE[cid][1], strict=True))
    return pytest.param(cid, id=cid)


@pytest.mark.parametrize("case_id", [_param(p) for p in FILES])
def test_the_simulator_ends_the_case_as_kai(case_id: str) -> None:
    diff = differences(case_id)
    assert not diff, f"{case_id} ({case(case_id).reference.what}):\n" + "\n".join(diff)  # type: ignore[union-attr]


def test_every_case_names_its_source_commit_and_family() -> None:
    assert len(FILES) >= 184
    for path in FILES:
        ref = case(path.stem).reference
        assert ref is not None
        assert re.fullmatch(r"pkg/scheduler/\S+_test\.go@[0-9a-f]{40} :: .+", ref.source), path.name
        assert path.stem.startswith(FAMILY_PREFIX[ref.family]), path.name


FAMILY_PREFIX = {
    "allocate": "alloc-",
    "gang": "gang-",
    "limit": "limit-",
    "reclaim": "reclaim-",
    "preempt": "preempt-",
    "departments": "dept-",
    "fractional": "frac-",
    "mig": "mig-",
    "consolidation": "consol-",
}


def test_the_disagreements_are_cases_of_their_family() -> None:
    families = {p.stem: case(p.stem).reference.family for p in FILES}  # type: ignore[union-attr]
    assert {k: v[0] for k, v in DISAGREE.items()} == {k: families.get(k) for k in DISAGREE}


def test_the_agreement_figure_is_written_where_readers_look() -> None:
    figure = f"{len(FILES) - len(DISAGREE)} of {len(FILES)}"
    assert re.search(rf"\b{figure} cases\b", __doc__ or ""), f"this module's docstring must say {figure}"
    assert re.search(rf"\*\*{figure}\*\*", ENGINE_MD.read_text(encoding="utf-8")), (
        f"simulator/ENGINE.md must say **{figure}**"
    )
