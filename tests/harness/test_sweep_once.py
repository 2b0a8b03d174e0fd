"""The driver for a caller that moves the clock itself (the bench scripts): ``Harness.advance_to``,
``Harness.sweep`` and the simulator's process id.

The first tests run the real pipeline over a small bundled scenario: the sweeps asked for, and only those,
store what the simulator serves at that moment. The last starts the simulator in its own process.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.models import Cluster, EntityVersion, TelemetrySample
from collectors.sweep import SweepSummary
from harness.driver import Harness, simulator_process
from simulator import World, load_scenario

SCENARIO = Path(__file__).resolve().parents[2] / "simulator" / "scenarios" / "node-not-ready.yaml"


@pytest.mark.django_db
def test_a_moment_swept_once_stores_what_the_simulator_serves_then() -> None:
    scenario = load_scenario(SCENARIO)
    with Harness(World.from_scenario(scenario)) as harness:
        harness.register()  # the scenario simulated
        harness.advance_to(scenario.start + timedelta(minutes=30))
        summary = harness.sweep(telemetry=True)

    assert harness.world.now == scenario.start + timedelta(minutes=30)
    cluster = Cluster.objects.get()
    assert (cluster.name, cluster.scheduler) == ("gpu-prod", "kai")
    assert summary is not None and not summary.errors and summary.at == harness.world.now
    nodes = EntityVersion.objects.as_of(harness.world.now).filter(cluster=cluster, kind="node")
    assert sorted(v.entity.name for v in nodes.select_related("entity")) == ["h100-01", "h100-02"]
    assert TelemetrySample.objects.filter(gpu__cluster=cluster).exists()
    assert harness.sweeps == 1 and harness.timings["advance_s"] > 0


@pytest.mark.django_db
def test_only_the_sweeps_asked_for_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import collectors.sweep as sweep
    import incidents.lifecycle as lifecycle

    ran: list[str] = []

    def record(name: str) -> Any:
        def fn(cluster: str, t: datetime, **kwargs: Any) -> SweepSummary:
            ran.append(name)
            return SweepSummary(cluster=cluster, at=t)

        return fn

    for name in ("sweep_cluster", "sweep_events", "sweep_telemetry"):
        monkeypatch.setattr(sweep, name, record(name))
    monkeypatch.setattr(lifecycle, "settle", lambda t: ran.append("settle"))
    scenario = load_scenario(SCENARIO)
    with Harness(World.from_scenario(scenario)) as harness:
        harness.register()
        assert harness.sweep(inventory=False, telemetry=True) is None  # no inventory sweep, no summary
        harness.sweep(events=True, settle=True)

    assert ran == ["sweep_telemetry", "sweep_cluster", "sweep_events", "settle"]


@pytest.mark.django_db
def test_the_simulator_in_its_own_process_is_registered_and_named_by_its_pid() -> None:
    scenario = load_scenario(SCENARIO)
    harness = Harness(None, process=simulator_process(scenario)).start()
    try:
        harness.advance_to(scenario.start + timedelta(minutes=2))
        harness.register()
        pid = harness.simulator_pid
        assert pid is not None and pid != os.getpid()
        assert Path(f"/proc/{pid}/stat").exists()
        assert harness.world.now == scenario.start + timedelta(minutes=2)
        assert Cluster.objects.get().kubeconfig == harness.process.kubeconfig_path  # type: ignore[union-attr]
    finally:
        harness.close()
    assert not Path(f"/proc/{pid}/stat").exists()


def test_a_simulator_in_this_process_has_no_pid_of_its_own() -> None:
    harness = Harness(World.from_scenario(load_scenario(SCENARIO))).start()
    try:
        assert harness.simulator_pid is None
    finally:
        harness.close()
