"""core/v1 and batch/v1 objects (Node, Pod, Event, Namespace, Job) from the world's state.

Shapes follow what a real API server returns for these kinds, including the
fields operators read when something is stuck: taints, conditions with reasons
and transition times, container states, owner references and managedFields.
"""

from __future__ import annotations

from typing import Any

from collectors.sim.kube.common import GPU, ip_for, jsonable, managed_field, stable_uid, ts
from collectors.sim.kube.context import RenderContext
from collectors.sim.state import SimEvent, SimJob, SimNode, SimPod

KUBELET_VERSION = "v1.31.4"
# A fake key with a realistic shape, so that the collectors' redaction is exercised.
FAKE_WANDB_KEY = "wandb_v1_3f9c2a7e5d1b8f4a6c0e9d2b7a5f3c1e8d6b4a2f"
NODE_CPU = "224"
NODE_MEMORY = "2113442572Ki"


#
# Nodes
#


def node(ctx: RenderContext, n: SimNode) -> dict[str, Any]:
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/hostname": n.name,
        "nvidia.com/gpu.present": "true",
        "run.ai/node-pool": n.nodepool,
        **n.labels,
    }
    # The engine puts the node lifecycle controller's taints (not-ready, unschedulable) into n.taints.
    taints = [dict(t) for t in n.taints]
    for t in taints:
        if t.get("key", "").startswith("node.kubernetes.io/"):
            t.setdefault("timeAdded", ts(n.ready_changed_at or ctx.now))
    gpus_capacity = str(n.capacity_gpus)
    gpus_alloc = str(n.allocatable_gpus)
    transition = ts(n.ready_changed_at or n.created_at)
    if n.ready:
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": ts(ctx.heartbeat),
            "lastTransitionTime": transition,
        }
    else:
        # NodeStatusUnknown: the node controller lost the kubelet; KubeletNotReady: the kubelet says so itself
        reason = getattr(n, "ready_reason", "") or "NodeStatusUnknown"
        if reason == "KubeletReady":
            reason = "NodeStatusUnknown"
        unknown = reason == "NodeStatusUnknown"
        ready = {
            "type": "Ready",
            "status": "Unknown" if unknown else "False",
            "reason": reason,
            "message": "Kubelet stopped posting node status."
            if unknown
            else "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady",
            "lastHeartbeatTime": ts(n.ready_changed_at or ctx.now) if unknown else ts(ctx.heartbeat),
            "lastTransitionTime": transition,
        }
    pressure = [
        _pressure(
            "MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", n, ctx
        ),
        _pressure("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", n, ctx),
        _pressure("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available", n, ctx),
    ]
    manager, changed = ctx.manager_for("node", n.name, "kubelet")
    managed = [managed_field("kubelet", "v1", n.created_at, {"f:metadata": {"f:labels": {}}})]
    if changed is not None:
        managed.append(
            managed_field(manager, "v1", changed, {"f:spec": {"f:taints": {}, "f:unschedulable": {}}})
        )
    managed.append(
        managed_field(
            "kubelet", "v1", ctx.heartbeat, {"f:status": {"f:conditions": {}}}, subresource="status"
        )
    )
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": n.name,
            "uid": n.uid,
            "creationTimestamp": ts(n.created_at),
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": managed,
        },
        "spec": {
            "podCIDR": f"10.244.{int(ip_for('node', n.name).split('.')[2])}.0/24",
            "providerID": f"sim://{ctx.cluster}/{n.name}",
            "taints": taints or None,
            "unschedulable": True if n.unschedulable else None,
        },
        "status": {
            "capacity": {
                "cpu": NODE_CPU,
                "memory": NODE_MEMORY,
                "pods": "110",
                "ephemeral-storage": "3750157048Ki",
                GPU: gpus_capacity,
            },
            "allocatable": {
                "cpu": "220",
                "memory": "2100859660Ki",
                "pods": "110",
                "ephemeral-storage": "3456144210195",
                GPU: gpus_alloc,
            },
            "conditions": [*pressure, ready],
            "addresses": [
                {"type": "InternalIP", "address": ip_for("node", n.name)},
                {"type": "Hostname", "address": n.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": n.uid.replace("-", ""),
                "systemUUID": n.uid,
                "bootID": stable_uid("boot", n.name),
                "kernelVersion": "5.15.0-126-generic",
                "osImage": "Ubuntu 22.04.5 LTS",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def _pressure(kind: str, reason: str, message: str, n: SimNode, ctx: RenderContext) -> dict[str, Any]:
    status = "False" if n.ready else "Unknown"
    return {
        "type": kind,
        "status": status,
        "reason": reason if n.ready else "NodeStatusUnknown",
        "message": message if n.ready else "Kubelet stopped posting node status.",
        "lastHeartbeatTime": ts(ctx.now if n.ready else (n.ready_changed_at or ctx.now)),
        "lastTransitionTime": ts(n.ready_changed_at or n.created_at),
    }


#
# Pods
#


def queue_labels(ctx: RenderContext, project: str) -> dict[str, str]:
    if ctx.scheduler == "kai":
        return {"kai.scheduler/queue": project, "runai/queue": project}
    return {"kueue.x-k8s.io/queue-name": project}


def container_spec(ctx: RenderContext, job: SimJob, image: str, gpus: int) -> dict[str, Any]:
    resources = {
        "requests": {"cpu": str(8 * max(gpus, 1)), "memory": f"{64 * max(gpus, 1)}Gi", GPU: str(gpus)},
        "limits": {GPU: str(gpus)},
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
    image_id = f"{p.image.split(':')[0]}@sha256:{stable_uid('image', p.image).replace('-', '')}{'0' * 32}"
    cstatus: dict[str, Any] = {
        "name": "main",
        "state": state,
        "lastState": jsonable(p.last_state) if p.last_state else {},
        "ready": running,
        "restartCount": p.restart_count,
        "image": p.image,
        "imageID": image_id if p.started_at else "",
        "started": running,
    }
    if p.started_at:
        cstatus["containerID"] = (
            f"containerd://{stable_uid('ctr', p.uid, str(p.restart_count)).replace('-', '')}"
        )
    status["containerStatuses"] = [cstatus]
    return status


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


#
# Events, namespaces, jobs
#


def event(ctx: RenderContext, e: SimEvent) -> dict[str, Any]:
    involved = dict(e.involved)
    involved.setdefault("apiVersion", "v1")
    source: dict[str, str] = {"component": e.component}
    if e.component == "kubelet" and involved.get("kind") == "Pod":
        p = ctx.pods_by_key.get((involved.get("namespace", e.namespace), involved.get("name", "")))
        if p is not None and p.node:
            source["host"] = p.node
    elif e.component == "kubelet" and involved.get("kind") == "Node":
        source["host"] = involved.get("name", "")
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": e.name,
            "namespace": e.namespace,
            "uid": e.uid,
            "creationTimestamp": ts(e.first_time),
        },
        "involvedObject": involved,
        "reason": e.reason,
        "message": e.message,
        "source": source,
        "firstTimestamp": ts(e.first_time),
        "lastTimestamp": ts(e.last_time),
        "count": e.count,
        "type": e.type,
        "eventTime": None,
        "reportingComponent": e.component,
        "reportingInstance": source.get("host", f"{e.component}-0"),
    }


def namespace(ctx: RenderContext, name: str) -> dict[str, Any]:
    created = min((p.created_at for p in ctx.projects.values() if p.namespace == name), default=None)
    if created is None:
        created = min((n.created_at for n in ctx.nodes.values()), default=ctx.now)
    labels = {"kubernetes.io/metadata.name": name}
    for p in ctx.projects.values():
        if p.namespace == name:
            labels["runai/queue" if ctx.scheduler == "kai" else "kueue.x-k8s.io/managed"] = (
                p.name if ctx.scheduler == "kai" else "true"
            )
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": stable_uid("namespace", name),
            "creationTimestamp": ts(created),
            "labels": labels,
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def job(ctx: RenderContext, j: SimJob) -> dict[str, Any]:
    pods = ctx.pods_by_job.get((j.namespace, j.name), [])
    active = sum(1 for p in pods if p.phase in ("Pending", "Running"))
    succeeded = sum(1 for p in pods if p.phase == "Succeeded")
    failed = sum(1 for p in pods if p.phase == "Failed")
    ready = sum(
        1 for p in pods if p.phase == "Running" and "running" in (p.container_state or {"running": {}})
    )
    template_labels = {
        "batch.kubernetes.io/job-name": j.name,
        "job-name": j.name,
        **queue_labels(ctx, j.project),
    }
    suspended = ctx.scheduler == "kueue" and getattr(
        j, "suspended", not ctx.job_admitted(j) and j.state == "Pending"
    )
    status: dict[str, Any] = {
        "active": active or None,
        "succeeded": succeeded or None,
        "failed": failed or None,
        "ready": ready,
        "terminating": 0,
        "uncountedTerminatedPods": {},
    }
    if j.started_at:
        status["startTime"] = ts(j.started_at)
    conditions: list[dict[str, Any]] = []
    if suspended:
        conditions.append(
            {
                "type": "Suspended",
                "status": "True",
                "reason": "JobSuspended",
                "message": "Job suspended",
                "lastProbeTime": ts(j.submit_at),
                "lastTransitionTime": ts(j.submit_at),
            }
        )
    if j.state == "Succeeded":
        status["completionTime"] = ts(j.finished_at)
        conditions.append(
            {
                "type": "SuccessCriteriaMet",
                "status": "True",
                "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods",
                "lastProbeTime": ts(j.finished_at),
                "lastTransitionTime": ts(j.finished_at),
            }
        )
        conditions.append(
            {
                "type": "Complete",
                "status": "True",
                "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods",
                "lastProbeTime": ts(j.finished_at),
                "lastTransitionTime": ts(j.finished_at),
            }
        )
    elif j.state == "Failed":
        conditions.append(
            {
                "type": "FailureTarget",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
                "lastProbeTime": ts(j.finished_at),
                "lastTransitionTime": ts(j.finished_at),
            }
        )
        conditions.append(
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
                "lastProbeTime": ts(j.finished_at),
                "lastTransitionTime": ts(j.finished_at),
            }
        )
    if conditions:
        status["conditions"] = conditions
    manager, changed = ctx.manager_for("job", j.name, "kubectl-client-side-apply")
    managed = [managed_field("kubectl-client-side-apply", "batch/v1", j.submit_at, {"f:spec": {}})]
    if changed is not None and manager != "kubectl-client-side-apply":
        managed.append(managed_field(manager, "batch/v1", changed, {"f:spec": {"f:template": {}}}))
    managed.append(
        managed_field(
            "kube-controller-manager",
            "batch/v1",
            j.started_at or j.submit_at,
            {"f:status": {}},
            subresource="status",
        )
    )
    return {
        "kind": "Job",
        "apiVersion": "batch/v1",
        "metadata": {
            "name": j.name,
            "namespace": j.namespace,
            "uid": j.uid,
            "generation": j.generation,
            "creationTimestamp": ts(j.submit_at),
            "labels": {"app.kubernetes.io/part-of": j.project, **queue_labels(ctx, j.project)},
            "annotations": {"batch.kubernetes.io/job-tracking": ""},
            "managedFields": managed,
        },
        "spec": {
            "parallelism": j.pods,
            "completions": j.pods,
            "completionMode": "Indexed",
            "backoffLimit": 6,
            "suspend": suspended,
            "manualSelector": False,
            "podReplacementPolicy": "TerminatingOrFailed",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": j.uid}},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {
                    "containers": [container_spec(ctx, j, j.image, j.gpus_per_pod)],
                    "restartPolicy": "OnFailure" if j.priority_class == "train" else "Always",
                    "schedulerName": ctx.scheduler_name,
                    "priorityClassName": j.priority_class,
                    "nodeSelector": dict(j.node_selector) or None,
                    "tolerations": [dict(t) for t in j.tolerations] or None,
                },
            },
        },
        "status": status,
    }
