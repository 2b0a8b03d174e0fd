"""The scenario format's kueue section: read as written, and every mistake named with its key and line."""

from __future__ import annotations

import pytest

from simulator import ScenarioError, load_scenario

BASE = """
format: 1
name: kueue-section
start: "2026-12-01T00:00:00Z"
duration: 10m
seed: 1
cluster:
  name: k
  scheduler: {scheduler}
  nodepools:
    - {{name: od, nodes: 1, gpus_per_node: 8, gpu_product: NVIDIA-A100-SXM4-80GB, labels: {{instance: od}}}}
projects:
  - {{name: a, quota: {{gpu: 4}}}}
  - {{name: b, quota: {{gpu: 2}}}}
jobs:
  - {{name: j1, project: a, submit: 1m, pods: 1, gpus_per_pod: 3}}
kueue:
  flavors:
    - {{name: on-demand, node_labels: {{instance: od}}}}
    - {{name: spot}}
  cluster_queues:
    - project: a
      cohort: eng
      flavors: [{{flavor: on-demand, nominal: 2, borrowing_limit: 1}}, {{flavor: spot, nominal: 2}}]
      preemption: {{within_cluster_queue: LowerPriority, reclaim_within_cohort: Any}}
      flavor_fungibility: {{when_can_borrow: TryNextFlavor}}
    - project: b
      cohort: eng
      flavors: [{{flavor: on-demand, nominal: 2, lending_limit: {lending}}}]
      queueing_strategy: StrictFIFO
  priorities: {{{priorities}}}
"""


def _text(scheduler: str = "kueue", lending: str = "1", priorities: str = "j1: 10") -> str:
    return BASE.format(scheduler=scheduler, lending=lending, priorities=priorities)


def test_it_reads_the_section_as_written() -> None:
    spec = load_scenario(_text()).kueue
    assert spec is not None
    assert [(f.name, f.node_labels) for f in spec.flavors] == [
        ("on-demand", {"instance": "od"}),
        ("spot", {}),
    ]
    a, b = spec.queue("a"), spec.queue("b")
    assert (a.cohort, a.within_cluster_queue, a.reclaim_within_cohort, a.borrow_within_cohort) == (
        "eng",
        "LowerPriority",
        "Any",
        "Never",
    )
    assert (a.when_can_borrow, a.when_can_preempt, a.queueing_strategy) == (
        "TryNextFlavor",
        "TryNextFlavor",
        "BestEffortFIFO",
    )
    assert [(q.flavor, q.nominal, q.borrowing_limit, q.lending_limit) for q in a.flavors] == [
        ("on-demand", 2, 1, None),
        ("spot", 2, None, None),
    ]
    assert (b.flavors[0].lending_limit, b.queueing_strategy) == (1, "StrictFIFO")
    assert spec.priorities == {"j1": 10}


def test_a_scenario_without_the_section_has_none() -> None:
    text = _text().split("kueue:\n  flavors")[0]
    assert load_scenario(text).kueue is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (_text(scheduler="kai"), "a kueue section needs cluster.scheduler: kueue, not kai"),
        (_text(lending="3"), "lending_limit (3) is above nominal (2)"),
        (_text(priorities="nobody: 1"), "unknown key 'nobody'"),
        (_text().replace("flavor: spot, nominal: 2", "flavor: gpu, nominal: 2"), "unknown flavor 'gpu'"),
        (
            _text().replace("nominal: 2, lending_limit: 1", "nominal: 3, lending_limit: 1"),
            "nominal quotas add up to 3",
        ),
        (_text().replace("    - project: b\n", "    - project: c\n"), "unknown project 'c'"),
        (_text().replace("StrictFIFO", "LIFO"), "expected one of BestEffortFIFO, StrictFIFO, got 'LIFO'"),
        (
            _text().replace("reclaim_within_cohort: Any", "reclaim_within_cohort: Sometimes"),
            "got 'Sometimes'",
        ),
    ],
)
def test_it_names_each_mistake(text: str, problem: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        load_scenario(text)
    assert problem in str(exc.value)
    assert all(line > 0 for _path, line, _msg in exc.value.problems)


def test_it_names_a_project_without_cluster_queue() -> None:
    text = _text().replace("    - project: b\n      cohort: eng\n", "    - project: a\n      cohort: eng\n")
    with pytest.raises(ScenarioError) as exc:
        load_scenario(text)
    assert "a second ClusterQueue for project 'a'" in str(exc.value)
    assert "no ClusterQueue for project(s) b" in str(exc.value)
