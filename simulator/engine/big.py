"""A big synthetic world for the simulator bench (``bench/sim.py``): 1,000 nodes, 8,000 GPUs, 20,000 pods.

Built from a programmatic scenario and advanced two ticks, so every object went
through the real scheduler: 8,000 single-GPU pods run, the rest wait with
KAI's OverLimit reason (each project's limit is its share of the cluster).
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..scenario import ClusterSpec, JobSpec, NodePoolSpec, ProjectSpec, Scenario
from ..scenario.model import GPU_MEMORY_MIB
from .world import World

PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H200", "NVIDIA-L40S")


def big_scenario(
    *,
    nodes: int = 1000,
    gpus_per_node: int = 8,
    pods: int = 20000,
    projects: int = 20,
    pools: int = 4,
    seed: int = 0,
) -> Scenario:
    per_pool = [nodes // pools + (1 if i < nodes % pools else 0) for i in range(pools)]
    nodepools = tuple(
        NodePoolSpec(
            name=f"pool{i + 1}",
            nodes=n,
            gpus_per_node=gpus_per_node,
            gpu_product=PRODUCTS[i % len(PRODUCTS)],
            gpu_memory_mib=GPU_MEMORY_MIB[PRODUCTS[i % len(PRODUCTS)]],
        )
        for i, n in enumerate(per_pool)
    )
    share = nodes * gpus_per_node // projects
    projs = tuple(
        ProjectSpec(f"team-{i + 1:02d}", f"team-{i + 1:02d}", share, share) for i in range(projects)
    )
    jobs = tuple(
        JobSpec(
            name=f"job-{i + 1:05d}",
            project=projs[i % projects].name,
            submit_s=0,
            pods=1,
            gpus_per_pod=1,
            runtime_s=8 * 3600,
            sm_activity=0.3 + (i % 7) / 10,
        )
        for i in range(pods)
    )
    return Scenario(
        format=1,
        name="big-synthetic",
        summary="Bench world",
        start=datetime(2026, 11, 29, tzinfo=UTC),
        duration_s=8 * 3600,
        seed=seed,
        cluster=ClusterSpec("gpu-big", "kai", "classic", nodepools),
        projects=projs,
        jobs=jobs,
        generate=(),
        events=(),
        alerts=(),
        expect=(),
    )


def build_big_world(**kwargs: int) -> World:
    """The bench world after two ticks, its placed pods Running (arguments as ``big_scenario``)."""
    world = World.from_scenario(big_scenario(**kwargs))
    world.step()
    world.step()
    return world
