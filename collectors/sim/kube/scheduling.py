"""Scheduler policy objects: KAI Queue/PodGroup and Kueue ResourceFlavor/ClusterQueue/LocalQueue/Workload.

Field names follow the upstream CRDs (NVIDIA/KAI-Scheduler pkg/apis/scheduling
v2 and v2alpha2; kubernetes-sigs/kueue apis/kueue/v1beta1). One project is one
leaf queue under ``default-parent-queue`` (KAI) or one ClusterQueue with a
LocalQueue of the same name in the project's namespace (Kueue).
"""

from __future__ import annotations

from typing import Any

from collectors.sim.engine import messages
from collectors.sim.kube.common import GPU, managed_field, short_hash, stable_uid, ts
from collectors.sim.kube.context import RenderContext
from collectors.sim.state import SimJob, SimProject

KAI_GROUP = "scheduling.run.ai"
KUEUE_GROUP = "kueue.x-k8s.io"
PARENT_QUEUE = "default-parent-queue"
FLAVOR = messages.KUEUE_FLAVOR
COHORT = messages.KUEUE_COHORT


def _status_time(job: SimJob) -> Any:
    """When the scheduler last wrote the status: a stable time, so unchanged objects stay unchanged."""
    return (
        getattr(job, "condition_changed_at", None)
        or getattr(job, "admitted_at", None)
        or job.finished_at
        or job.started_at
        or job.submit_at
    )


def _gpus(n: float | int) -> dict[str, str]:
    return {GPU: str(int(n)) if float(n).is_integer() else str(n)}


def _created(ctx: RenderContext) -> str | None:
    times = [p.created_at for p in ctx.projects.values()] + [n.created_at for n in ctx.nodes.values()]
    return ts(min(times)) if times else ts(ctx.now)


#
# KAI
#


def kai_queues(ctx: RenderContext) -> list[dict[str, Any]]:
    total = {"allocated": 0, "np": 0, "requested": 0}
    items = []
    for project in sorted(ctx.projects.values(), key=lambda p: p.name):
        items.append(kai_queue(ctx, project))
        u = ctx.usage[project.name]
        total["allocated"] += u.allocated
        total["np"] += u.allocated_non_preemptible
        total["requested"] += u.requested
    parent = {
        "apiVersion": f"{KAI_GROUP}/v2",
        "kind": "Queue",
        "metadata": {
            "name": PARENT_QUEUE,
            "uid": stable_uid("queue", PARENT_QUEUE),
            "creationTimestamp": _created(ctx),
            "generation": 1,
            "managedFields": [managed_field("kai-operator", f"{KAI_GROUP}/v2", None, {"f:spec": {}})],
        },
        "spec": {
            "resources": {
                "gpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            }
        },
        "status": {
            "childQueues": sorted(ctx.projects),
            "allocated": _gpus(total["allocated"]),
            "allocatedNonPreemptible": _gpus(total["np"]),
            "requested": _gpus(total["requested"]),
        },
    }
    return [parent, *items]


def kai_queue(ctx: RenderContext, project: SimProject) -> dict[str, Any]:
    u = ctx.usage[project.name]
    manager, changed = ctx.manager_for("project", project.name, project.last_manager)
    managed = [
        managed_field(
            "kai-operator", f"{KAI_GROUP}/v2", project.created_at, {"f:spec": {"f:parentQueue": {}}}
        )
    ]
    managed.append(
        managed_field(
            manager if changed else project.last_manager,
            f"{KAI_GROUP}/v2",
            changed or project.created_at,
            {"f:spec": {"f:resources": {"f:gpu": {"f:quota": {}, "f:limit": {}}}}},
        )
    )
    managed.append(
        managed_field(
            "queue-controller",
            f"{KAI_GROUP}/v2",
            getattr(project, "changed_at", None) or project.created_at,
            {"f:status": {}},
            subresource="status",
        )
    )
    return {
        "apiVersion": f"{KAI_GROUP}/v2",
        "kind": "Queue",
        "metadata": {
            "name": project.name,
            "uid": project.uid,
            "creationTimestamp": ts(project.created_at),
            "generation": 1
            + sum(
                1
                for c in ctx.world.changes
                if c.kind == "project" and c.target == project.name and c.time <= ctx.now
            )
            if hasattr(ctx.world, "changes")
            else 1,
            "labels": {"kai.scheduler/queue-type": "leaf"},
            "managedFields": managed,
        },
        "spec": {
            "parentQueue": PARENT_QUEUE,
            "priority": project.priority,
            "resources": {
                "gpu": {
                    "quota": project.quota_gpus,
                    "limit": project.limit_gpus if project.limit_gpus is not None else -1,
                    "overQuotaWeight": project.over_quota_weight,
                },
                "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            },
        },
        "status": {
            "allocated": _gpus(u.allocated),
            "allocatedNonPreemptible": _gpus(u.allocated_non_preemptible),
            "requested": _gpus(u.requested),
        },
    }


def podgroup_name(job: SimJob) -> str:
    return getattr(job, "podgroup", "") or f"pg-{job.name}-{job.uid}"


def kai_podgroup(ctx: RenderContext, job: SimJob) -> dict[str, Any]:
    pods = ctx.pods_by_job.get((job.namespace, job.name), [])
    project = ctx.project_of(job)
    status: dict[str, Any] = {
        "pending": sum(1 for p in pods if p.phase == "Pending") or None,
        "running": sum(1 for p in pods if p.phase == "Running") or None,
        "succeeded": sum(1 for p in pods if p.phase == "Succeeded") or None,
        "failed": sum(1 for p in pods if p.phase == "Failed") or None,
        "resourcesStatus": {
            "allocated": _gpus(
                sum(p.gpus_requested for p in pods if p.node and p.phase in ("Pending", "Running"))
            ),
            "requested": _gpus(job.pods * job.gpus_per_pod),
        },
    }
    if job.state == "Pending" and project is not None:
        status["schedulingConditions"] = [_kai_condition(ctx, job, project, pods)]
    return {
        "apiVersion": f"{KAI_GROUP}/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": podgroup_name(job),
            "namespace": job.namespace,
            "uid": stable_uid("podgroup", job.uid),
            "creationTimestamp": ts(job.submit_at),
            "labels": {"kai.scheduler/queue": job.project, "runai/queue": job.project},
            "annotations": {
                "kai.scheduler/top-owner-metadata": f"name: {job.name}\nuid: {job.uid}\ngroup: batch\nversion: v1\nkind: Job\n"
            },
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job.name, "uid": job.uid}],
            "managedFields": [
                managed_field("pod-grouper", f"{KAI_GROUP}/v2alpha2", job.submit_at, {"f:spec": {}}),
                managed_field(
                    "kai-scheduler",
                    f"{KAI_GROUP}/v2alpha2",
                    _status_time(job),
                    {"f:status": {}},
                    subresource="status",
                ),
            ],
        },
        "spec": {
            "minMember": job.pods,
            "queue": job.project,
            "priorityClassName": job.priority_class,
            "preemptibility": "non-preemptible" if job.priority_class == "inference" else "preemptible",
            "markUnschedulable": True,
            "schedulingBackoff": 1,
        },
        "status": {k: v for k, v in status.items() if v is not None},
    }


def _kai_condition(ctx: RenderContext, job: SimJob, project: SimProject, pods: list[Any]) -> dict[str, Any]:
    u = ctx.usage[project.name]
    request = job.pods * job.gpus_per_pod
    details = {
        "queueDetails": {
            "name": project.name,
            "queueRequestedResources": _gpus(u.requested),
            "queueDeservedResources": _gpus(project.quota_gpus),
            "queueAllocatedResources": _gpus(u.allocated),
            "queueAllocatedNonPreemptibleResources": _gpus(u.allocated_non_preemptible),
            "queueResourceLimits": _gpus(project.limit_gpus if project.limit_gpus is not None else -1),
            "podGroupRequestedResources": _gpus(request),
        }
    }
    reasons = []
    if project.limit_gpus is not None and u.allocated + request > project.limit_gpus:
        reasons.append(
            {
                "reason": "OverLimit",
                "message": messages.kai_over_limit(project.name, project.limit_gpus, u.allocated, request),
                "details": details,
            }
        )
    if job.priority_class == "inference" and u.allocated_non_preemptible + request > project.quota_gpus:
        reasons.append(
            {
                "reason": "NonPreemptibleOverQuota",
                "message": messages.kai_non_preemptible_over_quota(
                    project.name, request, project.quota_gpus, u.allocated_non_preemptible
                ),
                "details": details,
            }
        )
    engine_reasons = getattr(job, "condition_reasons", None)
    if engine_reasons is not None and getattr(job, "condition_message", None):
        reasons = [
            {**r, "details": details}
            if r.get("reason") in ("OverLimit", "NonPreemptibleOverQuota")
            else dict(r)
            for r in engine_reasons
        ]
    message = getattr(job, "condition_message", None) or next(
        (p.scheduled_message for p in pods if p.scheduled_message), None
    )
    if message is None:
        message = (
            "\n".join(f"{r['reason']}: {r['message']}" for r in reasons)
            or f"Resources were not found for pod group {podgroup_name(job)}"
        )
    since = getattr(job, "condition_changed_at", None) or min(
        (p.created_at for p in pods), default=job.submit_at
    )
    cond: dict[str, Any] = {
        "type": "UnschedulableOnNodePool",
        "nodePool": "default",
        "reason": getattr(job, "condition_reason", None) or "Unschedulable",
        "message": message,
        "transitionID": str(job.generation + job.preempted_count - 1),
        "lastTransitionTime": ts(since),
        "status": "True",
    }
    if reasons:
        cond["reasons"] = reasons
    return cond


#
# Kueue
#


def kueue_flavor(ctx: RenderContext) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta1",
        "kind": "ResourceFlavor",
        "metadata": {
            "name": FLAVOR,
            "uid": stable_uid("flavor", FLAVOR),
            "creationTimestamp": _created(ctx),
            "generation": 1,
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        },
        "spec": {},
    }


def kueue_cluster_queue(ctx: RenderContext, project: SimProject) -> dict[str, Any]:
    u = ctx.usage[project.name]
    gpu_res: dict[str, Any] = {"name": GPU, "nominalQuota": str(project.quota_gpus)}
    if project.limit_gpus is not None:
        gpu_res["borrowingLimit"] = str(max(0, project.limit_gpus - project.quota_gpus))
    borrowed = max(0, u.allocated - project.quota_gpus)
    usage = [
        {"name": FLAVOR, "resources": [{"name": GPU, "total": str(u.allocated), "borrowed": str(borrowed)}]}
    ]
    manager, changed = ctx.manager_for("project", project.name, project.last_manager)
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {
            "name": project.name,
            "uid": project.uid,
            "creationTimestamp": ts(project.created_at),
            "generation": 1,
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "managedFields": [
                managed_field(
                    manager if changed else project.last_manager,
                    f"{KUEUE_GROUP}/v1beta1",
                    changed or project.created_at,
                    {"f:spec": {"f:resourceGroups": {}}},
                ),
                managed_field(
                    "kueue",
                    f"{KUEUE_GROUP}/v1beta1",
                    getattr(project, "changed_at", None) or project.created_at,
                    {"f:status": {}},
                    subresource="status",
                ),
            ],
        },
        "spec": {
            "cohort": COHORT,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"},
            "preemption": {
                "borrowWithinCohort": {"policy": "Never"},
                "reclaimWithinCohort": "Any",
                "withinClusterQueue": "LowerPriority",
            },
            "stopPolicy": "None",
            "resourceGroups": [
                {"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [gpu_res]}]}
            ],
        },
        "status": {
            "flavorsReservation": usage,
            "flavorsUsage": usage,
            "pendingWorkloads": u.pending_jobs
            - sum(
                1
                for j in ctx.jobs.values()
                if j.project == project.name and j.state == "Pending" and ctx.job_admitted(j)
            ),
            "reservingWorkloads": u.admitted_jobs,
            "admittedWorkloads": u.admitted_jobs,
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Ready",
                    "message": "Can admit new workloads",
                    "lastTransitionTime": ts(project.created_at),
                    "observedGeneration": 1,
                }
            ],
        },
    }


def kueue_local_queue(ctx: RenderContext, project: SimProject) -> dict[str, Any]:
    u = ctx.usage[project.name]
    cq = kueue_cluster_queue(ctx, project)
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta1",
        "kind": "LocalQueue",
        "metadata": {
            "name": project.name,
            "namespace": project.namespace,
            "uid": stable_uid("localqueue", project.uid),
            "creationTimestamp": ts(project.created_at),
            "generation": 1,
        },
        "spec": {"clusterQueue": project.name, "stopPolicy": "None"},
        "status": {
            "pendingWorkloads": cq["status"]["pendingWorkloads"],
            "reservingWorkloads": u.admitted_jobs,
            "admittedWorkloads": u.admitted_jobs,
            "flavorsReservation": cq["status"]["flavorsReservation"],
            "flavorUsage": cq["status"]["flavorsUsage"],
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Ready",
                    "message": "Can submit new workloads to localQueue",
                    "lastTransitionTime": ts(project.created_at),
                    "observedGeneration": 1,
                }
            ],
        },
    }


def workload_name(job: SimJob) -> str:
    return getattr(job, "podgroup", "") or f"job-{job.name}-{short_hash(job.uid)}"


def kueue_workload(ctx: RenderContext, job: SimJob) -> dict[str, Any]:
    admitted = ctx.job_admitted(job)
    since = ts(job.started_at or job.submit_at)
    conditions: list[dict[str, Any]] = []
    if admitted:
        conditions.append(
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {job.project}",
                "lastTransitionTime": since,
                "observedGeneration": 1,
            }
        )
        conditions.append(
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": since,
                "observedGeneration": 1,
            }
        )
    else:
        short = max(1, ctx.quota_shortfall(job))
        conditions.append(
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": getattr(job, "condition_message", None) or messages.kueue_insufficient(short),
                "lastTransitionTime": ts(job.submit_at),
                "observedGeneration": 1,
            }
        )
    if job.preempted_count:
        conditions.append(
            {
                "type": "Evicted",
                "status": "True" if job.state == "Pending" else "False",
                "reason": "Preempted",
                "message": "Preempted to accommodate a workload in the ClusterQueue",
                "lastTransitionTime": since,
                "observedGeneration": 1,
            }
        )
        conditions.append(
            {
                "type": "Preempted",
                "status": "True" if job.state == "Pending" else "False",
                "reason": "InClusterQueue",
                "message": "Preempted to accommodate a workload in the ClusterQueue",
                "lastTransitionTime": since,
                "observedGeneration": 1,
            }
        )
    if job.state in ("Succeeded", "Failed"):
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": job.state,
                "message": "Job finished successfully" if job.state == "Succeeded" else "Job failed",
                "lastTransitionTime": ts(job.finished_at),
                "observedGeneration": 1,
            }
        )
    status: dict[str, Any] = {"conditions": conditions}
    if admitted and job.state in ("Pending", "Running"):
        status["admission"] = {
            "clusterQueue": job.project,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {GPU: FLAVOR},
                    "resourceUsage": {GPU: str(job.pods * job.gpus_per_pod)},
                    "count": job.pods,
                }
            ],
        }
    template = {
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": job.image,
                    "resources": {
                        "requests": {GPU: str(job.gpus_per_pod)},
                        "limits": {GPU: str(job.gpus_per_pod)},
                    },
                }
            ],
            "priorityClassName": job.priority_class,
            "nodeSelector": dict(job.node_selector) or None,
            "tolerations": [dict(t) for t in job.tolerations] or None,
        }
    }
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(job),
            "namespace": job.namespace,
            "uid": stable_uid("workload", job.uid, str(job.generation)),
            "creationTimestamp": ts(job.submit_at),
            "generation": job.generation,
            "labels": {"kueue.x-k8s.io/job-uid": job.uid},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job.name,
                    "uid": job.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                managed_field(
                    "kueue",
                    f"{KUEUE_GROUP}/v1beta1",
                    _status_time(job),
                    {"f:status": {}},
                    subresource="status",
                )
            ],
        },
        "spec": {
            "queueName": job.project,
            "priority": 100 if job.priority_class == "inference" else 50,
            "priorityClassName": job.priority_class,
            "priorityClassSource": "scheduling.k8s.io/priorityclass",
            "active": True,
            "podSets": [{"name": "main", "count": job.pods, "template": template}],
        },
        "status": status,
    }
