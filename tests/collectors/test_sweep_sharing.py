"""End to end over real HTTP: GPU shares, MIG instances and departments as the collectors record them.

The simulator serves KAI GPU sharing (reservation pods, gpu-fraction / gpu-memory, runai-gpu-group), MIG
instances with per-instance DCGM series, and departments (KAI parent queues, Kueue Cohorts); the inventory as
of t must say which pod holds which share or instance, count fractions, and link projects to departments.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from collectors import inventory
from collectors.gpu_slices import slices_at
from collectors.models import Entity, GpuSlice
from collectors.sweep import sweep_cluster
from simulator.engine.world import World
from simulator.scenario import load_scenario
from tests.collectors.simhelpers import register, served

pytestmark = pytest.mark.django_db

SCENARIO = """
format: 1
name: collectors-sharing-{scheduler}
start: 2026-11-29T00:00:00Z
duration: 3h
seed: 9
cluster:
  name: gpu-prod
  scheduler: {scheduler}
  dcgm_labels: {labels}
  nodepools:
    - {{name: a100, nodes: 1, gpus_per_node: 2, gpu_product: NVIDIA-A100-SXM4-80GB, mig: {{3g.40gb: 1, 2g.20gb: 2}}}}
    - {{name: h100, nodes: 1, gpus_per_node: 4, gpu_product: NVIDIA-H100-80GB-HBM3, cpu: 64, memory: 512Gi}}
{shared_pool}
departments:
  - {{name: research, quota: {{gpu: 10}}, limit: {{gpu: 12}}}}
projects:
  - {{name: vision, department: research, quota: {{gpu: 4}}}}
  - {{name: nlp, department: research, quota: {{gpu: 4}}}}
  - {{name: ops, quota: {{gpu: 2}}}}
jobs:
  - {{name: mig-a, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 1, mig_profile: 3g.40gb}}
  - {{name: mig-b, project: nlp, submit: 1m, pods: 2, gpus_per_pod: 1, mig_profile: 2g.20gb}}
  - {{name: whole, project: ops, submit: 1m, pods: 1, gpus_per_pod: 2, cpu_per_pod: 16, memory_per_pod: 64Gi}}
{shared_jobs}
events:
  - {{at: 90m, mig: {{node: a100-01, layout: {{1g.10gb: 7}}}}, actor: node-ops}}
"""
SHARED_POOL = "    - {name: l40s, nodes: 1, gpus_per_node: 2, gpu_product: NVIDIA-L40S, sharing: true}"
SHARED_JOBS = """\
  - {name: nb-a, project: vision, submit: 1m, pods: 1, gpus_per_pod: 0.5}
  - {name: nb-b, project: vision, submit: 2m, pods: 1, gpus_per_pod: 0.25}
  - {name: embed, project: ops, submit: 2m, pods: 1, gpu_memory: 10Gi}"""


def world(scheduler: str, labels: str) -> World:
    kai = scheduler == "kai"
    text = SCENARIO.format(
        scheduler=scheduler,
        labels=labels,
        shared_pool=SHARED_POOL if kai else "",
        shared_jobs=SHARED_JOBS if kai else "",
    )
    return World.from_scenario(load_scenario(text))


def _gpu(cluster, node: str, index: int, t) -> Entity:  # type: ignore[no-untyped-def]
    for v in inventory.as_of(cluster, "gpu", t):
        if v.node == node and v.state["index"] == index:
            return v.entity
    raise AssertionError(f"no GPU {node}/{index}")


@pytest.mark.parametrize("labels", ["classic", "current", "scraped"])
def test_it_records_shares_and_mig_instances_with_their_pods(labels: str) -> None:
    w = world("kai", labels)
    with served(w) as sim:
        cluster = register(sim)
        t = w.start + timedelta(minutes=20)
        sim.advance_to(t)
        summary = sweep_cluster(cluster.name, t)
        assert summary.errors == [] and summary.skipped_kinds == []
        # MIG: every instance of every GPU, with the pod the simulator put on it
        for g in w.nodes["a100-01"].gpus:
            got = [(s.gi_id, s.profile, s.pod) for s in slices_at(_gpu(cluster, "a100-01", g.index, t), t)]
            assert got == [(i.gi_id, i.profile, i.pod or "") for i in g.mig]
        assert GpuSlice.objects.filter(kind="mig").exclude(pod="").count() == 3
        # shares: the pods on each shared GPU, their fractions, and KAI's reservation pod holding it
        shared = [g for g in w.nodes["l40s-01"].gpus if g.shares]
        assert shared
        for g in shared:
            rows = [s for s in slices_at(_gpu(cluster, "l40s-01", g.index, t), t) if s.kind == "share"]
            assert {s.pod: s.fraction for s in rows} == pytest.approx(g.shares, abs=1e-3)
            assert {s.reservation for s in rows} == {g.reservation}
            v = _gpu(cluster, "l40s-01", g.index, t).as_of(t)
            assert v.state["reservation"] == g.reservation and v.pod == g.reservation
        # quotas count fractions: a pod's and a project's units
        pods = {v.entity.name.rsplit("-", 2)[0]: v for v in inventory.as_of(cluster, "pod", t) if v.job}
        assert pods["nb-a"].gpu_units == 0.5 and pods["nb-b"].gpu_units == 0.25
        assert pods["embed"].gpu_units == pytest.approx(10240 / 46068, abs=1e-3)
        assert pods["mig-a"].gpu_units == 3 and pods["mig-a"].state["mig"] == {"3g.40gb": 1}
        # a repartition: the old instances close, the new ones open free
        t2 = w.start + timedelta(minutes=100)
        sim.advance_to(t2)
        sweep_cluster(cluster.name, t2)
        after = slices_at(_gpu(cluster, "a100-01", 0, t2), t2)
        assert [s.profile for s in after] == ["1g.10gb"] * 7
        assert [s.profile for s in slices_at(_gpu(cluster, "a100-01", 0, t2), t)] == [
            "3g.40gb",
            "2g.20gb",
            "2g.20gb",
        ]
        node = inventory.as_of(cluster, "node", t2).get(entity__name="a100-01")
        assert (
            node.state["mig"]["config"] == "all-1g.10gb"
            and node.state["allocatable"]["nvidia.com/mig-1g.10gb"] == 14
        )


@pytest.mark.parametrize("scheduler", ["kai", "kueue"])
def test_departments_are_entities_linked_from_their_projects_and_queues(scheduler: str) -> None:
    w = world(scheduler, "classic")
    with served(w) as sim:
        cluster = register(sim)
        t = w.start + timedelta(minutes=20)
        sim.advance_to(t)
        summary = sweep_cluster(cluster.name, t)
        assert summary.errors == [] and summary.skipped_kinds == []
        depts = {v.entity.name: v for v in inventory.as_of(cluster, "department", t)}
        assert set(depts) == {"research"}
        d = depts["research"]
        assert d.state["projects"] == ["nlp", "vision"] and d.state["scheduler"] == scheduler
        assert (d.state["quota_gpus"], d.state["limit_gpus"]) == (10, 12)
        projects = {v.entity.name: v.state.get("department") for v in inventory.as_of(cluster, "project", t)}
        assert projects == {"vision": "research", "nlp": "research", "ops": None}
        queues = {v.entity.name: v.state.get("department") for v in inventory.as_of(cluster, "queue", t)}
        assert queues["vision"] == "research" and queues["ops"] is None
        sim_used = w.departments["research"].allocated_gpus
        if scheduler == "kai":
            assert d.gpu_units == pytest.approx(sim_used)
