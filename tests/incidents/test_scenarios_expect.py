"""Every bundled scenario's ``expect`` holds through the real pipeline.

simulator (loopback HTTP) → collectors' sweeps → the simulator's Alertmanager posting to the intake served in
a thread → grouping → evidence → diagnosis. Nothing here calls the diagnosis directly: the hypotheses checked
are the ones the pipeline stored. demo.yaml is the 12 h demo, exercised by ``make demo`` instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from incidents.scenario_run import run_scenario_file

SCENARIOS = sorted(
    p
    for p in (Path(__file__).resolve().parents[2] / "collectors" / "sim" / "scenarios").glob("*.yaml")
    if p.name != "demo.yaml"
)
# The slowest tests of the suite: CI runs them once, in the SQLite pass (.ci/run deselects "scenarios" on PostgreSQL).
pytestmark = pytest.mark.scenarios


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_it_meets_the_scenario_expectations(path: Path) -> None:
    result = run_scenario_file(str(path))
    assert result.expect, f"{path.name} has no expect block"
    failed = [f"{e['alert']}: {e['why']}" for e in result.expect if not e["passed"]]
    tops = {i["id"]: [h["code"] for h in i["hypotheses"][:3]] for i in result.incidents}
    assert not failed, f"{path.name}: {failed}; incidents' top hypotheses: {tops}"
