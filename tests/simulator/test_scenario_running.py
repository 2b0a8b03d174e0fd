"""A job's numeric (KAI) priority and `running_on`, the nodes a job already runs on at the start."""

from __future__ import annotations

import pytest

from simulator import World, load_scenario
from simulator.scenario import ScenarioError

BASE = """\
format: 1
name: running
start: 2026-12-01T00:00:00Z
duration: 10m
seed: 1
cluster:
  name: kai-oracle
  scheduler: kai
  nodepools:
    - {name: n, nodes: 2, gpus_per_node: 2, gpu_product: NVIDIA-A100-SXM4-80GB}
projects:
  - {name: queue0, quota: {gpu: 4}, over_quota_weight: 0}
jobs:
  - {name: spread, project: queue0, submit: 0s, pods: 2, gpus_per_pod: 1, priority: 40, running_on: [n-02, n-01]}
  - {name: low, project: queue0, submit: 0s, pods: 1, gpus_per_pod: 1, priority: 45, running_on: [n-02]}
  - {name: mid, project: queue0, submit: 0s, pods: 1, gpus_per_pod: 1, priority: 75, running_on: [n-01]}
  - {name: high, project: queue0, submit: 1m, pods: 1, gpus_per_pod: 2, priority: 60}
"""


def problems_of(text: str) -> list[tuple[str, int, str]]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(text)
    return info.value.problems


def test_it_reads_numbers_and_nodes() -> None:
    jobs = {j.name: j for j in load_scenario(BASE).jobs}
    assert jobs["spread"].running_on == ("n-02", "n-01") and jobs["high"].running_on == ()
    assert (jobs["mid"].priority, jobs["mid"].priority_value) == ("train", 75)
    assert load_scenario(BASE.replace("priority: 75", "priority: 100")).jobs[2].priority == "inference"


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (("running_on: [n-02, n-01]", "running_on: [n-02]"), "jobs[0].running_on", "one node per pod (2)"),
        (("running_on: [n-02, n-01]", "running_on: [n-02, n-07]"), "jobs[0].running_on[1]", "unknown node"),
        (
            (
                "submit: 1m, pods: 1, gpus_per_pod: 2",
                "submit: 1m, pods: 1, gpus_per_pod: 2, running_on: [n-01]",
            ),
            "jobs[3].running_on",
            "submitted at 0s",
        ),
        (("priority: 60", "priority: -3"), "jobs[3].priority", ">= 0"),
        (("priority: 60", "priority: urgent"), "jobs[3].priority", "urgent"),
    ],
)
def test_it_names_what_is_wrong(change: tuple[str, str], path: str, words: str) -> None:
    problems = problems_of(BASE.replace(*change))
    assert any(p == path and words in msg for p, _line, msg in problems), problems


def test_running_jobs_start_on_their_nodes_and_a_higher_priority_preempts_the_lowest_of_its_queue() -> None:
    world = World.from_scenario(load_scenario(BASE))
    world.advance_to(world.start)
    assert [p.node for p in world.pods_of(world.jobs["spread"])] == ["n-02", "n-01"]
    world.advance_to(world.end)
    # 60 needs two GPUs on one node: the lowest-priority jobs of its queue go (40 on both nodes, then 45),
    # never the 75 above it
    victims = {p["victim"].split("/")[1] for p in world.preemptions}
    assert "mid" not in victims and "spread" in victims
    assert all(p["kind"] == "preempt" for p in world.preemptions)
    assert all(p.node for p in world.pods_of(world.jobs["high"]))
    assert all(p.node for p in world.pods_of(world.jobs["mid"]))


CPU_LIMIT = """\
format: 1
name: cpu-limit
start: 2026-12-01T00:00:00Z
duration: 10m
seed: 1
cluster:
  name: kai-oracle
  scheduler: kai
  nodepools:
    - {name: n, nodes: 1, gpus_per_node: 4, gpu_product: NVIDIA-A100-SXM4-80GB, cpu: 16}
projects:
  - {name: queue0, quota: {gpu: 4}, limit: {cpu: 5, memory: 100Gi}}
jobs:
  - {name: first, project: queue0, submit: 0s, pods: 1, gpus_per_pod: 1, cpu_per_pod: 3, memory_per_pod: 8Gi}
  - {name: second, project: queue0, submit: 1m, pods: 1, gpus_per_pod: 1, cpu_per_pod: 3, memory_per_pod: 8Gi}
"""


def test_a_queue_cpu_limit_holds_the_job_that_would_pass_it_in_kai_words() -> None:
    world = World.from_scenario(load_scenario(CPU_LIMIT))
    world.advance_to(world.end)
    assert all(p.node for p in world.pods_of(world.jobs["first"]))
    second = world.jobs["second"]
    assert not any(p.node for p in world.pods_of(second))
    assert second.condition_message == (
        "OverLimit: queue0 quota has reached the allowable limit of CPU cores. Limit is 5 cores, currently 3 "
        "cores allocated and workload requested 3 cores."
    )
    relaxed = World.from_scenario(load_scenario(CPU_LIMIT.replace("cpu: 5,", "cpu: 6,")))
    relaxed.advance_to(relaxed.end)
    assert all(p.node for p in relaxed.pods_of(relaxed.jobs["second"]))


def test_cpu_and_memory_limits_are_kai_only_and_need_a_resource() -> None:
    problems = problems_of(CPU_LIMIT.replace("scheduler: kai", "scheduler: kueue"))
    assert any(p == "projects[0].limit" and "KAI Queue's" in msg for p, _l, msg in problems), problems
    problems = problems_of(CPU_LIMIT.replace("limit: {cpu: 5, memory: 100Gi}", "limit: {}"))
    assert any(p == "projects[0].limit" and "at least one" in msg for p, _l, msg in problems), problems
    problems = problems_of(CPU_LIMIT.replace("limit: {cpu: 5,", "limit: {cpu: lots,"))
    assert any(p == "projects[0].limit.cpu" for p, _l, _m in problems), problems


def test_a_job_running_at_the_start_is_there_past_its_quota_and_is_held_once_it_restarts() -> None:
    text = CPU_LIMIT.replace("limit: {cpu: 5, memory: 100Gi}", "over_quota_weight: 0").replace(
        "quota: {gpu: 4}", "quota: {gpu: 1}"
    )
    text = text.replace(
        "cpu_per_pod: 3, memory_per_pod: 8Gi}\n  - {name: second",
        "cpu_per_pod: 3, memory_per_pod: 8Gi, priority: inference, running_on: [n-01]}\n  - {name: second",
    )
    text = text.replace(
        "{name: second, project: queue0, submit: 1m,", "{name: second, project: queue0, submit: 0s,"
    )
    text = text.replace(
        "memory_per_pod: 8Gi}\n", "memory_per_pod: 8Gi, priority: inference, running_on: [n-01]}\n"
    )
    world = World.from_scenario(load_scenario(text))
    world.advance_to(world.end)
    # two inference jobs past the deserved 1 GPU: a fresh one would wait (NonPreemptibleOverQuota)
    assert all(p.node for name in ("first", "second") for p in world.pods_of(world.jobs[name]))
