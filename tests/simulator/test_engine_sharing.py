"""The engine with GPU sharing, MIG, CPU/memory and departments: placements, objects and the schedulers' words."""

from __future__ import annotations

from datetime import timedelta

import yaml

from simulator import World, load_scenario
from simulator.kube import build_context, resources


def world(doc: dict) -> World:
    base = {"format": 1, "name": "t", "start": "2026-11-29T00:00:00Z", "duration": "2h", "seed": 4}
    return World.from_scenario(load_scenario(yaml.safe_dump({**base, **doc}, sort_keys=False)))


def pool(name: str, product: str, gpus: int, **extra: object) -> dict:
    return {"name": name, "nodes": 1, "gpus_per_node": gpus, "gpu_product": product, **extra}


def job(name: str, project: str = "p", submit: str = "1m", pods: int = 1, **extra: object) -> dict:
    return {"name": name, "project": project, "submit": submit, "pods": pods, **extra}


def rendered(w: World, kind: str) -> dict:
    return {key: render() for key, _sig, render, *_ in resources(build_context(w))[kind]}


def test_kai_packs_shares_onto_one_gpu_behind_a_reservation_pod() -> None:
    w = world(
        {
            "cluster": {
                "name": "c",
                "scheduler": "kai",
                "nodepools": [pool("l40s", "NVIDIA-L40S", 2, sharing=True)],
            },
            "projects": [{"name": "p", "quota": {"gpu": 2}}],
            "jobs": [
                job("a", gpus_per_pod=0.5, runtime="20m"),
                job("b", gpus_per_pod=0.25),
                job("c", gpus_per_pod=0.5),
                job("m", gpu_memory="60Gi"),
            ],
        }
    )
    w.advance_to(w.start + timedelta(minutes=3))
    g0, g1 = w.nodes["l40s-01"].gpus
    assert sorted(g0.shares.values()) == [0.25, 0.5] and sorted(g1.shares.values()) == [0.5]
    assert g0.reservation and g1.reservation and g0.pod is None
    assert w.jobs["m"].condition_message == (
        "PodSchedulingErrors: Resources were not found for pod p/"
        f"{w.pods_of(w.jobs['m'])[0].name} due to: no nodes with enough resources were found: "
        "1 node(s) didn't have enough resources: GPU memory.."  # KAI doubles the period
    )
    pods = rendered(w, "pods")
    res = pods[("runai-reservation", g0.reservation.split("/")[1])]
    assert res["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"] == g0.uuid
    assert res["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    a = pods[("p", w.pods_of(w.jobs["a"])[0].name)]
    assert a["metadata"]["annotations"]["gpu-fraction"] == "0.5"
    assert a["metadata"]["labels"]["runai-gpu-group"] == res["metadata"]["labels"]["runai-gpu-group"]
    assert "nvidia.com/gpu" not in a["spec"]["containers"][0]["resources"]["requests"]
    assert w.projects["p"].allocated_gpus == 1.25
    # the last share leaving a GPU takes its reservation pod along
    w.advance_to(w.start + timedelta(minutes=40))
    held = {i for i, g in enumerate(w.nodes["l40s-01"].gpus) if g.reservation}
    assert len(w.reservations) == len(held)


def test_a_share_that_fits_nowhere_gets_kais_gpus_reason() -> None:
    w = world(
        {
            "cluster": {
                "name": "c",
                "scheduler": "kai",
                "nodepools": [pool("l40s", "NVIDIA-L40S", 1, sharing=True)],
            },
            "projects": [{"name": "p", "quota": {"gpu": 2}}],
            "jobs": [job("a", gpus_per_pod=0.7), job("b", submit="2m", gpus_per_pod=0.5)],
        }
    )
    w.advance_to(w.start + timedelta(minutes=3))
    assert "1 node(s) didn't have enough resources: GPUs." in w.jobs["b"].condition_message


def test_cpu_and_memory_take_part_in_the_fit_in_both_schedulers_words() -> None:
    for scheduler, words in (
        (
            "kai",
            "1 node(s) didn't have enough resources: CPU cores. \n1 node(s) didn't have enough resources: memory.",
        ),
        ("kueue", "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."),
    ):
        w = world(
            {
                "cluster": {
                    "name": "c",
                    "scheduler": scheduler,
                    "nodepools": [pool("h100", "NVIDIA-H100-80GB-HBM3", 8, cpu=32, memory="256Gi")],
                },
                "projects": [{"name": "p", "quota": {"gpu": 8}}],
                "jobs": [
                    job("a", gpus_per_pod=2, cpu_per_pod=24, memory_per_pod="200Gi"),
                    job("b", submit="2m", gpus_per_pod=2, cpu_per_pod=16, memory_per_pod="100Gi"),
                ],
            }
        )
        w.advance_to(w.start + timedelta(minutes=4))
        assert w.jobs["a"].state == "Running" and w.jobs["b"].state == "Pending"
        pod = w.pods_of(w.jobs["b"])[0]
        assert words in pod.scheduled_message, pod.scheduled_message
        node = rendered(w, "nodes")[("", "h100-01")]
        assert (
            node["status"]["allocatable"]["cpu"] == "32"
            and node["status"]["allocatable"]["memory"] == "268435456Ki"
        )


def test_mig_resources_labels_and_a_repartition_that_evicts_first() -> None:
    w = world(
        {
            "cluster": {
                "name": "c",
                "scheduler": "kai",
                "nodepools": [pool("a100", "NVIDIA-A100-SXM4-80GB", 2, mig={"3g.40gb": 2})],
            },
            "projects": [{"name": "p", "quota": {"gpu": 12}}],
            "jobs": [
                job("a", gpus_per_pod=3, mig_profile="3g.40gb"),
                job("b", submit="2m", gpus_per_pod=2, mig_profile="3g.40gb"),
            ],
            "events": [
                {"at": "30m", "mig": {"node": "a100-01", "layout": {"1g.10gb": 7}}, "actor": "node-ops"}
            ],
        }
    )
    w.advance_to(w.start + timedelta(minutes=3))
    assert w.jobs["a"].state == "Running" and w.projects["p"].allocated_gpus == 9  # 3 instances of "3g"
    assert (
        "node(s) didn't have enough of mig profile: nvidia.com/mig-3g.40gb" in w.jobs["b"].condition_message
    )
    node = rendered(w, "nodes")[("", "a100-01")]
    assert node["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "4"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-3g.40gb"
    w.advance_to(w.start + timedelta(minutes=31))
    n = w.nodes["a100-01"]
    assert n.labels["nvidia.com/mig.config.state"] == "pending" and n.mig_allocatable() == {"1g.10gb": 0}
    assert w.jobs["a"].state == "Pending" and any(p.reason == "Evicted" for p in w.deleted_pods)
    w.advance_to(w.start + timedelta(minutes=34))
    assert n.labels["nvidia.com/mig.config.state"] == "success" and n.mig_allocatable() == {"1g.10gb": 14}
    assert n.labels["nvidia.com/mig.config"] == "all-1g.10gb"
    assert [c.field for c in w.changes if c.kind == "node"] == ["mig.config"]


def test_dcgm_reports_each_mig_instance_with_its_pod() -> None:
    from simulator.prometheus.series import DcgmSource

    w = world(
        {
            "cluster": {
                "name": "c",
                "scheduler": "kai",
                "dcgm_labels": "scraped",
                "nodepools": [pool("a100", "NVIDIA-A100-SXM4-80GB", 1, mig={"3g.40gb": 1, "1g.10gb": 4})],
            },
            "projects": [{"name": "p", "quota": {"gpu": 8}}],
            "jobs": [job("a", gpus_per_pod=1, mig_profile="3g.40gb", sm_activity=0.8)],
        }
    )
    w.advance_to(w.start + timedelta(minutes=5))
    src = DcgmSource(w, "scraped")
    entities = src.gpus()
    assert [(g.instance.gi_id, g.instance.profile) for _n, g in entities] == [
        (1, "3g.40gb"),
        (2, "1g.10gb"),
        (3, "1g.10gb"),
        (4, "1g.10gb"),
        (5, "1g.10gb"),
    ]
    node, first = entities[0]
    labels = {**src.static_labels(node, first), **src.pod_labels(node, first, w.now)}
    assert labels["GPU_I_PROFILE"] == "3g.40gb" and labels["GPU_I_ID"] == "1"
    assert labels["exported_pod"] == w.pods_of(w.jobs["a"])[0].name
    assert src.value(node, first, "DCGM_FI_PROF_SM_ACTIVE", w.now.timestamp()) > 0.5
    assert src.value(node, entities[1][1], "DCGM_FI_PROF_SM_ACTIVE", w.now.timestamp()) == 0.0


def test_a_department_at_its_limit_blocks_a_project_under_its_own_quota() -> None:
    doc = {
        "cluster": {"name": "c", "scheduler": "kai", "nodepools": [pool("h100", "NVIDIA-H100-80GB-HBM3", 8)]},
        "departments": [{"name": "research", "quota": {"gpu": 4}, "limit": {"gpu": 4}}],
        "projects": [
            {"name": "vision", "department": "research", "quota": {"gpu": 4}},
            {"name": "nlp", "department": "research", "quota": {"gpu": 4}},
        ],
        "jobs": [
            job("a", project="nlp", gpus_per_pod=4),
            job("b", project="vision", submit="2m", gpus_per_pod=2),
        ],
    }
    w = world(doc)
    w.advance_to(w.start + timedelta(minutes=4))
    assert w.jobs["b"].state == "Pending"
    assert w.jobs["b"].condition_message == (
        "OverLimit: research quota has reached the allowable limit of GPUs. Limit is 4 GPUs, currently 4 GPUs "
        "allocated and workload requested 2 GPUs."
    )
    queues = {q["metadata"]["name"]: q for q in rendered(w, "queues").values()}
    assert queues["vision"]["spec"]["parentQueue"] == "research"
    assert queues["research"]["spec"]["resources"]["gpu"] == {"quota": 4, "limit": 4, "overQuotaWeight": 1}
    assert queues["research"]["status"]["childQueues"] == ["nlp", "vision"]
    # Kueue: the department's Cohort caps its ClusterQueues, with Kueue's own message
    doc["cluster"]["scheduler"] = "kueue"
    w = world(doc)
    w.advance_to(w.start + timedelta(minutes=4))
    assert (
        w.jobs["b"].state == "Pending"
        and "insufficient unused quota for nvidia.com/gpu" in w.jobs["b"].condition_message
    )
    cohorts = {c["metadata"]["name"]: c for c in rendered(w, "cohorts").values()}
    res = cohorts["research"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert cohorts["research"]["spec"]["parentName"] == "gpu-cohort" and res["borrowingLimit"] == "0"
    cq = {c["metadata"]["name"]: c for c in rendered(w, "clusterqueues").values()}
    assert cq["vision"]["spec"]["cohort"] == "research"


def test_an_xid_on_a_shared_gpu_kills_every_share_on_it() -> None:
    w = world(
        {
            "cluster": {
                "name": "c",
                "scheduler": "kai",
                "nodepools": [pool("l40s", "NVIDIA-L40S", 1, sharing=True)],
            },
            "projects": [{"name": "p", "quota": {"gpu": 2}}],
            "jobs": [job("a", gpus_per_pod=0.5), job("b", gpus_per_pod=0.5)],
            "events": [{"at": "10m", "xid": {"node": "l40s-01", "gpu": 0, "code": 79}}],
        }
    )
    w.advance_to(w.start + timedelta(minutes=9))
    assert len(w.nodes["l40s-01"].gpus[0].shares) == 2
    w.advance_to(w.start + timedelta(minutes=11))
    g = w.nodes["l40s-01"].gpus[0]
    assert not g.shares and g.reservation is None and not w.reservations
    assert {w.jobs["a"].state, w.jobs["b"].state} == {"Pending"}
