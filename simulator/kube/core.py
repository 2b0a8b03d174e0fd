"""core/v1 Event and Namespace, batch/v1 Job from the world's state.

Shapes follow what a real API server returns for these kinds, including
conditions with reasons, owner references and managedFields.
"""

from __future__ import annotations

from typing import Any

from simulator.kube.context import RenderContext
from simulator.kube.object_fields import managed_field, stable_uid, ts
from simulator.kube.pods import container_spec, queue_labels
from simulator.state import SimEvent, SimJob


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


def _share_annotations(j: SimJob) -> dict[str, Any]:
    """KAI GPU sharing is asked for on the pod template (the pods inherit it)."""
    ann = {}
    if getattr(j, "gpu_fraction", None) is not None:
        ann["gpu-fraction"] = f"{j.gpu_fraction:g}"
    if getattr(j, "gpu_memory_mib", None) is not None:
        ann["gpu-memory"] = str(j.gpu_memory_mib)
    return {"annotations": ann} if ann else {}


# length: one API object as one literal, fields in the API's order
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
                "metadata": {"labels": template_labels, **_share_annotations(j)},
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
