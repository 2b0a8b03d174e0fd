"""Every bundled scenario loads, and together they cover what the brief asks of them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from collectors.sim import load_scenario
from collectors.sim.scenario import DIAGNOSIS_CODES

SCENARIOS = sorted((Path(__file__).resolve().parents[3] / "collectors" / "sim" / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_it_loads_every_bundled_scenario(path: Path) -> None:
    s = load_scenario(path, now=datetime(2026, 11, 29, 12, tzinfo=UTC))
    assert s.name == path.stem
    if s.name != "demo":
        assert s.expect, "a test scenario states its ground truth"
        assert sum(p.nodes for p in s.cluster.nodepools) <= 8 and s.duration_s <= 3 * 3600


def test_it_covers_every_diagnosis_code_and_both_schedulers() -> None:
    loaded = [load_scenario(p) for p in SCENARIOS]
    codes = {c for s in loaded for x in s.expect for c in (x.top, *x.supported) if c}
    assert codes == set(DIAGNOSIS_CODES)
    assert {s.cluster.scheduler for s in loaded} == {"kai", "kueue"}
    assert len([s for s in loaded if s.name.startswith("misleading-")]) >= 3
    assert len(loaded) >= 15


def test_it_bundles_a_busy_demo() -> None:
    s = load_scenario(SCENARIOS[[p.stem for p in SCENARIOS].index("demo")])
    assert sum(p.nodes for p in s.cluster.nodepools) >= 24 and len(s.cluster.nodepools) >= 2
    assert len(s.projects) >= 5
    assert len([j for j in s.jobs if j.generated_by]) >= 150
    assert s.duration_s == 12 * 3600
