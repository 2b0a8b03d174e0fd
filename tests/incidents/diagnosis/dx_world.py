"""Hand-built DiagnosisInput worlds in the docs/inventory.md state shapes, for the pure check tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from incidents.diagnosis.types import ChangeRec, DiagnosisInput, EntityState, Ref, Series

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)
T = T0 + timedelta(hours=3)


def node(
    name: str,
    gpus: int = 8,
    *,
    allocatable: int | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    taints: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    pool: str = "h100",
    capacity: int | None = None,
) -> EntityState:
    cap = gpus if capacity is None else capacity
    lab = {
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": str(gpus),
        **(labels or {}),
    }
    return EntityState(
        "node",
        name,
        state={
            "ready": ready,
            "ready_reason": "KubeletReady" if ready else "NodeStatusUnknown",
            "unschedulable": unschedulable,
            "taints": taints or [],
            "labels": lab,
            "gpu_product": "NVIDIA-H100-80GB-HBM3",
            "nodepool": pool,
            "capacity": {"nvidia.com/gpu": cap},
            "allocatable": {"nvidia.com/gpu": cap if allocatable is None else allocatable},
        },
        valid_from=T0,
    )


def job(
    name: str,
    project: str = "vision",
    *,
    pods: int = 1,
    gpus_per_pod: int = 8,
    phase: str = "Pending",
    submitted: datetime = T0,
    priority_class: str = "train",
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    message: str = "",
    valid_from: datetime = T0,
) -> EntityState:
    return EntityState(
        "job",
        name,
        project,
        state={
            "phase": phase,
            "queue": project,
            "project": project,
            "pods": pods,
            "gpus_per_pod": gpus_per_pod,
            "gpus_total": pods * gpus_per_pod,
            "image": "registry.local/x:1",
            "priority_class": priority_class,
            "preemptible": priority_class != "inference",
            "node_selector": node_selector or {},
            "tolerations": tolerations or [],
            "submitted": submitted.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "active": 0 if phase == "Pending" else pods,
            "scheduling": {
                "source": "kai",
                "type": "UnschedulableOnNodePool",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "since": "2026-11-29T00:00:00Z",
            }
            if message
            else None,
        },
        valid_from=valid_from,
    )


def pod(
    name: str,
    job_name: str,
    project: str,
    *,
    node_name: str = "",
    gpus: int = 8,
    phase: str = "Running",
    containers: list[dict[str, Any]] | None = None,
    priority_class: str = "train",
) -> EntityState:
    return EntityState(
        "pod",
        name,
        project,
        state={
            "phase": phase,
            "node": node_name or None,
            "job": job_name,
            "queue": project,
            "project": project,
            "gpus": gpus,
            "priority_class": priority_class,
            "node_selector": {},
            "tolerations": [],
            "containers": containers
            or [
                {
                    "name": "main",
                    "image": "registry.local/x:1",
                    "gpus": gpus,
                    "state": {},
                    "last_state": {},
                    "restart_count": 0,
                    "ready": True,
                }
            ],
        },
        valid_from=T0,
    )


def limited(
    name: str, project: str, node_name: str, gpus: int, limit_h: float, minutes: int = 0
) -> tuple[EntityState, EntityState]:
    """A job running since ``minutes`` after T0 on ``node_name`` with a runtime limit of ``limit_h`` hours (its
    end known to the replay), and its one pod: (job, pod)."""
    j = job(name, project, phase="Running", gpus_per_pod=gpus)
    at = (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    j.state.update(started=at, submitted=at, active_deadline_seconds=limit_h * 3600)
    return j, pod(f"{name}-0", name, project, node_name=node_name, gpus=gpus)


def queue(name: str, quota: int | None, limit: int | None = None, priority: int = 0) -> EntityState:
    return EntityState(
        "queue",
        name,
        state={
            "project": name,
            "priority": priority,
            "quota_gpus": quota,
            "limit_gpus": limit,
            "over_quota_weight": 1,
            "scheduler": "kai",
        },
        valid_from=T0,
    )


def gpu(
    uuid: str,
    node_name: str,
    index: int,
    *,
    pod_ref: str = "",
    present: bool = True,
    xid: int = 0,
    dbe: int = 0,
) -> EntityState:
    return EntityState(
        "gpu",
        uuid,
        state={
            "node": node_name,
            "index": index,
            "uuid": uuid,
            "model": "NVIDIA H100 80GB HBM3",
            "present": present,
            "pod": pod_ref,
            "namespace": pod_ref.split("/")[0] if pod_ref else "",
            "xid_last": xid,
            "ecc_dbe_total": dbe,
            "ecc_sbe_total": 0,
        },
        valid_from=T0,
    )


def series(
    metric: str,
    uuid: str,
    node_name: str,
    values: list[float],
    *,
    start: datetime = T0,
    step: timedelta = timedelta(minutes=5),
    obs_id: int | None = None,
) -> Series:
    return Series(
        metric, uuid, node_name, [(start + i * step, v) for i, v in enumerate(values)], obs_id=obs_id
    )


def change(
    kind: str, name: str, field: str, old: Any, new: Any, at: datetime, actor: str = "", namespace: str = ""
) -> ChangeRec:
    return ChangeRec(
        time=at, entity=Ref(kind, name, namespace), field=field, old=old, new=new, actor=actor, source="k8s"
    )


def world(
    *, subjects: list[Ref], t: datetime = T, onset: datetime | None = None, **kinds: Any
) -> DiagnosisInput:
    return DiagnosisInput(
        t=t, onset=onset or t - timedelta(minutes=15), cluster="gpu-prod", subjects=subjects, **kinds
    )
