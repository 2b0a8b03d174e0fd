"""Run a scenario file through the real pipeline in fast forward, and check its ``expect`` block.

simulator (on loopback HTTP) → collectors (inventory/events/telemetry sweeps at simulated time) → the
simulator's Alertmanager posts over HTTP to this Django app, served on a free loopback port in a thread →
intake → grouping → evidence → diagnosis (Celery eager). The driving is the simulation harness's
(``harness.driver``, with :func:`harness.policy.scenario_policy`): it only moves the simulated clock and calls
the sweeps and the incident lifecycle (incidents.lifecycle.settle), as Celery beat would; it never calls the
intake or the diagnosis itself. The result is read afterwards: the JSON document (``harness.report``) and
the expectations (``harness.expectations``).

Used by ``manage.py run_scenario`` (docs/scenarios.md §5) and by the scenario tests. The webhook's server
threads open their own database connections: the database must be a file or a server (the tests put an
in-memory test database on a file first, ``tests/conftest.py``).
"""

from __future__ import annotations

import gc
import secrets
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from harness.driver import Harness, simulator_process
from harness.expectations import check_expectations, precision
from harness.overrides import settings_set
from harness.policy import scenario_policy
from harness.report import RunResult, incidents_json, related_json
from rcaweb.timestamps import format_t_or_none
from simulator.engine.world import World

if TYPE_CHECKING:
    from simulator.scenario import Scenario

SWEEP_EVERY = timedelta(minutes=15)  # idle cadence; sweeps also run when alerts fire (harness.triggers)


def run_scenario_file(
    path: Any, *, sweep_every: timedelta = SWEEP_EVERY, log: Any = None, sim_process: bool = False
) -> RunResult:
    """Simulate the scenario at ``path`` end to end; raises ``ScenarioError`` (with ``problems``) for a bad file.

    ``path`` may also be a ``Scenario`` already loaded (``manage.py run_scenario`` validates the file first:
    a file of 8,000 jobs is then read once, not twice). ``sim_process``: the simulated cluster runs in a
    process of its own (``simulator.process``), on another core than the pipeline; the answers are the
    same, and ``timings`` add the process' CPU seconds and peak memory.
    """
    from simulator.scenario import Scenario, load_scenario  # at call time: bench/stages.py wraps the loader

    scenario = path if isinstance(path, Scenario) else load_scenario(path)
    started = time.monotonic()
    timings = simulate(scenario, sweep_every, sim_process=sim_process)
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


def simulate(scenario: Scenario, sweep_every: timedelta, *, sim_process: bool = False) -> dict[str, float]:
    """The scenario from its start to its end under :func:`~harness.policy.scenario_policy`; returns the
    driver's timings (and, ``sim_process``, the simulator process' CPU seconds and peak memory)."""
    process = simulator_process(scenario) if sim_process else None
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
    return timings
