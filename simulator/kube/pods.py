"""core/v1 Pod from the world's pod: queue labels, owner Job, container spec with GPU requests, status.

Also the container spec a Job's pod template shares. The env carries a fake
secret (WANDB_API_KEY) so the collectors' redaction is exercised.
"""

from __future__ import annotations

from typing import Any

from simulator.engine.sharing import RESERVATION_NAMESPACE, cpu_memory_request, gpu_group
from simulator.kube.context import RenderContext
from simulator.kube.object_fields import GPU, ip_for, jsonable, managed_field, stable_uid, ts
from simulator.state import SimJob, SimPod

# A fake key with a realistic shape, so that the collectors' redaction is exercised.
FAKE_WANDB_KEY = "wandb_v1_3f9c2a7e5d1b8f4a6c0e9d2b7a5f3c1e8d6b4a2f"


def queue_labels(ctx: RenderContext, project: str) -> dict[str, str]:
    if ctx.scheduler == "kai":
        return {"kai.scheduler/queue": project, "runai/queue": project}
    return {"kueue.x-k8s.io/queue-name": project}


def _memory_quantity(n: int) -> str:
    for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def _cpu_quantity(millis: int) -> str:
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def container_spec(ctx: RenderContext, job: SimJob, image: str, gpus: int | float) -> dict[str, Any]:
    cpu, mem = (
        cpu_memory_request(job)
        if hasattr(job, "mig_count")
        else (8000 * max(int(gpus), 1), 64 * 2**30 * max(int(gpus), 1))
    )
    # A KAI share asks the node for no device (the reservation pod holds it); MIG asks for its profile.
    devices: dict[str, str] = {}
    if getattr(job, "mig_profile", None):
        devices = {f"nvidia.com/mig-{job.mig_profile}": str(job.mig_count)}
    elif not getattr(job, "shared", False):
        devices = {GPU: str(int(gpus))}
    resources = {
        "requests": {"cpu": _cpu_quantity(cpu), "memory": _memory_quantity(mem), **devices},
        "limits": dict(devices),
    }
    return {
        "name": "main",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["torchrun"] if job.priority_class == "train" else ["python", "-m", "serve"],
        "args": ["--nproc-per-node", str(gpus), "/workspace/train.py"]
        if job.priority_class == "train"
        else [],
        "env": [
            {"name": "NCCL_DEBUG", "value": "WARN"},
            {"name": "PROJECT", "value": job.project},
            {"name": "WANDB_API_KEY", "value": FAKE_WANDB_KEY},
        ],
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {
                "name": "kube-api-access",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            }
        ],
    }


DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


# length: one API object as one literal, fields in the API's order
def pod(ctx: RenderContext, p: SimPod) -> dict[str, Any]:
    job = ctx.jobs.get((p.namespace, p.job))
    project = job.project if job else p.namespace
    labels = {
        "batch.kubernetes.io/job-name": p.job,
        "job-name": p.job,
        "batch.kubernetes.io/job-completion-index": str(p.index),
        **queue_labels(ctx, project),
    }
    annotations = {"batch.kubernetes.io/job-completion-index": str(p.index)}
    owner: list[dict[str, Any]] = []
    if job is not None:
        labels["controller-uid"] = job.uid
        labels["batch.kubernetes.io/controller-uid"] = job.uid
        owner = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job.name,
                "uid": job.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        if ctx.scheduler == "kai":
            annotations["pod-group-name"] = getattr(job, "podgroup", "") or f"pg-{job.name}-{job.uid}"
        # KAI GPU sharing: what the user asked (gpu-fraction or gpu-memory in MiB), and once bound the GPU
        # KAI chose (runai-gpu: its index) and the GPU group the pod shares with the reservation pod.
        if p.gpu_fraction is not None:
            annotations["gpu-fraction"] = f"{p.gpu_fraction:g}"
        if p.gpu_memory_mib is not None:
            annotations["gpu-memory"] = str(p.gpu_memory_mib)
        if p.shared and p.node and p.gpu_indices:
            gpu = ctx.nodes[p.node].gpus[p.gpu_indices[0]]
            annotations["runai-gpu"] = str(gpu.index)
            labels["runai-gpu-group"] = gpu_group(gpu)
    managed = [
        managed_field(
            "kube-controller-manager",
            "v1",
            p.created_at,
            {"f:metadata": {"f:labels": {}, "f:ownerReferences": {}}, "f:spec": {}},
        )
    ]
    if p.node:
        managed.append(
            managed_field(
                ctx.scheduler_name,
                "v1",
                p.started_at or p.created_at,
                {"f:status": {"f:conditions": {}}},
                subresource="status",
            )
        )
    if p.started_at or p.phase != "Pending":
        managed.append(
            managed_field(
                "kubelet",
                "v1",
                p.started_at or p.created_at,
                {"f:status": {"f:containerStatuses": {}}},
                subresource="status",
            )
        )
    meta: dict[str, Any] = {
        "name": p.name,
        "namespace": p.namespace,
        "uid": p.uid,
        "creationTimestamp": ts(p.created_at),
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": owner or None,
        "managedFields": managed,
    }
    if p.deleted_at is not None:
        meta["deletionTimestamp"] = ts(p.deleted_at)
        meta["deletionGracePeriodSeconds"] = 30
    spec: dict[str, Any] = {
        "containers": [container_spec(ctx, job, p.image, p.gpus_requested)] if job else [],
        "restartPolicy": "OnFailure" if job and job.priority_class == "train" else "Always",
        "schedulerName": ctx.scheduler_name,
        "priorityClassName": job.priority_class if job else None,
        "priority": (100 if job.priority_class == "inference" else 50) if job else 0,
        "preemptionPolicy": "PreemptLowerPriority",
        "nodeSelector": dict(job.node_selector) if job and job.node_selector else None,
        "tolerations": [*(dict(t) for t in (job.tolerations if job else ())), *DEFAULT_TOLERATIONS],
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
    }
    if p.node:
        spec["nodeName"] = p.node
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": pod_status(ctx, p)}


def reservation_pod(ctx: RenderContext, p: SimPod) -> dict[str, Any]:
    """KAI's GPU reservation pod: holds the whole device for the shares on it (runai-reservation namespace)."""
    node = ctx.nodes[p.node] if p.node else None
    gpu = node.gpus[p.gpu_indices[0]] if node and p.gpu_indices else None
    meta: dict[str, Any] = {
        "name": p.name,
        "namespace": RESERVATION_NAMESPACE,
        "uid": p.uid,
        "creationTimestamp": ts(p.created_at),
        "labels": {
            "app": "runai-reservation",
            "app.kubernetes.io/name": "kai-resource-reservation",
            **({"runai-gpu-group": gpu_group(gpu)} if gpu else {}),
        },
        "annotations": {"run.ai/reserve_for_gpu_index": p.reservation_for or ""},
        "managedFields": [
            managed_field("binder", "v1", p.created_at, {"f:metadata": {"f:labels": {}}, "f:spec": {}})
        ],
    }
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "resource-reservation",
                "image": p.image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "requests": {"cpu": "2m", "memory": "20Mi", GPU: "1"},
                    "limits": {GPU: "1"},
                },
                "env": [
                    {"name": "POD_NAME", "value": p.name},
                    {"name": "POD_NAMESPACE", "value": RESERVATION_NAMESPACE},
                ],
            }
        ],
        "nodeName": p.node,
        "restartPolicy": "Always",
        "schedulerName": ctx.scheduler_name,
        "serviceAccountName": "kai-resource-reservation",
        "tolerations": [{"operator": "Exists"}],
        "terminationGracePeriodSeconds": 0,
        "priorityClassName": "system-node-critical",
    }
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": pod_status(ctx, p)}


# length: the pod's status in the API's order, each condition beside what decides it
def pod_status(ctx: RenderContext, p: SimPod) -> dict[str, Any]:
    created = ts(p.created_at)
    status: dict[str, Any] = {
        "phase": p.phase,
        "qosClass": "Burstable",
        "reason": getattr(p, "reason", None),
        "message": getattr(p, "message", None),
    }
    if not p.node:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": created,
                "reason": getattr(p, "scheduled_reason", None) or "Unschedulable",
                "message": p.scheduled_message or "",
            }
        ]
        return status
    started = ts(p.started_at) if p.started_at else None
    running = p.phase == "Running" and "running" in (p.container_state or {"running": {}})
    if hasattr(p, "ready") and p.phase == "Running" and p.container_state:
        running = running and bool(p.ready)
    ready = "True" if running else "False"
    bound = ts(getattr(p, "scheduled_at", None) or p.started_at or p.created_at)
    status["conditions"] = [
        {
            "type": "PodReadyToStartContainers",
            "status": "True" if p.started_at else "False",
            "lastProbeTime": None,
            "lastTransitionTime": bound,
        },
        {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": bound},
        {
            "type": "Ready",
            "status": ready,
            "lastProbeTime": None,
            "lastTransitionTime": started or bound,
            **(
                {}
                if running
                else {"reason": "ContainersNotReady", "message": "containers with unready status: [main]"}
            ),
        },
        {
            "type": "ContainersReady",
            "status": ready,
            "lastProbeTime": None,
            "lastTransitionTime": started or bound,
            **(
                {}
                if running
                else {"reason": "ContainersNotReady", "message": "containers with unready status: [main]"}
            ),
        },
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": bound},
    ]
    status["hostIP"] = ip_for("node", p.node)
    status["hostIPs"] = [{"ip": status["hostIP"]}]
    if p.started_at:
        status["podIP"] = ip_for("pod", f"{p.namespace}/{p.name}")
        status["podIPs"] = [{"ip": status["podIP"]}]
    status["startTime"] = bound
    state = jsonable(p.container_state) if p.container_state else _default_state(p)
    last_state = jsonable(p.last_state) if p.last_state else {}
    # containerd IDs, one per container instance: the current is instance restart_count, the last terminated
    # the one before. A container waiting to restart (CrashLoopBackOff) reports the one that died.
    current_id = _container_id(p, p.restart_count) if p.started_at else None
    previous_id = _container_id(p, p.restart_count - 1) if p.restart_count > 0 else None
    if "terminated" in last_state and previous_id:
        last_state["terminated"] = {**last_state["terminated"], "containerID": previous_id}
    if "terminated" in state and current_id:
        state["terminated"] = {**state["terminated"], "containerID": current_id}
    elif "waiting" in state:
        current_id = previous_id
    image_id = f"{p.image.split(':')[0]}@sha256:{stable_uid('image', p.image).replace('-', '')}{'0' * 32}"
    cstatus: dict[str, Any] = {
        "name": "main",
        "state": state,
        "lastState": last_state,
        "ready": running,
        "restartCount": p.restart_count,
        "image": p.image,
        "imageID": image_id if p.started_at else "",
        "started": running,
    }
    if current_id:
        cstatus["containerID"] = current_id
    status["containerStatuses"] = [cstatus]
    return status


def _container_id(p: SimPod, instance: int) -> str:
    return f"containerd://{stable_uid('ctr', p.uid, str(instance)).replace('-', '')}"


def _default_state(p: SimPod) -> dict[str, Any]:
    if p.phase == "Running":
        return {"running": {"startedAt": ts(p.started_at)}}
    if p.phase == "Succeeded":
        return {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": ts(p.started_at),
                "finishedAt": ts(p.finished_at),
            }
        }
    if p.phase == "Failed":
        return {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "startedAt": ts(p.started_at),
                "finishedAt": ts(p.finished_at),
            }
        }
    return {"waiting": {"reason": "ContainerCreating"}}
