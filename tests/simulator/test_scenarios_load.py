"""Every bundled scenario loads, and together they cover what the brief asks of them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from simulator import load_scenario
from simulator.scenario import DIAGNOSIS_CODES

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "simulator" / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_it_loads_every_bundled_scenario(path: Path) -> None:
    s = load_scenario(path, now=datetime(2026, 11, 29, 12, tzinfo=UTC))
    assert s.name == path.stem
    if s.name == "demo":
        return
    assert s.expect, "a test scenario states its ground truth"
    nodes = sum(p.nodes for p in s.cluster.nodepools)
    if s.name.startswith("busy-"):  # issue 14: a busy cluster, still a few minutes of pipeline at most
        assert nodes >= 16 and len(s.projects) >= 4 and s.duration_s <= 6 * 3600
        assert all(x.not_supported for x in s.expect), "each busy expectation names what is not the cause"
    else:
        assert nodes <= 8 and s.duration_s <= 3 * 3600


def test_it_covers_every_diagnosis_code_and_both_schedulers() -> None:
    loaded = [load_scenario(p) for p in SCENARIOS]
    codes = {c for s in loaded for x in s.expect for c in (x.top, *x.supported) if c}
    assert codes == set(DIAGNOSIS_CODES)
    assert {s.cluster.scheduler for s in loaded} == {"kai", "kueue"}
    assert len([s for s in loaded if s.name.startswith("misleading-")]) >= 3
    assert len(loaded) >= 15


def test_the_busy_scenarios_cover_issue_14() -> None:
    """At least four busy scenarios: both schedulers, scraped DCGM labels, faults that are repaired before the
    end, and red-herring changes (quota, image, cordon) next to 3-5 injected problems."""
    busy = [load_scenario(p) for p in SCENARIOS if p.stem.startswith("busy-")]
    assert len(busy) >= 4
    assert {s.cluster.scheduler for s in busy} == {"kai", "kueue"}
    assert any(s.cluster.dcgm_labels == "scraped" for s in busy)
    for s in busy:
        actions = [e.action for e in s.events]
        assert "resolve" in actions, f"{s.name}: a problem resolves before the end"
        assert {"quota", "image", "cordon", "uncordon"} <= set(actions), f"{s.name}: red-herring changes"
        assert 3 <= len({x.top for x in s.expect}) <= 5, f"{s.name}: 3-5 problems"


def test_it_bundles_a_busy_demo() -> None:
    s = load_scenario(SCENARIOS[[p.stem for p in SCENARIOS].index("demo")])
    assert sum(p.nodes for p in s.cluster.nodepools) >= 24 and len(s.cluster.nodepools) >= 2
    assert len(s.projects) >= 5
    assert len([j for j in s.jobs if j.generated_by]) >= 150
    assert s.duration_s == 12 * 3600
    # A shared-GPU platform (issue 18): a pool KAI shares, a MIG pool, a department, an incident on each.
    assert any(p.sharing for p in s.cluster.nodepools) and any(p.mig for p in s.cluster.nodepools)
    assert s.departments and any(p.department for p in s.projects)
    tops = {x.top for x in s.expect}
    assert {"gpu_fragmentation", "mig_profile_unavailable", "department_quota_exhausted"} <= tops


def _matches(subject: dict, labels: dict[str, str]) -> bool:
    if "job" in subject:
        return labels.get("job_name") == subject["job"]
    if "node" in subject:
        return labels.get("node") == subject["node"] and "gpu" not in labels
    if "gpu" in subject:
        return labels.get("node") == subject["gpu"]["node"] and labels.get("gpu") == str(
            subject["gpu"]["index"]
        )
    return labels.get("project") == subject["project"]


@pytest.mark.parametrize("path", [p for p in SCENARIOS if p.stem != "demo"], ids=lambda p: p.stem)
def test_it_fires_every_expected_alert_on_its_subject(path: Path) -> None:
    """The ground truth is reachable: the simulated mechanism raises the alert the expect block is about."""
    from simulator import World

    s = load_scenario(path)
    w = World.from_scenario(s)
    fired: set[int] = set()
    while w.now < w.end:
        w.step()
        for i, x in enumerate(s.expect):
            if any(
                a["labels"]["alertname"] == x.alert and _matches(x.subject, a["labels"]) for a in w.alerts()
            ):
                fired.add(i)
    assert fired == set(range(len(s.expect)))


def test_the_simulators_code_vocabulary_is_the_diagnosis_codes() -> None:
    from incidents.diagnosis import codes

    assert set(DIAGNOSIS_CODES) == set(codes.ALL_CODES)
