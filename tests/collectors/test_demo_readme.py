"""The README's figures of the demo are the demo scenario's: nodes and GPUs (those the simulator builds, the
ones the capacity team adds included), projects, jobs and the injected problems that raise an alert."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from harness.demo import DEMO_SCENARIO
from simulator.engine.world import World
from simulator.scenario import load_scenario

README = Path(__file__).resolve().parents[2] / "README.md"
SENTENCE = re.compile(
    r"`make demo` simulates a busy (?P<hours>\d+)-hour GPU cluster \((?P<nodes>\d+) nodes,\s+(?P<gpus>\d+) GPUs"
    r"[^,]*,\s+(?P<projects>\d+) projects,\s+(?P<jobs>\d+) jobs,\s+(?P<problems>\d+) injected problems"
)


def test_the_readme_gives_the_demo_scenarios_own_figures() -> None:
    match = SENTENCE.search(README.read_text())
    assert match, "README: the `make demo` sentence no longer gives nodes, GPUs, projects, jobs, problems"
    scenario = load_scenario(str(DEMO_SCENARIO))
    world = World.from_scenario(scenario)
    for event in scenario.events:  # nodes added during the day count: the console shows them at the end
        if event.action == "add_nodes":
            at = world.start + timedelta(seconds=event.at_s)
            world.add_nodes(event.args["nodepool"], event.args["count"], at=at)
    figures = {k: int(v) for k, v in match.groupdict().items()}
    assert figures == {
        "hours": scenario.duration_s // 3600,
        "nodes": len(world.nodes),
        "gpus": sum(len(node.gpus) for node in world.nodes.values()),
        "projects": len(scenario.projects),
        "jobs": len(scenario.jobs),
        "problems": len(scenario.expect),
    }
