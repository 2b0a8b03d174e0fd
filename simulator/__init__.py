"""The simulated GPU cluster: the world, not the observer (docs/design.md §3 and §9).

Public API::

    from simulator import World, load_scenario, ScenarioError
    world = World.from_scenario(load_scenario("simulator/scenarios/quota-cut.yaml"))
    world.advance_to(world.end)

Nothing here imports rcaweb's pipeline, and nothing of the pipeline imports this.
"""

from __future__ import annotations

from .engine import World
from .scenario import Scenario, ScenarioError, load_scenario

__all__ = ["Scenario", "ScenarioError", "World", "load_scenario"]
