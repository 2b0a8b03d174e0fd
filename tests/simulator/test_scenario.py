"""The scenario loader: every key of docs/scenarios.md is read, and every kind of mistake is named with its line."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from simulator.scenario import ScenarioError, load_scenario, node_name, parse_duration

BASE = """\
format: 1
name: tiny
summary: A tiny cluster.
start: 2026-11-29T00:00:00Z
duration: 2h
seed: 3
cluster:
  name: gpu-test
  scheduler: kai
  nodepools:
    - name: a100
      nodes: 2
      gpus_per_node: 8
      gpu_product: NVIDIA-A100-SXM4-80GB
projects:
  - name: vision
    quota: {gpu: 8}
    limit: {gpu: 16}
jobs:
  - name: train-a
    project: vision
    submit: 10m
    pods: 1
    gpus_per_pod: 8
events:
  - {at: 30m, cordon: {node: a100-01}}
alerts:
  - {name: GPUJobPendingTooLong, for: 15m}
expect:
  - alert: GPUJobPendingTooLong
    subject: {job: train-a}
    top: gpu_capacity_shortage
"""


def problems_of(text: str) -> list[tuple[str, int, str]]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(text)
    return info.value.problems


def test_it_loads_a_valid_scenario() -> None:
    s = load_scenario(BASE)
    assert s.name == "tiny"
    assert s.start == datetime(2026, 11, 29, tzinfo=UTC)
    assert s.duration_s == 7200
    assert s.cluster.nodepools[0].gpu_memory_mib == 81920
    assert s.jobs[0].submit_s == 600 and s.jobs[0].priority == "train" and s.jobs[0].sm_activity == 0.7
    assert s.events[0].action == "cordon" and s.events[0].args == {"node": "a100-01"}
    assert s.alerts[0].for_s == 900
    assert s.expect[0].subject == {"job": "train-a"}


def test_it_names_an_unknown_key_and_its_line() -> None:
    problems = problems_of(
        BASE.replace("    gpus_per_pod: 8\nevents", "    gpus_per_pod: 8\n    sumbit: 5m\nevents")
    )
    assert ("jobs[0].sumbit", 25, problems[0][2]) == problems[0]
    assert "unknown key 'sumbit'" in problems[0][2]


def test_it_reports_a_wrong_type_with_the_value() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(BASE.replace("gpus_per_pod: 8\nevents", "gpus_per_pod: eight\nevents"))
    assert (
        "jobs[0].gpus_per_pod (line 24): expected an integer or a fraction between 0 and 1, got 'eight'"
        in str(info.value)
    )


def test_it_rejects_a_bad_duration() -> None:
    problems = problems_of(BASE.replace("duration: 2h", "duration: 2 hours"))
    assert problems == [
        ("duration", 5, "expected a positive duration like 30s, 15m, 2h or 1h30m, got '2 hours'")
    ]


def test_it_rejects_unknown_references() -> None:
    text = BASE.replace("project: vision\n    submit", "project: vison\n    submit").replace(
        "cordon: {node: a100-01}", "cordon: {node: a100-09}"
    )
    messages = {(p, m) for p, _line, m in problems_of(text)}
    assert ("jobs[0].project", "unknown project 'vison'") in messages
    assert ("events[0].cordon.node", "unknown node 'a100-09' at 30m") in messages


def test_it_rejects_events_with_zero_or_two_actions() -> None:
    none = problems_of(BASE.replace("{at: 30m, cordon: {node: a100-01}}", "{at: 30m, actor: bob}"))
    assert none[0][0] == "events[0]" and "got no action" in none[0][2]
    two = problems_of(
        BASE.replace(
            "{at: 30m, cordon: {node: a100-01}}",
            "{at: 30m, cordon: {node: a100-01}, uncordon: {node: a100-01}}",
        )
    )
    assert "got 2 actions (cordon, uncordon)" in two[0][2]


def test_it_rejects_duplicate_names() -> None:
    text = BASE.replace(
        "    limit: {gpu: 16}\n", "    limit: {gpu: 16}\n  - name: vision\n    quota: {gpu: 1}\n"
    )
    assert any("duplicate project name 'vision'" in m for _p, _l, m in problems_of(text))


def test_it_lists_every_problem_at_once() -> None:
    text = BASE.replace("seed: 3", "seed: three").replace("scheduler: kai", "scheduler: slurm")
    paths = [p for p, _l, _m in problems_of(text)]
    assert paths == ["seed", "cluster.scheduler"]


def test_it_checks_gpu_indices_and_nodes_added_later() -> None:
    events = """events:
  - {at: 30m, xid: {node: a100-02, gpu: 8, code: 79}}
  - {at: 40m, cordon: {node: a100-03}}
  - {at: 50m, add_nodes: {nodepool: a100, count: 1}}
  - {at: 60m, uncordon: {node: a100-03}}
"""
    text = BASE.replace("events:\n  - {at: 30m, cordon: {node: a100-01}}\n", events)
    problems = problems_of(text)
    assert [(p, m) for p, _l, m in problems] == [
        ("events[0].xid.gpu", "node a100-02 has GPUs 0..7, got 8"),
        ("events[1].cordon.node", "unknown node 'a100-03' at 40m"),
    ]


def test_it_defaults_start_to_now_minus_duration() -> None:
    s = load_scenario(
        BASE.replace("start: 2026-11-29T00:00:00Z\n", ""), now=datetime(2026, 11, 29, 5, 7, 31, tzinfo=UTC)
    )
    assert s.start == datetime(2026, 11, 29, 3, 7, tzinfo=UTC)


def test_it_expands_generate_entries_reproducibly() -> None:
    gen = """  - generate:
      count: 5
      project: vision
      pods: 1
      gpus_per_pod: [1, 2]
      submit_every: 10m
      runtime: [30m, 1h]
      name_prefix: bg
"""
    text = BASE.replace("events:", gen + "events:")
    a, b = load_scenario(text), load_scenario(text)
    assert [j.name for j in a.jobs] == ["train-a", "bg-001", "bg-002", "bg-003", "bg-004", "bg-005"]
    assert a.jobs == b.jobs
    assert all(
        j.runtime_s is not None and 1800 <= j.runtime_s <= 3600 and j.gpus_per_pod in (1, 2)
        for j in a.jobs[1:]
    )
    other = load_scenario(text.replace("seed: 3", "seed: 4"))
    assert [j.submit_s for j in other.jobs] != [j.submit_s for j in a.jobs]


def test_it_validates_expect_codes_and_alerts() -> None:
    text = BASE.replace("top: gpu_capacity_shortage", "top: capacity").replace(
        "alert: GPUJobPendingTooLong", "alert: GPUMissing"
    )
    paths = {p for p, _l, _m in problems_of(text)}
    assert paths == {"expect[0].alert", "expect[0].top"}


def test_it_names_nodes_with_padding() -> None:
    assert node_name("h100", 3, 4) == "h100-03"
    assert node_name("h100", 7, 120) == "h100-007"


def test_it_parses_durations() -> None:
    assert parse_duration("1h30m") == 5400
    assert parse_duration("30s") == 30
    assert parse_duration("") is None
    assert parse_duration("5") is None


def test_it_rejects_offsets_after_the_end() -> None:
    problems = problems_of(BASE.replace("{at: 30m, cordon", "{at: 3h, cordon"))
    assert problems == [("events[0].at", 26, "3h is after the end of the scenario (duration 2h)")]


def test_it_rejects_a_gpu_index_beyond_the_node_in_expect() -> None:
    text = BASE.replace("subject: {job: train-a}", "subject: {gpu: {node: a100-01, index: 8}}")
    assert [(p, m) for p, _l, m in problems_of(text)] == [
        ("expect[0].subject.gpu.index", "node a100-01 has GPUs 0..7, got 8")
    ]


# What a schema library does not give for free (docs/decisions.md, "Scenario validation stays hand-written"):
# these pin the contract any other implementation of the loader has to keep.


def test_it_names_duplicate_and_non_string_keys_with_their_lines() -> None:
    text = BASE.replace("    pods: 1\n", "    pods: 1\n    pods: 2\n").replace("seed: 3", "seed: 3\n7: x")
    assert problems_of(text) == [
        ("", 7, "keys must be strings, got 7"),
        ("jobs[0].pods", 25, "duplicate key 'pods'"),
    ]


def test_a_missing_key_is_reported_at_its_mapping_and_an_unknown_one_lists_the_keys() -> None:
    assert problems_of(BASE.replace("    pods: 1\n", "")) == [
        ("jobs[0].pods", 20, "missing required key 'pods'")
    ]
    ((path, line, msg),) = problems_of(BASE.replace("    quota: {gpu: 8}", "    quota: {gpu: 8, disk: 4}"))
    assert (path, line, msg) == (
        "projects[0].quota.disk",
        17,
        "unknown key 'disk'; expected one of: gpu, cpu, memory",
    )


def test_one_entry_reports_its_type_and_reference_problems_together_in_reading_order() -> None:
    xid = BASE.replace(
        "{at: 30m, cordon: {node: a100-01}}", "{at: 30m, xid: {node: a100-09, gpu: -1, code: 79}}"
    )
    assert problems_of(xid) == [
        ("events[0].xid.node", 26, "unknown node 'a100-09' at 30m"),
        ("events[0].xid.gpu", 26, "expected an integer >= 0, got -1"),
    ]
    job = BASE.replace("project: vision\n    submit: 10m", "project: vison\n    submit: soon")
    assert problems_of(job) == [
        ("jobs[0].project", 21, "unknown project 'vison'"),
        ("jobs[0].submit", 22, "expected a duration like 30s, 15m, 2h or 1h30m, got 'soon'"),
    ]


def test_an_expectation_may_name_a_moment_within_the_scenario() -> None:
    at = BASE.replace("    top: gpu_capacity_shortage\n", "    at: 1h30m\n    top: gpu_capacity_shortage\n")
    assert load_scenario(at).expect[0].at_s == 5400
    assert load_scenario(BASE).expect[0].at_s is None
    assert [(p, m) for p, _l, m in problems_of(at.replace("at: 1h30m", "at: 3h"))] == [
        ("expect[0].at", "3h is after the end of the scenario (duration 2h)")
    ]
    assert [p for p, _l, _m in problems_of(at.replace("at: 1h30m", "at: soon"))] == ["expect[0].at"]
