"""The simulation harness (harness/driver.py): when each policy sweeps, and what it refuses.

The sweeps here are recorded, not run, and the world is scripted: what is under test is the driver's
schedule (docs/design.md §9). The real pipeline under the harness is tested by the scenario tests
(tests/incidents/test_run_scenario.py, test_scenarios_expect.py) and the demo's (tests/collectors/).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from collectors.models import Cluster
from collectors.sweep import SweepSummary
from harness.driver import Harness
from harness.policy import demo_policy, scenario_policy

T0 = datetime(2026, 11, 29, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]


class ScriptedWorld:
    """A world whose only behaviour is its alerts: ``script`` maps minutes to (fingerprint, status) lists."""

    tick_seconds = 60

    def __init__(self, script: dict[int, list[tuple[str, str]]]) -> None:
        self.now = T0
        self.script = script

    def advance_to(self, t: datetime) -> list[dict[str, Any]]:
        self.now = t
        return []

    def alerts(self, include_pending: bool = False) -> list[dict[str, Any]]:
        minute = int((self.now - T0).total_seconds() // 60)
        listed = self.script.get(minute, [])
        return [{"fingerprint": fp, "status": s} for fp, s in listed if include_pending or s != "pending"]


def scripted(spans: dict[str, list[tuple[int, int, str]]]) -> dict[int, list[tuple[str, str]]]:
    """``{fingerprint: [(from_minute, to_minute, status), ...]}`` as the per-minute script."""
    out: dict[int, list[tuple[str, str]]] = {}
    for fp, parts in spans.items():
        for start, end, status in parts:
            for m in range(start, end):
                out.setdefault(m, []).append((fp, status))
    return out


def schedule(
    monkeypatch: pytest.MonkeyPatch, world: ScriptedWorld, policy: Any, minutes: int
) -> dict[str, list[int]]:
    """Fast-forward ``world`` under ``policy`` for ``minutes``; the minutes each kind was swept at."""
    import collectors.sweep as sweep
    import incidents.lifecycle as lifecycle

    seen: dict[str, list[int]] = {}

    def record(kind: str) -> Any:
        def fn(name: str, t: datetime, **kwargs: Any) -> SweepSummary:
            seen.setdefault(kind, []).append(int((t - T0).total_seconds() // 60))
            return SweepSummary(cluster=name, at=t)

        return fn

    for kind, attr in (
        ("inventory", "sweep_cluster"),
        ("events", "sweep_events"),
        ("telemetry", "sweep_telemetry"),
    ):
        monkeypatch.setattr(sweep, attr, record(kind))
    monkeypatch.setattr(sweep, "ask_telemetry", lambda name, t, **kwargs: None)  # sent ahead of the sweeps
    monkeypatch.setattr(lifecycle, "settle", lambda t: seen.setdefault("settle", []).append(0) and None)
    harness = Harness(world)
    harness.sim = world  # type: ignore[assignment]  # advance_to is all the fast-forward asks of the simulator
    harness.cluster = Cluster(name="gpu-sched")
    harness.fast_forward(T0 + timedelta(minutes=minutes), policy)
    return seen


def test_the_demo_sweeps_a_burst_of_new_alerts_at_most_every_half_interval(monkeypatch) -> None:
    # Three alerts start firing at 3, 4 and 25 min; the idle cadence is 20 min, so the early sweep for new
    # alerts waits until 10 min have passed since the last sweep.
    world = ScriptedWorld(
        scripted({"a": [(3, 60, "firing")], "b": [(4, 60, "firing")], "c": [(25, 60, "firing")]})
    )
    seen = schedule(monkeypatch, world, demo_policy(timedelta(minutes=20)), 45)
    # 0 the first; 10 for a and b (10 min after 0); 25 for c (15 min after 10); 45 the end of the fast-forward.
    assert seen["inventory"] == [0, 10, 25, 45]
    assert seen["events"] == seen["inventory"]  # events along
    assert "telemetry" not in seen and "settle" not in seen


def test_the_demo_counts_an_alert_listed_resolved_as_known(monkeypatch) -> None:
    # a fires at 2, resolves at 5 (listed resolved for the hour after) and fires again at 22: no early sweep
    # for the re-fire, since it was listed at the last sweep (10); b only ever pending: none either.
    world = ScriptedWorld(
        scripted(
            {"a": [(2, 5, "firing"), (5, 22, "resolved"), (22, 40, "firing")], "b": [(23, 40, "pending")]}
        )
    )
    seen = schedule(monkeypatch, world, demo_policy(timedelta(minutes=20)), 39)
    assert seen["inventory"] == [0, 10, 30, 39]  # 10: a (after the gap), 30: the cadence, 39: the end


def test_run_scenario_sweeps_once_per_alert_and_state_on_held_pending_and_when_it_fires(monkeypatch) -> None:
    world = ScriptedWorld(
        scripted(
            {
                # pending at 2 (held at 3), firing at 12, stops at 20 (resolved from then), fires again at 40
                "a": [(2, 12, "pending"), (12, 20, "firing"), (20, 40, "resolved"), (40, 50, "firing")],
                # pending for one tick only (a pod waiting for its container): no sweep
                "b": [(7, 8, "pending")],
            }
        )
    )
    seen = schedule(monkeypatch, world, scenario_policy(timedelta(minutes=15)), 50)
    # 0 first; 3 a held pending; 12 a fires; a stopping alert asks for no sweep (the sweep that follows dates
    # the recovery by the objects' own times); 27 and 42 the cadence; 40 is the re-fire of a known alert and
    # state: no sweep of its own.
    assert seen["inventory"] == [0, 3, 12, 27, 42]
    assert seen["events"] == [0, 3, 12, 22, 32, 42]  # the triggers, else every 10 min
    assert seen["telemetry"] == [0, 30]
    assert len(seen["settle"]) == 51  # every tick, 0 to 50


def test_a_held_pending_alert_already_seen_pending_by_a_sweep_asks_for_none(monkeypatch) -> None:
    world = ScriptedWorld(
        scripted(
            {
                # pending from 2: the sweep at 2, for c firing, already saw it pending: none at 3
                "a": [(2, 12, "pending"), (12, 20, "firing")],
                "c": [(2, 30, "firing")],
                # pending from 5, held at 6, with no sweep since 2: its own at 6
                "d": [(5, 9, "pending")],
            }
        )
    )
    seen = schedule(monkeypatch, world, scenario_policy(timedelta(minutes=15)), 14)
    assert seen["inventory"] == [0, 2, 6, 12]


@pytest.mark.django_db
def test_the_harness_refuses_an_in_memory_database_its_server_threads_cannot_share() -> None:
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("an in-memory database is SQLite's: this runs in .ci/run's SQLite pass")
    harness = Harness(ScriptedWorld({}), serve="127.0.0.1:0", token="t")
    with pytest.raises(ImproperlyConfigured, match="in-memory SQLite database"):
        harness.start()
    assert harness.web is None and harness.sim is None


def test_the_drivers_load_no_django_test_machinery() -> None:
    """run_scenario and the demo run in production processes: nothing of django.test (LiveServerThread,
    override_settings) may be loaded by them."""
    code = (
        "import django, sys; django.setup()\n"
        "import harness.driver, harness.webserver, harness.scenario_run, harness.demo\n"
        "import incidents.management.commands.run_scenario, collectors.management.commands.demo\n"
        "print(sorted(m for m in sys.modules if m.startswith('django.test')))\n"
    )
    env = {"DJANGO_SETTINGS_MODULE": "rcaweb.settings", "RCAWEB_DEBUG": "true", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
