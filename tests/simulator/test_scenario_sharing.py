"""Format 1 additions: GPU sharing, MIG layouts, CPU/memory and departments, validated like every other key."""

from __future__ import annotations

import pytest

from simulator.scenario import ScenarioError, load_scenario
from simulator.scenario.gpus import CATALOG, gpu_model, layout_problem, mig_config_name

BASE = """\
format: 1
name: shared
start: 2026-11-29T00:00:00Z
duration: 4h
seed: 3
cluster:
  name: gpu-test
  scheduler: kai
  nodepools:
    - name: a100-mig
      nodes: 2
      gpus_per_node: 8
      gpu_product: NVIDIA-A100-SXM4-80GB
      mig: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}
    - name: l40s
      nodes: 2
      gpus_per_node: 4
      gpu_product: NVIDIA-L40S
      sharing: true
      cpu: 64
      memory: 512Gi
departments:
  - name: research
    quota: {gpu: 32}
    limit: {gpu: 40}
projects:
  - name: vision
    department: research
    quota: {gpu: 16}
jobs:
  - name: notebook-ana
    project: vision
    submit: 0
    pods: 1
    gpus_per_pod: 0.5
  - name: embed-svc
    project: vision
    submit: 5m
    pods: 1
    gpu_memory: 20Gi
  - name: mig-train
    project: vision
    submit: 5m
    pods: 1
    gpus_per_pod: 2
    mig_profile: 3g.40gb
    cpu_per_pod: 16
    memory_per_pod: 128Gi
  - generate:
      count: 4
      project: vision
      pods: 1
      gpus_per_pod: [0.25, 0.5, 1]
      submit_every: 10m
      runtime: [10m, 20m]
      cpu_per_pod: 500m
      memory_per_pod: 8Gi
events:
  - {at: 2h, mig: {node: a100-mig-02, layout: {3g.40gb: 2}}, actor: node-ops}
  - {at: 3h, quota: {department: research, quota: {gpu: 24}, limit: {gpu: 24}}, actor: platform-admin}
"""


def problems_of(text: str) -> list[tuple[str, int, str]]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(text)
    return info.value.problems


def test_it_loads_every_addition() -> None:
    s = load_scenario(BASE)
    mig, l40s = s.cluster.nodepools
    assert mig.mig == {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1} and not mig.sharing
    assert l40s.sharing and l40s.cpu_millis == 64000 and l40s.memory_bytes == 512 * 2**30
    assert l40s.gpu_memory_mib == 46068
    assert s.departments[0].name == "research" and s.departments[0].limit_gpus == 40
    assert s.projects[0].department == "research"
    jobs = {j.name: j for j in s.jobs}
    assert jobs["notebook-ana"].gpus_per_pod == 0.5 and jobs["notebook-ana"].shared
    assert jobs["embed-svc"].gpu_memory_mib == 20480 and jobs["embed-svc"].gpus_per_pod == 0
    assert jobs["embed-svc"].shared
    m = jobs["mig-train"]
    assert (m.mig_profile, m.gpus_per_pod, m.cpu_millis, m.memory_bytes) == ("3g.40gb", 2, 16000, 128 * 2**30)
    gen = [j for j in s.jobs if j.generated_by]
    assert len(gen) == 4 and all(j.cpu_millis == 500 and j.memory_bytes == 8 * 2**30 for j in gen)
    assert {j.gpus_per_pod for j in gen} <= {0.25, 0.5, 1}
    assert s.events[0].args == {"node": "a100-mig-02", "layout": {"3g.40gb": 2}}
    assert s.events[1].args == {"department": "research", "quota": 24, "limit": 24}


def test_it_rejects_a_mig_layout_that_does_not_fit_the_slices() -> None:
    problems = problems_of(BASE.replace("{3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}", "{3g.40gb: 2, 2g.20gb: 1}"))
    path, line, msg = problems[0]
    assert (path, line) == ("cluster.nodepools[0].mig", 14)
    assert "8 compute slices" in msg and "has 7" in msg


def test_it_rejects_a_profile_the_gpu_does_not_have() -> None:
    problems = problems_of(BASE.replace("{3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}", "{1g.5gb: 7}"))
    assert problems[0][0] == "cluster.nodepools[0].mig"
    assert "no MIG profile '1g.5gb'" in problems[0][2] and "1g.10gb" in problems[0][2]


def test_it_rejects_mig_on_a_gpu_without_mig() -> None:
    text = BASE.replace("      sharing: true\n", "      sharing: true\n      mig: {1g.10gb: 7}\n", 1)
    problems = problems_of(text)
    assert any(p[0] == "cluster.nodepools[1].mig" and "does not support MIG" in p[2] for p in problems)


def test_it_rejects_a_mig_event_that_does_not_fit_and_one_on_a_non_mig_gpu() -> None:
    problems = problems_of(BASE.replace("layout: {3g.40gb: 2}", "layout: {7g.80gb: 1, 1g.10gb: 1}"))
    assert problems[0][0] == "events[0].mig.layout" and "compute slices" in problems[0][2]
    problems = problems_of(BASE.replace("node: a100-mig-02, layout", "node: l40s-01, layout"))
    assert problems[0][0] == "events[0].mig.node" and "NVIDIA-L40S" in problems[0][2]


def test_an_empty_mig_event_layout_disables_mig() -> None:
    s = load_scenario(BASE.replace("layout: {3g.40gb: 2}", "layout: {}"))
    assert s.events[0].args["layout"] == {}


def test_it_rejects_a_fraction_without_a_sharing_pool() -> None:
    problems = problems_of(BASE.replace("      sharing: true\n", ""))
    paths = [p[0] for p in problems]
    assert "jobs[0].gpus_per_pod" in paths and "jobs[1].gpu_memory" in paths
    assert "jobs[3].generate.gpus_per_pod[0]" in paths
    assert all("sharing: true" in p[2] for p in problems)


def test_it_rejects_fractions_above_one_and_both_sizes() -> None:
    problems = problems_of(BASE.replace("gpus_per_pod: 0.5", "gpus_per_pod: 1.5"))
    assert problems[0][:2] == ("jobs[0].gpus_per_pod", 35) and "fraction between 0 and 1" in problems[0][2]
    problems = problems_of(
        BASE.replace("    gpu_memory: 20Gi\n", "    gpu_memory: 20Gi\n    gpus_per_pod: 1\n")
    )
    assert problems[0][0] == "jobs[1]" and "exactly one of gpus_per_pod or gpu_memory" in problems[0][2]


def test_it_rejects_bad_quantities() -> None:
    problems = problems_of(
        BASE.replace("gpu_memory: 20Gi", "gpu_memory: 20GB").replace("cpu: 64", "cpu: lots")
    )
    got = {p[0]: p[2] for p in problems}
    assert "memory quantity like 512Gi" in got["jobs[1].gpu_memory"]
    assert "CPU cores like 64" in got["cluster.nodepools[1].cpu"]


def test_it_rejects_mig_profile_misuse() -> None:
    problems = problems_of(BASE.replace("mig_profile: 3g.40gb", "mig_profile: 3g.41gb"))
    assert problems[0][0] == "jobs[2].mig_profile" and "unknown MIG profile" in problems[0][2]
    problems = problems_of(
        BASE.replace("    gpus_per_pod: 2\n    mig_profile", "    gpus_per_pod: 0.5\n    mig_profile")
    )
    assert any(p[0] == "jobs[2].mig_profile" and "whole number" in p[2] for p in problems)


def test_it_checks_departments() -> None:
    problems = problems_of(BASE.replace("department: research", "department: reserch"))
    assert problems[0][0] == "projects[0].department" and "unknown department 'reserch'" in problems[0][2]
    problems = problems_of(BASE.replace("limit: {gpu: 40}", "limit: {gpu: 4}"))
    assert problems[0][0] == "departments[0].limit"
    problems = problems_of(BASE.replace("    limit: {gpu: 40}\n", "    limit: {gpu: 40}\n    weight: 2\n"))
    assert problems[0][0] == "departments[0].weight" and "unknown key" in problems[0][2]
    problems = problems_of(
        BASE.replace("quota: {department: research,", "quota: {department: research, project: vision,")
    )
    assert "exactly one of project or department" in problems[0][2]


def test_kueue_has_no_gpu_sharing() -> None:
    problems = problems_of(BASE.replace("scheduler: kai", "scheduler: kueue"))
    assert problems[0][0] == "cluster.nodepools[1].sharing" and "KAI Scheduler feature" in problems[0][2]


@pytest.mark.parametrize(
    "product", ["NVIDIA-A10", "NVIDIA-L4", "NVIDIA-L40S", "Tesla-T4", "NVIDIA-H200", "NVIDIA-A100-SXM4-80GB"]
)
def test_it_accepts_real_gpu_feature_discovery_names(product: str) -> None:
    s = load_scenario(BASE.replace("gpu_product: NVIDIA-L40S", f"gpu_product: {product}"))
    assert s.cluster.nodepools[1].gpu_memory_mib == CATALOG[product].memory_mib


def test_unknown_names_with_gb_are_parsed_and_others_list_the_catalog() -> None:
    assert gpu_model("NVIDIA-RTX-PRO-6000-96GB").memory_mib == 96 * 1024
    problems = problems_of(BASE.replace("gpu_product: NVIDIA-L40S", "gpu_product: NVIDIA-Mystery"))
    assert problems[0][0] == "cluster.nodepools[1].gpu_product"
    for name in ("NVIDIA-A10", "NVIDIA-L4", "Tesla-T4", "NVIDIA-GB200", "NVIDIA-GH200-480GB"):
        assert name in problems[0][2]


def test_the_catalog_layouts() -> None:
    a100, a30 = CATALOG["NVIDIA-A100-SXM4-80GB"], CATALOG["NVIDIA-A30"]
    assert layout_problem(a100, {"1g.10gb": 7}) is None
    assert layout_problem(a100, {"4g.40gb": 1, "3g.40gb": 1}) is None
    assert "memory slices" in (layout_problem(a100, {"1g.20gb": 4, "1g.10gb": 1}) or "")
    assert layout_problem(a30, {"2g.12gb": 2}) is None and layout_problem(a30, {"2g.12gb": 3})
    assert mig_config_name(a100, {"1g.10gb": 7}) == "all-1g.10gb"
    assert mig_config_name(a100, {"3g.40gb": 2}) == "all-3g.40gb"
    assert mig_config_name(a100, {"1g.10gb": 3}).startswith("custom-")
    assert mig_config_name(a100, {}) == "all-disabled"
