"""Kueue objects (kueue.x-k8s.io/v1beta1): ResourceFlavor, ClusterQueue, LocalQueue, Workload.

Field names follow kubernetes-sigs/kueue apis/kueue/v1beta1. One project is one
ClusterQueue in the cohort with a LocalQueue of the same name in its namespace.
"""
# size: Kueue's kinds as the API serves them, each object one literal

from __future__ import annotations

from typing import Any

from simulator.engine import kueue as kueue_engine
from simulator.engine import messages
from simulator.kube.context import RenderContext
from simulator.kube.kai import COHORT, FLAVOR, KUEUE_GROUP, cluster_created, status_time
from simulator.kube.object_fields import GPU, gpu_quantity, managed_field, short_hash, stable_uid, ts
from simulator.scenario.kueue import KueueSpec
from simulator.state import SimJob, SimProject


def kueue_flavor(
    ctx: RenderContext, name: str = FLAVOR, node_labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta1",
        "kind": "ResourceFlavor",
        "metadata": {
            "name": name,
            "uid": stable_uid("flavor", name),
            "creationTimestamp": cluster_created(ctx),
            "generation": 1,
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        },
        "spec": {"nodeLabels": dict(node_labels)} if node_labels else {},
    }


def kueue_flavors(ctx: RenderContext) -> list[dict[str, Any]]:
    """The scenario's ResourceFlavors when its kueue section lists them, else the one default flavor."""
    spec = _spec(ctx)
    if spec is None:
        return [kueue_flavor(ctx)]
    return [kueue_flavor(ctx, f.name, f.node_labels) for f in spec.flavors]


def _spec(ctx: RenderContext) -> KueueSpec | None:
    scenario = getattr(ctx.world, "scenario", None)
    return getattr(scenario, "kueue", None)


def _mig_groups(ctx: RenderContext) -> list[dict[str, Any]]:
    """MIG profiles as covered resources (a workload asking for an uncovered resource is never admitted):
    quota as large as what the cluster's layouts offer, so only nvidia.com/gpu is limited by queues."""
    totals: dict[str, int] = {}
    for n in ctx.nodes.values():
        for prof, count in (getattr(n, "mig_layout", None) or {}).items():
            totals[prof] = totals.get(prof, 0) + count * len(n.gpus)
    for j in ctx.jobs.values():
        profile = getattr(j, "mig_profile", None)
        if profile:
            totals.setdefault(profile, 0)
    if not totals:
        return []
    names = [f"nvidia.com/mig-{p}" for p in sorted(totals)]
    return [
        {
            "coveredResources": names,
            "flavors": [
                {
                    "name": FLAVOR,
                    "resources": [
                        {"name": f"nvidia.com/mig-{p}", "nominalQuota": str(totals[p])}
                        for p in sorted(totals)
                    ],
                }
            ],
        }
    ]


def kueue_cohorts(ctx: RenderContext) -> list[dict[str, Any]]:
    """Departments as Kueue Cohorts under the root cohort: their own nominal quota on top of their
    ClusterQueues', and a borrowing limit that keeps the department's whole subtree within its limit."""
    from simulator.engine.quota import department_nominal

    out = []
    world = ctx.world
    for name, dept in sorted((getattr(world, "departments", {}) or {}).items()):
        members = [p for p in ctx.projects.values() if getattr(p, "department", None) == name]
        nominal = department_nominal(world, name)
        res: dict[str, Any] = {"name": GPU, "nominalQuota": gpu_quantity(nominal)}
        if dept.limit_gpus is not None:
            subtree = nominal + sum(p.quota_gpus for p in members)
            res["borrowingLimit"] = gpu_quantity(max(0, dept.limit_gpus - subtree))
        out.append(
            {
                "apiVersion": f"{KUEUE_GROUP}/v1alpha1",
                "kind": "Cohort",
                "metadata": {
                    "name": name,
                    "uid": dept.uid,
                    "creationTimestamp": ts(dept.created_at),
                    "generation": 1,
                    "labels": {"rcaweb.sim/department": name},
                },
                "spec": {
                    "parentName": COHORT,
                    "resourceGroups": [
                        {"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [res]}]}
                    ],
                },
            }
        )
    return out


def _written_out(
    ctx: RenderContext, spec: KueueSpec, project: SimProject
) -> tuple[dict[str, Any], list[Any]]:
    """Spec fields and status usage of a ClusterQueue the scenario's kueue section describes."""
    q = spec.queue(project.name)
    flavors = []
    for fq in q.flavors:
        res: dict[str, Any] = {"name": GPU, "nominalQuota": str(fq.nominal)}
        if fq.borrowing_limit is not None:
            res["borrowingLimit"] = str(fq.borrowing_limit)
        if fq.lending_limit is not None:
            res["lendingLimit"] = str(fq.lending_limit)
        flavors.append({"name": fq.flavor, "resources": [res]})
    borrow: dict[str, Any] = {"policy": q.borrow_within_cohort}
    if q.max_priority_threshold is not None:
        borrow["maxPriorityThreshold"] = q.max_priority_threshold
    fields: dict[str, Any] = {
        "queueingStrategy": q.queueing_strategy,
        "flavorFungibility": {"whenCanBorrow": q.when_can_borrow, "whenCanPreempt": q.when_can_preempt},
        "preemption": {
            "borrowWithinCohort": borrow,
            "reclaimWithinCohort": q.reclaim_within_cohort,
            "withinClusterQueue": q.within_cluster_queue,
        },
        "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}, *_mig_groups(ctx)],
    }
    if q.cohort is not None:
        fields["cohort"] = q.cohort
    used = kueue_engine.ledger_of(ctx.world, spec)
    usage = [
        {
            "name": fq.flavor,
            "resources": [
                {
                    "name": GPU,
                    "total": str(used.used(project.name, fq.flavor)),
                    "borrowed": str(max(0, used.used(project.name, fq.flavor) - fq.nominal)),
                }
            ],
        }
        for fq in q.flavors
    ]
    return fields, usage


def kueue_cluster_queue(ctx: RenderContext, project: SimProject) -> dict[str, Any]:
    spec = _spec(ctx)
    if spec is not None:
        fields, usage = _written_out(ctx, spec, project)
        return _cluster_queue(ctx, project, fields, usage)
    u = ctx.usage[project.name]
    gpu_res: dict[str, Any] = {"name": GPU, "nominalQuota": str(project.quota_gpus)}
    if project.limit_gpus is not None:
        gpu_res["borrowingLimit"] = str(max(0, project.limit_gpus - project.quota_gpus))
    borrowed = max(0, u.allocated - project.quota_gpus)
    usage = [
        {"name": FLAVOR, "resources": [{"name": GPU, "total": str(u.allocated), "borrowed": str(borrowed)}]}
    ]
    fields = {
        "cohort": getattr(project, "department", None) or COHORT,
        "queueingStrategy": "BestEffortFIFO",
        "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {
            "borrowWithinCohort": {"policy": "Never"},
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
        },
        "resourceGroups": [
            {"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [gpu_res]}]},
            *_mig_groups(ctx),
        ],
    }
    return _cluster_queue(ctx, project, fields, usage)


def _cluster_queue(
    ctx: RenderContext, project: SimProject, fields: dict[str, Any], usage: list[Any]
) -> dict[str, Any]:
    u = ctx.usage[project.name]
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
            **({"cohort": fields["cohort"]} if "cohort" in fields else {}),
            "namespaceSelector": {},
            "queueingStrategy": fields["queueingStrategy"],
            "flavorFungibility": fields["flavorFungibility"],
            "preemption": fields["preemption"],
            "stopPolicy": "None",
            "resourceGroups": fields["resourceGroups"],
        },
        "status": {
            "flavorsReservation": usage,
            "flavorsUsage": usage,
            "pendingWorkloads": _pending(ctx, project),
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


def _pending(ctx: RenderContext, project: SimProject) -> int:
    """Workloads waiting for quota: the engine's count when it keeps one, else counted here."""
    if getattr(project, "pending_workloads", None) is not None and hasattr(project, "admitted_workloads"):
        return int(project.pending_workloads)
    return sum(
        1
        for j in ctx.jobs.values()
        if j.project == project.name and j.state == "Pending" and not ctx.job_admitted(j)
    )


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


# length: one API object as one literal, fields in the API's order
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
        # a float when shared GPUs hold fractions of a GPU: printed as it is, as it always was
        insufficient = messages.kueue_insufficient(short)  # type: ignore[arg-type]  # see the line above
        conditions.append(
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": getattr(job, "condition_message", None) or insufficient,
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
    mig = getattr(job, "mig_profile", None)
    resource, per_pod = (f"nvidia.com/mig-{mig}", job.mig_count) if mig else (GPU, job.gpus_per_pod)
    if admitted and job.state in ("Pending", "Running"):
        status["admission"] = {
            "clusterQueue": job.project,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {resource: kueue_engine.assigned_flavor(ctx.world, job) or FLAVOR},
                    "resourceUsage": {resource: gpu_quantity(job.pods * per_pod)},
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
                        "requests": {resource: gpu_quantity(per_pod)},
                        "limits": {resource: gpu_quantity(per_pod)},
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
                    status_time(job),
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
