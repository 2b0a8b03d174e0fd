"""The scenarios of the codes of issue 18 item 4 meet their ``expect`` through the real pipeline.

They wait in fixtures/scenarios/ until the simulator's copy of the code vocabulary
(collectors/sim/scenario/model.py DIAGNOSIS_CODES, owned by the collectors) lists the new codes; meanwhile this
test extends the vocabulary the scenario validator reads by exactly the codes incidents.diagnosis.codes defines,
and runs simulator → sweeps → intake → evidence → diagnosis as tests/incidents/test_scenarios_expect.py does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from incidents.diagnosis import codes
from incidents.scenario_run import run_scenario_file

SCENARIOS = sorted((Path(__file__).resolve().parent / "fixtures" / "scenarios").glob("*.yaml"))
pytestmark = pytest.mark.scenarios


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_it_meets_the_scenario_expectations(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import collectors.sim.scenario.sections as sections

    monkeypatch.setattr(
        sections, "DIAGNOSIS_CODES", tuple(dict.fromkeys((*sections.DIAGNOSIS_CODES, *codes.ALL_CODES)))
    )
    result = run_scenario_file(str(path))
    assert result.expect, f"{path.name} has no expect block"
    failed = [f"{e['alert']}: {e['why']}" for e in result.expect if not e["passed"]]
    tops = {i["id"]: [h["code"] for h in i["hypotheses"][:3]] for i in result.incidents}
    assert not failed, f"{path.name}: {failed}; incidents' top hypotheses: {tops}"
