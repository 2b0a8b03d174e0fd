"""The `reference` section (an outside reference's end state) and a department's over-quota weight."""

from __future__ import annotations

import pytest

from simulator.engine.division import Division, divide
from simulator.scenario import ScenarioError, load_scenario

BASE = """\
format: 1
name: ref
start: 2026-12-01T00:00:00Z
duration: 10m
seed: 1
cluster:
  name: kai-oracle
  scheduler: kai
  nodepools:
    - {name: n, nodes: 2, gpus_per_node: 2, gpu_product: NVIDIA-A100-SXM4-80GB}
departments:
  - {name: d1, quota: {gpu: 2}, over_quota_weight: 2}
projects:
  - {name: queue0, quota: {gpu: 1}, over_quota_weight: 0, department: d1}
jobs:
  - {name: running-job0, project: queue0, submit: 0s, pods: 1, gpus_per_pod: 2}
  - {name: pending-job0, project: queue0, submit: 1m, pods: 1, gpus_per_pod: 1}
reference:
  source: "pkg/scheduler/actions/reclaim/reclaim_test.go@d5bc503a146317e51037d89775d77172c6d12f71 :: a test"
  family: reclaim
  end_state:
    running-job0: {state: running, node: n-01}
    pending-job0: {state: pending}
"""


def problems_of(text: str) -> list[tuple[str, int, str]]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(text)
    return info.value.problems


def test_it_loads_the_reference_and_the_department_weight() -> None:
    s = load_scenario(BASE)
    assert s.reference is not None
    assert s.reference.family == "reclaim" and s.reference.source.endswith(":: a test")
    assert s.reference.end_state == {"running-job0": ("running", "n-01"), "pending-job0": ("pending", None)}
    assert s.departments[0].over_quota_weight == 2
    assert load_scenario(BASE.replace(", over_quota_weight: 2}", "}")).departments[0].over_quota_weight == 1


def test_a_scenario_without_reference_has_none() -> None:
    assert load_scenario(BASE[: BASE.index("reference:")]).reference is None


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (("running-job0: {state", "runing-job0: {state"), "reference.end_state.runing-job0", "unknown key"),
        (("node: n-01}", "node: n-09}"), "reference.end_state.running-job0.node", "unknown node 'n-09'"),
        (
            ("{state: pending}", "{state: pending, node: n-02}"),
            "reference.end_state.pending-job0.node",
            "no node",
        ),
        (("{state: pending}", "{state: evicted}"), "reference.end_state.pending-job0.state", "evicted"),
        (("  family: reclaim\n", "  family: reclaim\n  expected: 1\n"), "reference.expected", "unknown key"),
        (("  source: ", "  sourc: "), "reference.sourc", "unknown key"),
        (("over_quota_weight: 2}", "over_quota_weight: -1}"), "departments[0].over_quota_weight", ">= 0"),
    ],
)
def test_it_names_what_is_wrong(change: tuple[str, str], path: str, words: str) -> None:
    problems = problems_of(BASE.replace(*change))
    assert any(p == path and words in msg for p, _line, msg in problems), problems


def q(name: str, deserved: float, demand: float, weight: int, priority: int = 0) -> Division:
    return Division(name, deserved, demand, priority, weight)


def test_the_spare_is_divided_in_whole_gpus_and_the_largest_remainder_takes_the_rest() -> None:
    # 8 GPUs: deserved 4 + 2, spare 2 by weights 4:2 is 1.33 / 0.67: one whole GPU to queue0 in the round,
    # the last GPU to the larger remainder (queue1's 0.67), as KAI's resource division does.
    got = divide(8, [q("queue0", 4, 7, 4), q("queue1", 2, 3, 2)])
    assert got == {"queue0": 5, "queue1": 3}


def test_a_satisfied_queue_leaves_its_part_to_another_round() -> None:
    got = divide(10, [q("a", 0, 1, 1), q("b", 0, 10, 1)])
    assert got == {"a": 1, "b": 9}


def test_higher_priority_queues_take_the_spare_first_and_weight_zero_takes_none() -> None:
    got = divide(6, [q("low", 1, 6, 1), q("high", 1, 6, 1, priority=1), q("none", 1, 6, 0, priority=2)])
    assert got == {"low": 1, "high": 4, "none": 1}


def test_an_unlimited_deserved_quota_deserves_what_it_asks_for() -> None:
    got = divide(8, [q("unlimited", -1, 5, 0), q("b", 2, 6, 1)])
    assert got == {"unlimited": 5, "b": 3}


UNLIMITED = BASE.replace("{name: queue0, quota: {gpu: 1}", "{name: queue0, quota: {gpu: -1}").replace(
    "gpus_per_pod: 2}", "gpus_per_pod: 4, priority: inference}"
)


def test_kai_takes_an_unlimited_quota_and_kueue_refuses_it() -> None:
    s = load_scenario(UNLIMITED.replace("node: n-01}", "node: null}"))
    assert s.projects[0].quota_gpus == -1
    problems = problems_of(UNLIMITED.replace("scheduler: kai", "scheduler: kueue"))
    assert any(p == "projects[0].quota.gpu" and "KAI's" in msg for p, _l, msg in problems), problems
    problems = problems_of(BASE.replace("{name: queue0, quota: {gpu: 1}", "{name: queue0, quota: {gpu: -2}"))
    assert any(p == "projects[0].quota.gpu" and ">= 0" in msg for p, _l, msg in problems), problems


def test_kai_takes_a_fractional_deserved_quota_and_kueue_refuses_it() -> None:
    half = BASE.replace("{name: queue0, quota: {gpu: 1}", "{name: queue0, quota: {gpu: 0.5}")
    assert load_scenario(half).projects[0].quota_gpus == 0.5
    problems = problems_of(half.replace("scheduler: kai", "scheduler: kueue"))
    assert any(p == "projects[0].quota.gpu" and "0.5" in msg for p, _l, msg in problems), problems
    assert divide(1, [q("a", 0.2, 1, 1), q("b", 0.8, 1, 1)]) == {"a": 0.2, "b": 0.8}
