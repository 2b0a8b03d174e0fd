"""Mapping GPU shares, MIG instance series and departments (pure functions, real label and object shapes)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from collectors import mapping
from collectors.sources.prometheus import Series

UUID = "GPU-5c5b1e1a-6b1f-4ad8-9c1e-0d3b8f1b2a77"
NODE = {
    "a100-01": {"addresses": {"InternalIP": "10.0.1.5"}, "labels": {"nvidia.com/mig-3g.40gb.memory": "40192"}}
}


def _mig_series(variant: str, gi: int, profile: str, pod: str | None) -> Series:
    """One DCGM_FI_DEV_GPU_UTIL series of a MIG instance, as dcgm-exporter writes it in each label variant."""
    labels = {
        "__name__": "DCGM_FI_DEV_GPU_UTIL",
        "gpu": "0",
        "UUID": UUID,
        "device": "nvidia0",
        "modelName": "NVIDIA A100-SXM4-80GB",
        "GPU_I_PROFILE": profile,
        "GPU_I_ID": str(gi),
        "DCGM_FI_DRIVER_VERSION": "550.127.08",
        "instance": "10.0.1.5:9400",
        "job": "dcgm-exporter",
    }
    if variant == "current":
        labels["hostname"] = "a100-01"
    else:
        labels["Hostname"] = "a100-01"
    if variant == "scraped":
        labels.update(
            {
                "namespace": "gpu-operator",
                "pod": "nvidia-dcgm-exporter-x7k2p",
                "container": "nvidia-dcgm-exporter",
            }
        )
        if pod:
            labels.update({"exported_namespace": "nlp", "exported_pod": pod, "exported_container": "main"})
    elif pod:
        labels.update({"namespace": "nlp", "pod": pod, "container": "main"})
    return Series(labels=labels, points=[(datetime(2026, 11, 29, tzinfo=UTC), 12.0)])


@pytest.mark.parametrize("variant", ["classic", "current", "scraped"])
def test_it_maps_every_mig_instance_and_its_pod_in_every_label_variant(variant: str) -> None:
    series = [
        _mig_series(variant, 1, "3g.40gb", "train-0-abcde"),
        _mig_series(variant, 2, "2g.20gb", None),
        _mig_series(variant, 3, "2g.20gb", "eval-0-fghij"),
    ]
    (gpu,) = mapping.map_gpus(series, {}, nodes=NODE)
    assert gpu.state["node"] == "a100-01" and gpu.state["index"] == 0
    assert gpu.state["mig"] == [
        {"gi_id": 1, "profile": "3g.40gb", "pod": "nlp/train-0-abcde", "memory_mib": 40192},
        {"gi_id": 2, "profile": "2g.20gb", "pod": None, "memory_mib": None},
        {"gi_id": 3, "profile": "2g.20gb", "pod": "nlp/eval-0-fghij", "memory_mib": None},
    ]


def test_a_gpu_without_mig_has_no_instances() -> None:
    s = _mig_series("classic", 1, "3g.40gb", None)
    for k in ("GPU_I_PROFILE", "GPU_I_ID"):
        del s.labels[k]
    (gpu,) = mapping.map_gpus([s], {}, nodes=NODE)
    assert "mig" not in gpu.state


def _pod(ns: str, name: str, node: str, annotations: dict, labels: dict, requests: dict) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": name,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "kai-scheduler",
            "containers": [
                {"name": "main", "image": "x", "resources": {"requests": requests, "limits": requests}}
            ],
        },
        "status": {"phase": "Running"},
    }


def test_it_finds_the_gpu_of_each_share_through_the_reservation_pod() -> None:
    group = "7d0e3c3a-1f7b-4b53-bc1e-2a5c9c1d0f11"
    pods = [
        mapping.map_pod(
            _pod(
                "runai-reservation",
                "gpu-reservation-l40s-01-x2k9d",
                "l40s-01",
                {"run.ai/reserve_for_gpu_index": UUID},
                {"runai-gpu-group": group, "app": "runai-reservation"},
                {"nvidia.com/gpu": "1"},
            )
        ),
        mapping.map_pod(
            _pod(
                "vision",
                "nb-0-aaaaa",
                "l40s-01",
                {"gpu-fraction": "0.5", "runai-gpu": "0"},
                {"runai-gpu-group": group, "runai/queue": "vision"},
                {"cpu": "8"},
            )
        ),
        mapping.map_pod(
            _pod(
                "ops",
                "embed-0-bbbbb",
                "l40s-01",
                {"gpu-memory": "10240", "runai-gpu": "0"},
                {"runai-gpu-group": group, "runai/queue": "ops"},
                {"cpu": "8"},
            ),
            gpu_memory_mib=46068,
        ),
    ]
    assert pods[1].state["gpu_units"] == 0.5 and pods[1].state["gpus"] == 0
    assert pods[2].state["gpu_units"] == pytest.approx(10240 / 46068, abs=1e-4)
    assert pods[0].state["reservation_for"] == UUID
    shares = mapping.gpu_shares(pods, {"l40s-01": 46068})
    assert shares == {
        UUID: {
            "reservation": "runai-reservation/gpu-reservation-l40s-01-x2k9d",
            "shares": [
                {
                    "pod": "ops/embed-0-bbbbb",
                    "fraction": pytest.approx(0.2223, abs=1e-4),
                    "memory_mib": 10240,
                },
                {"pod": "vision/nb-0-aaaaa", "fraction": 0.5, "memory_mib": 23034},
            ],
        }
    }


def test_a_mig_pod_counts_its_profile_units() -> None:
    obs = mapping.map_pod(
        _pod("nlp", "ft-0-ccccc", "a100-01", {}, {"runai/queue": "nlp"}, {"nvidia.com/mig-3g.40gb": "2"})
    )
    assert obs.state["mig"] == {"3g.40gb": 2} and obs.state["gpu_units"] == 6 and obs.state["gpus"] == 0


def test_kai_parent_queues_with_projects_are_departments() -> None:
    def q(name: str, parent: str | None, quota: int, limit: int = -1, alloc: str = "0") -> dict:
        spec: dict = {"resources": {"gpu": {"quota": quota, "limit": limit}}}
        if parent:
            spec["parentQueue"] = parent
        return {
            "metadata": {"name": name, "uid": name},
            "spec": spec,
            "status": {"allocated": {"nvidia.com/gpu": alloc}},
        }

    queues = [
        q("default-parent-queue", None, -1),
        q("research", "default-parent-queue", 24, 32, "10.5"),
        q("vision", "research", 12),
        q("nlp", "research", 12),
        q("serving", "default-parent-queue", 8),
    ]
    (d,) = mapping.map_kai_departments(queues)
    assert d.name == "research" and d.state["projects"] == ["nlp", "vision"]
    assert (d.state["quota_gpus"], d.state["limit_gpus"], d.state["allocated_gpus"]) == (24, 32, 10.5)


def test_kueue_cohorts_with_cluster_queues_are_departments() -> None:
    def cq(name: str, cohort: str, quota: str, used: str) -> dict:
        return {
            "metadata": {"name": name},
            "spec": {
                "cohort": cohort,
                "resourceGroups": [
                    {
                        "flavors": [
                            {"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}
                        ]
                    }
                ],
            },
            "status": {
                "flavorsUsage": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "total": used}]}]
            },
        }

    cohort = {
        "metadata": {"name": "research", "uid": "u"},
        "spec": {
            "parentName": "gpu-cohort",
            "resourceGroups": [
                {
                    "flavors": [
                        {
                            "name": "f",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "8"}
                            ],
                        }
                    ]
                }
            ],
        },
    }
    (d,) = mapping.map_kueue_departments(
        [cohort], [cq("vision", "research", "12", "4"), cq("nlp", "research", "12", "6")]
    )
    assert (d.state["quota_gpus"], d.state["limit_gpus"], d.state["allocated_gpus"]) == (24, 32, 10.0)
    assert d.state["parent"] == "gpu-cohort" and d.state["queues"] == ["nlp", "vision"]
