"""CPU and memory deserved quotas of a KAI queue: read, refused for Kueue, rendered, and weighed by reclaim."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator import World, load_scenario
from simulator.kube import build_context, resources
from simulator.scenario import ScenarioError

CASE = Path(__file__).parent / "kai_cases" / "reclaim-59.yaml"


def doc(**projects_quota: object) -> dict:
    return {
        "format": 1,
        "name": "t",
        "start": "2026-11-29T00:00:00Z",
        "duration": "10m",
        "seed": 1,
        "cluster": {
            "name": "c",
            "scheduler": "kai",
            "nodepools": [{"name": "n", "nodes": 1, "gpus_per_node": 2, "gpu_product": "NVIDIA-L40S"}],
        },
        "departments": [{"name": "d", "quota": {"gpu": 2, "cpu": 8, "memory": "64Gi"}}],
        "projects": [{"name": "p", "department": "d", "quota": {"gpu": 1, **projects_quota}}],
        "jobs": [],
    }


def test_a_queue_may_deserve_cpu_and_memory() -> None:
    s = load_scenario(yaml.safe_dump(doc(cpu="1500m", memory="1500M")))
    p, d = s.projects[0], s.departments[0]
    assert (p.quota_gpus, p.quota_cpu_millis, p.quota_memory_bytes) == (1, 1500, 1_500_000_000)
    assert (d.quota_cpu_millis, d.quota_memory_bytes) == (8000, 64 * 2**30)
    bare = load_scenario(
        yaml.safe_dump({**doc(), "departments": []} | {"projects": [{"name": "p", "quota": {"gpu": 1}}]})
    )
    assert (bare.projects[0].quota_cpu_millis, bare.projects[0].quota_memory_bytes) == (None, None)


def test_bad_cpu_and_memory_quotas_are_refused_where_they_are() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(yaml.safe_dump(doc(cpu="lots", memory="3GB")))
    paths = {p[0] for p in info.value.problems}
    assert {"projects[0].quota.cpu", "projects[0].quota.memory"} <= paths


def test_kueue_refuses_cpu_and_memory_quotas() -> None:
    d = doc(cpu=4)
    d["cluster"]["scheduler"] = "kueue"
    with pytest.raises(ScenarioError) as info:
        load_scenario(yaml.safe_dump(d))
    assert any(p[0] == "projects[0].quota" and "KAI Queue's" in p[2] for p in info.value.problems)


def test_the_queue_states_them_in_kais_units() -> None:
    w = World.from_scenario(load_scenario(yaml.safe_dump(doc(cpu="1500m", memory="1500M"))))
    queues = {key: render() for key, _sig, render, *_ in resources(build_context(w))["queues"]}
    spec = {q["metadata"]["name"]: q["spec"]["resources"] for q in queues.values()}
    assert spec["p"]["cpu"]["quota"] == 1500 and spec["p"]["memory"]["quota"] == 1500
    assert spec["d"]["cpu"]["quota"] == 8000 and spec["d"]["memory"]["quota"] == 64 * 2**30 // 10**6


def end(text: str) -> dict[str, bool]:
    w = World.from_scenario(load_scenario(text))
    w.advance_to(w.end)
    return {n: all(p.node for p in w.pods_of(j)) for n, j in w.jobs.items()}


def test_a_queue_past_its_memory_fair_share_loses_work_to_one_within_it() -> None:
    """KAI's DRF reclaim: queue0 holds 22.5G of the node's 30G, past its memory fair share of 15G; with the
    deserved quotas in CPU and memory the pending job reclaims, without them (GPUs only: none) it waits."""
    text = CASE.read_text(encoding="utf-8")
    assert end(text) == {
        "running-job-a-0": True,
        "running-job-a-1": False,
        "running-job-b-0": True,
        "pending-job-b-0": True,
    }
    gpus_only = text.replace("{gpu: 0, cpu: 1500m, memory: 1500M}", "{gpu: 0}")
    assert gpus_only != text
    assert end(gpus_only)["pending-job-b-0"] is False
    assert end(gpus_only)["running-job-a-1"] is True


def test_a_queue_may_deserve_no_cpu_or_memory_at_all() -> None:
    s = load_scenario(yaml.safe_dump(doc(cpu=0, memory=0)))
    assert (s.projects[0].quota_cpu_millis, s.projects[0].quota_memory_bytes) == (0, 0)
    with pytest.raises(ScenarioError) as info:
        load_scenario(yaml.safe_dump(doc(cpu=-1)))
    assert any(p[0] == "projects[0].quota.cpu" for p in info.value.problems)
