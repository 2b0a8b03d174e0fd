"""The simulated GPU cluster: the world, not the observer (docs/design.md §3 and §9; simulator/README.md).

Public API::

    from simulator import World, load_scenario, SimServer
    world = World.from_scenario(load_scenario("simulator/scenarios/quota-cut-blocks-training.yaml"))
    world.advance_to(world.end)          # the engine, in this process
    with SimServer(world) as server:     # the Kubernetes, Prometheus and Run:ai APIs over it
        ...

- ``load_scenario(path)`` reads and validates a scenario file (docs/scenarios.md) into a ``Scenario``,
  or raises ``ScenarioError`` naming every problem with its line; ``trace_scenario`` writes one from an
  Alibaba OpenB trace.
- ``World`` is the cluster at ``world.now``, moved by ``advance_to``.
- ``SimServer`` serves a world on loopback (simulator/API.md); ``serve_scenario`` builds and serves one.
- ``SimProcess`` runs a ``SimServer`` in a child process with the same interface; ``SimProcessError`` is
  its failure.

The servers need the ``sim`` extra (``cryptography``, for the API server's certificate) and are imported
on first use, so loading a scenario or running the engine needs none of it. Nothing here imports rcaweb's
product, and nothing of the product's diagnosis imports this; both take the cause codes from ``cause_codes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine import World
from .openb import TraceError, trace_scenario
from .scenario import Scenario, ScenarioError, load_scenario

if TYPE_CHECKING:
    from .process import SimProcess, SimProcessError
    from .server import SimServer, serve_scenario

_LAZY = {
    "SimServer": "server",
    "serve_scenario": "server",
    "SimProcess": "process",
    "SimProcessError": "process",
}

__all__ = [
    "Scenario",
    "ScenarioError",
    "SimProcess",
    "SimProcessError",
    "SimServer",
    "TraceError",
    "World",
    "load_scenario",
    "serve_scenario",
    "trace_scenario",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
