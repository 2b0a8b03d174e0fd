"""Scheduler properties with GPU sharing, MIG and departments (hypothesis).

After every tick: the shares on a GPU never sum over 1 nor over its memory, and a shared GPU is held by
exactly one KAI reservation pod and no whole-GPU pod; every MIG layout on a node fits the GPU's compute
and memory slices and each instance has at most one pod; a department's usage never exceeds its limit;
CPU and memory requested on a node never exceed what it can allocate; a reclaim's victim queue was over its
quota at the level KAI compared it (siblings, or departments); a department's projects' fair shares stay
within the department's limit.
"""

from __future__ import annotations

from datetime import timedelta

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import ScenarioError, World, load_scenario
from simulator.engine.quota import usage
from simulator.engine.sharing import node_requests
from simulator.scenario.gpus import CATALOG, layout_problem

A100 = CATALOG["NVIDIA-A100-SXM4-80GB"]
PROFILES = [p.name for p in A100.mig_profiles]


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, int]:
    """Any mapping of A100 profiles to counts, fitting or not: the loader is what must refuse the bad ones."""
    names = draw(st.lists(st.sampled_from(PROFILES), min_size=1, max_size=3, unique=True))
    return {n: draw(st.integers(1, 7)) for n in names}


def fitting(layout: dict[str, int]) -> bool:
    return layout_problem(A100, layout) is None


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    scheduler = draw(st.sampled_from(["kai", "kueue"]))
    mig = draw(layouts().filter(fitting))
    pools = [
        {
            "name": "mig",
            "nodes": draw(st.integers(1, 2)),
            "gpus_per_node": draw(st.sampled_from([1, 2])),
            "gpu_product": "NVIDIA-A100-SXM4-80GB",
            "mig": mig,
        },
        {
            "name": "whole",
            "nodes": draw(st.integers(1, 2)),
            "gpus_per_node": 2,
            "gpu_product": "NVIDIA-H100-80GB-HBM3",
            "cpu": draw(st.sampled_from([16, 24, 64])),
            "memory": draw(st.sampled_from(["128Gi", "256Gi"])),
        },
    ]
    if scheduler == "kai":
        pools.append(
            {
                "name": "shared",
                "nodes": draw(st.integers(1, 2)),
                "gpus_per_node": 2,
                "gpu_product": "NVIDIA-L40S",
                "sharing": True,
            }
        )
    departments = []
    for i in range(draw(st.integers(1, 2))):
        quota = draw(st.integers(0, 4))
        d = {"name": f"d{i}", "quota": {"gpu": quota}}
        if draw(st.integers(0, 3)):
            d["limit"] = {"gpu": quota + draw(st.integers(0, 2))}
        departments.append(d)
    projects = []
    for i in range(draw(st.integers(1, 3))):
        p = {"name": f"p{i}", "quota": {"gpu": draw(st.integers(0, 4))}}
        if draw(st.integers(0, 3)):
            p["department"] = draw(st.sampled_from([d["name"] for d in departments]))
        projects.append(p)
    jobs = []
    for i in range(draw(st.integers(2, 12))):
        kind = draw(
            st.sampled_from(["whole", "mig"] + (["fraction", "memory"] if scheduler == "kai" else []))
        )
        j: dict = {
            "name": f"j{i}",
            "project": draw(st.sampled_from([p["name"] for p in projects])),
            "submit": f"{draw(st.integers(0, 40))}m",
            "pods": draw(st.integers(1, 2)),
            "priority": draw(st.sampled_from(["train", "inference"])),
        }
        if kind == "whole":
            j["gpus_per_pod"] = draw(st.integers(0, 2))
            if draw(st.booleans()):
                j["cpu_per_pod"] = draw(st.sampled_from([4, 8, 12]))
                j["memory_per_pod"] = draw(st.sampled_from(["32Gi", "96Gi"]))
        elif kind == "mig":
            j["gpus_per_pod"] = draw(st.integers(1, 2))
            j["mig_profile"] = draw(st.sampled_from(PROFILES))
        elif kind == "fraction":
            j["gpus_per_pod"] = draw(st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.7]))
        else:
            j["gpu_memory"] = draw(st.sampled_from(["4Gi", "10Gi", "20Gi", "30Gi", "60Gi"]))
        if draw(st.booleans()):
            j["runtime"] = f"{draw(st.integers(5, 60))}m"
        jobs.append(j)
    events = []
    for _ in range(draw(st.integers(0, 2))):
        layout = draw(layouts().filter(fitting))
        events.append({"at": f"{draw(st.integers(5, 80))}m", "mig": {"node": "mig-01", "layout": layout}})
    return {
        "format": 1,
        "name": "prop-sharing",
        "start": "2026-11-29T00:00:00Z",
        "duration": "90m",
        "seed": draw(st.integers(0, 1000)),
        "cluster": {"name": "c", "scheduler": scheduler, "nodepools": pools},
        "departments": departments,
        "projects": projects,
        "jobs": jobs,
        "events": events,
    }


def check(world: World) -> None:
    for node in world.nodes.values():
        for g in node.gpus:
            total = sum(g.shares.values())
            assert total <= 1 + 1e-6, (node.name, g.index, g.shares)
            mem = sum(
                world.pods[k].gpu_memory_mib or (f * node.gpu_memory_mib)
                for k, f in g.shares.items()
                if k in world.pods
            )
            assert mem <= node.gpu_memory_mib + 1, (node.name, g.index, mem)
            assert bool(g.shares) == (g.reservation is not None), (node.name, g.index)
            assert not (g.shares and g.pod), (node.name, g.index)
            if g.mig:
                compute = sum(i.compute_slices for i in g.mig)
                memory = sum(A100.profile(i.profile).memory_slices for i in g.mig)  # type: ignore[union-attr]
                assert compute <= A100.compute_slices and memory <= A100.memory_slices, (node.name, g.mig)
                held = [i.pod for i in g.mig if i.pod]
                assert all(world.pods[k].node == node.name for k in held if k in world.pods)
        if node.mig_layout and node.mig_state == "success":
            assert layout_problem(A100, node.mig_layout) is None
    used = node_requests(world)
    for name, (cpu, mem) in used.items():
        node = world.nodes[name]
        if node.cpu_millis is not None:
            assert cpu <= node.cpu_millis, (name, cpu)
        if node.memory_bytes is not None:
            assert mem <= node.memory_bytes, (name, mem)
    alloc, _np = usage(world)
    for d in world.departments.values():
        if d.limit_gpus is None:
            continue
        total = sum(alloc[p.name] for p in world.projects.values() if p.department == d.name)
        assert total <= d.limit_gpus + 1e-6, (d.name, total, d.limit_gpus)
    # Reclaim compares queues where they diverge: the victim's queue at that level was over its quota.
    for p in world.preemptions:
        if p["kind"] == "reclaim" and "compared_at" in p:
            assert p["victim_queue_allocated"] > p["victim_queue_quota"], p
    # A department's projects never get more fair share together than the department's limit lets them.
    if world.scheduler == "kai":
        for d in world.departments.values():
            fs = sum(p.fair_share_gpus for p in world.projects.values() if p.department == d.name)
            if d.limit_gpus is not None:
                assert fs <= d.limit_gpus + 1e-2, (d.name, fs, d.limit_gpus)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_shares_mig_and_departments_hold_their_invariants(doc: dict) -> None:
    scenario = load_scenario(yaml.safe_dump(doc, sort_keys=False))
    world = World.from_scenario(scenario, tick_seconds=120)
    check(world)
    while world.now < world.end:
        world.advance_to(world.now + timedelta(minutes=2))
        check(world)


@settings(max_examples=200, deadline=None)
@given(layouts())
def test_a_mig_layout_is_accepted_only_when_it_fits_the_slices(layout: dict[str, int]) -> None:
    doc = {
        "format": 1,
        "name": "mig-layout",
        "duration": "1h",
        "seed": 1,
        "cluster": {
            "name": "c",
            "scheduler": "kai",
            "nodepools": [
                {
                    "name": "m",
                    "nodes": 1,
                    "gpus_per_node": 1,
                    "gpu_product": "NVIDIA-A100-SXM4-80GB",
                    "mig": layout,
                }
            ],
        },
        "projects": [{"name": "p", "quota": {"gpu": 1}}],
    }
    compute = sum(A100.profile(n).compute_slices * c for n, c in layout.items())  # type: ignore[union-attr]
    memory = sum(A100.profile(n).memory_slices * c for n, c in layout.items())  # type: ignore[union-attr]
    try:
        s = load_scenario(yaml.safe_dump(doc))
    except ScenarioError as exc:
        assert compute > 7 or memory > 8, exc
        return
    assert compute <= 7 and memory <= 8
    world = World.from_scenario(s)
    gpu = world.nodes["m-01"].gpus[0]
    assert sorted(i.profile for i in gpu.mig) == sorted(n for n, c in layout.items() for _ in range(c))
