"""KAI Scheduler objects: Queue (scheduling.run.ai/v2) and PodGroup (scheduling.run.ai/v2alpha2).

Field names follow NVIDIA/KAI-Scheduler pkg/apis/scheduling v2 and v2alpha2.
One project is one leaf queue under ``default-parent-queue``.
"""

from __future__ import annotations

from typing import Any

from simulator.engine import messages
from simulator.kube.context import RenderContext
from simulator.kube.object_fields import GPU, managed_field, stable_uid, ts
from simulator.state import SimJob, SimProject

KAI_GROUP = "scheduling.run.ai"
KUEUE_GROUP = "kueue.x-k8s.io"
PARENT_QUEUE = "default-parent-queue"
FLAVOR = messages.KUEUE_FLAVOR
COHORT = messages.KUEUE_COHORT


def status_time(job: SimJob) -> Any:
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


def cluster_created(ctx: RenderContext) -> str | None:
    times = [p.created_at for p in ctx.projects.values()] + [n.created_at for n in ctx.nodes.values()]
    return ts(min(times)) if times else ts(ctx.now)


def kai_queues(ctx: RenderContext) -> list[dict[str, Any]]:
    total: dict[str, float] = {"allocated": 0, "np": 0, "requested": 0}
    items = []
    departments = getattr(ctx.world, "departments", {}) or {}
    dept_totals: dict[str, dict[str, float]] = {
        d: {"allocated": 0, "np": 0, "requested": 0} for d in departments
    }
    for project in sorted(ctx.projects.values(), key=lambda p: p.name):
        items.append(kai_queue(ctx, project))
        u = ctx.usage[project.name]
        total["allocated"] += u.allocated
        total["np"] += u.allocated_non_preemptible
        total["requested"] += u.requested
        d = dept_totals.get(getattr(project, "department", None) or "")
        if d is not None:
            d["allocated"] += u.allocated
            d["np"] += u.allocated_non_preemptible
            d["requested"] += u.requested
    for name in sorted(departments):
        items.append(kai_department_queue(ctx, departments[name], dept_totals[name]))
    top_level = sorted(
        [p.name for p in ctx.projects.values() if not getattr(p, "department", None)] + list(departments)
    )
    parent = {
        "apiVersion": f"{KAI_GROUP}/v2",
        "kind": "Queue",
        "metadata": {
            "name": PARENT_QUEUE,
            "uid": stable_uid("queue", PARENT_QUEUE),
            "creationTimestamp": cluster_created(ctx),
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
            "childQueues": top_level,
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
            "parentQueue": getattr(project, "department", None) or PARENT_QUEUE,
            "priority": project.priority,
            "resources": {
                "gpu": {
                    "quota": project.quota_gpus,
                    "limit": project.limit_gpus if project.limit_gpus is not None else -1,
                    "overQuotaWeight": project.over_quota_weight,
                },
                **_cpu_memory(project),
            },
        },
        "status": {
            "allocated": _gpus(u.allocated),
            "allocatedNonPreemptible": _gpus(u.allocated_non_preemptible),
            "requested": _gpus(u.requested),
        },
    }


def _cpu_memory(queue: Any) -> dict[str, dict[str, int]]:
    """A Queue's CPU (millicores) and memory (MB, 10^6 bytes) resources, as KAI's Queue states them: the
    scenario's deserved quotas and limits where it sets them, else -1 (unlimited)."""
    cpu = getattr(queue, "limit_cpu_millis", None)
    mem = getattr(queue, "limit_memory_bytes", None)
    qcpu = getattr(queue, "quota_cpu_millis", None)
    qmem = getattr(queue, "quota_memory_bytes", None)
    return {
        "cpu": {
            "quota": -1 if qcpu is None else qcpu,
            "limit": -1 if cpu is None else cpu,
            "overQuotaWeight": 1,
        },
        "memory": {
            "quota": -1 if qmem is None else qmem // 10**6,
            "limit": -1 if mem is None else mem // 10**6,
            "overQuotaWeight": 1,
        },
    }


def kai_department_queue(ctx: RenderContext, dept: Any, total: dict[str, float]) -> dict[str, Any]:
    """A department is a KAI parent Queue: its children are its projects' queues."""
    manager, changed = ctx.manager_for("department", dept.name, dept.last_manager)
    return {
        "apiVersion": f"{KAI_GROUP}/v2",
        "kind": "Queue",
        "metadata": {
            "name": dept.name,
            "uid": dept.uid,
            "creationTimestamp": ts(dept.created_at),
            "generation": 1
            + sum(
                1
                for c in ctx.world.changes
                if c.kind == "department" and c.target == dept.name and c.time <= ctx.now
            ),
            "labels": {"kai.scheduler/queue-type": "parent"},
            "managedFields": [
                managed_field(
                    manager if changed else dept.last_manager,
                    f"{KAI_GROUP}/v2",
                    changed or dept.created_at,
                    {"f:spec": {"f:resources": {"f:gpu": {"f:quota": {}, "f:limit": {}}}}},
                )
            ],
        },
        "spec": {
            "parentQueue": PARENT_QUEUE,
            "resources": {
                "gpu": {
                    "quota": dept.quota_gpus,
                    "limit": dept.limit_gpus if dept.limit_gpus is not None else -1,
                    "overQuotaWeight": dept.over_quota_weight,
                },
                **_cpu_memory(dept),
            },
        },
        "status": {
            "childQueues": sorted(
                p.name for p in ctx.projects.values() if getattr(p, "department", None) == dept.name
            ),
            "allocated": _gpus(round(total["allocated"], 4)),
            "allocatedNonPreemptible": _gpus(round(total["np"], 4)),
            "requested": _gpus(round(total["requested"], 4)),
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
                    status_time(job),
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
