"""Scheduler policy objects → queue and project states, and each job's scheduling condition.

KAI Scheduler: a ``Queue`` per project (leaf) under parent queues; PodGroups carry why a gang waits
(``status.schedulingConditions``). Kueue: ``ClusterQueue`` per project with ``LocalQueue``s pointing at it;
``Workload``s carry ``QuotaReserved``/``Admitted``. Without either, the pods' ``PodScheduled`` condition.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from collectors.mapping.metadata import meta, owner, queue_label
from collectors.mapping.quantities import GPU, int_quantity, limit_or_none
from collectors.mapping.transitions import latest_transition
from collectors.mapping.writers import actor
from collectors.observed import Observed
from collectors.sources.redact import redact_text

#
# Queues and projects
#


def _queue_and_project(
    name: str,
    *,
    project: str,
    namespace: str,
    quota: int | None,
    limit: int | None,
    weight: Any,
    priority: Any,
    cohort: str | None,
    parent: str | None,
    scheduler: str,
    flavors: list[str],
    uid: str,
    who: str,
) -> list[Observed]:
    queue_state = {
        "project": project,
        "priority": priority,
        "quota_gpus": quota,
        "limit_gpus": limit,
        "over_quota_weight": weight,
        "cohort": cohort,
        "parent": parent,
        "scheduler": scheduler,
        "flavors": flavors,
    }
    queue = Observed(
        kind="queue",
        name=name,
        uid=uid,
        state=queue_state,
        actor=who,
        hot={"project": project, "gpus": quota, "gpus_allocatable": limit, "queue": name},
    )
    out = [queue]
    if project:
        project_state = {
            "namespace": namespace,
            "queue": name,
            "quota_gpus": quota,
            "limit_gpus": limit,
            "over_quota_weight": weight,
            "priority": priority,
            "scheduler": scheduler,
        }
        out.append(
            Observed(
                kind="project",
                name=project,
                uid=uid,
                state=project_state,
                actor=who,
                hot={
                    "project": project,
                    "gpus": quota,
                    "gpus_allocatable": limit,
                    "queue": name,
                    "namespace": namespace,
                },
            )
        )
    return out


def map_kai_queues(queues: list[dict[str, Any]], namespace_of_queue: dict[str, str]) -> list[Observed]:
    """Leaf queues are projects (Run:ai names the queue after the project); parent queues are queues only."""
    parents = {(q.get("spec") or {}).get("parentQueue") for q in queues} - {None, ""}
    out: list[Observed] = []
    for q in queues:
        m, spec = meta(q), q.get("spec") or {}
        name = m.get("name", "")
        if not name:
            continue
        gpu = (spec.get("resources") or {}).get("gpu") or {}
        is_parent = (
            name in parents
            or bool((q.get("status") or {}).get("childQueues"))
            or ((m.get("labels") or {}).get("kai.scheduler/queue-type") == "parent")
        )
        project = "" if is_parent else ((m.get("labels") or {}).get("runai/project") or name)
        first = len(out)
        out += _queue_and_project(
            name,
            project=project,
            namespace=namespace_of_queue.get(name, project),
            quota=limit_or_none(gpu.get("quota")),
            limit=limit_or_none(gpu.get("limit")),
            weight=gpu.get("overQuotaWeight"),
            priority=spec.get("priority"),
            cohort=None,
            parent=spec.get("parentQueue") or None,
            scheduler="kai",
            flavors=[],
            uid=m.get("uid", ""),
            who=actor(q, spec_only=True),
        )
        since = latest_transition(q)
        for o in out[first:]:
            o.since = since
    return out


def map_kueue_queues(
    cluster_queues: list[dict[str, Any]], local_queues: list[dict[str, Any]]
) -> list[Observed]:
    """A ClusterQueue is a queue and a project; its namespace is the one of the LocalQueue pointing at it."""
    ns_of: dict[str, str] = {}
    for lq in sorted(local_queues, key=lambda o: (meta(o).get("namespace", ""), meta(o).get("name", ""))):
        cq = (lq.get("spec") or {}).get("clusterQueue")
        if cq and cq not in ns_of:
            ns_of[cq] = meta(lq).get("namespace", "")
    out: list[Observed] = []
    for cq in cluster_queues:
        m, spec = meta(cq), cq.get("spec") or {}
        name = m.get("name", "")
        quota = 0
        borrow: int | None = 0
        flavors: list[str] = []
        found = False
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                flavors.append(flavor.get("name", ""))
                for res in flavor.get("resources") or []:
                    if res.get("name") != GPU:
                        continue
                    found = True
                    quota += int_quantity(res.get("nominalQuota")) or 0
                    if res.get("borrowingLimit") is None:
                        borrow = None  # no borrowing limit: may borrow whatever the cohort lends
                    elif borrow is not None:
                        borrow += int_quantity(res.get("borrowingLimit")) or 0
        limit = None if borrow is None or not found else quota + borrow
        first = len(out)
        out += _queue_and_project(
            name,
            project=name,
            namespace=ns_of.get(name, name),
            quota=quota if found else None,
            limit=limit,
            weight=(spec.get("fairSharing") or {}).get("weight"),
            priority=None,
            cohort=spec.get("cohort") or None,
            parent=None,
            scheduler="kueue",
            flavors=sorted(set(flavors)),
            uid=m.get("uid", ""),
            who=actor(cq, spec_only=True),
        )
        since = latest_transition(cq)
        for o in out[first:]:
            o.since = since
    return out


#
# Departments: KAI parent queues above projects, Kueue Cohorts above ClusterQueues
#

KAI_ROOT_QUEUE = "default-parent-queue"  # the root KAI installs; above departments, not one


def _gpu_float(value: Any) -> float | None:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        n = int_quantity(value)
        return None if n is None else float(n)


def _allocated(obj: dict[str, Any]) -> float | None:
    alloc = (obj.get("status") or {}).get("allocated") or {}
    return _gpu_float(alloc.get(GPU)) if isinstance(alloc, dict) else None


def map_kai_departments(queues: list[dict[str, Any]]) -> list[Observed]:
    """A department is a parent queue with projects (leaf queues) under it, other than KAI's root queue."""
    by_name = {meta(q).get("name", ""): q for q in queues}
    children: dict[str, list[str]] = {}
    for name, q in by_name.items():
        parent = (q.get("spec") or {}).get("parentQueue")
        if parent:
            children.setdefault(parent, []).append(name)
    out = []
    for name, kids in sorted(children.items()):
        parent_queue = by_name.get(name)
        if parent_queue is None or name == KAI_ROOT_QUEUE:
            continue
        leaves = sorted(k for k in kids if k not in children)
        if not leaves:
            continue
        gpu = ((parent_queue.get("spec") or {}).get("resources") or {}).get("gpu") or {}
        quota, limit = limit_or_none(gpu.get("quota")), limit_or_none(gpu.get("limit"))
        allocated = _allocated(parent_queue)
        state = {
            "scheduler": "kai",
            "quota_gpus": quota,
            "limit_gpus": limit,
            "queues": leaves,
            "projects": sorted(
                (meta(by_name[k]).get("labels") or {}).get("runai/project") or k for k in leaves
            ),
            "parent": (parent_queue.get("spec") or {}).get("parentQueue") or None,
            "allocated_gpus": allocated,
        }
        out.append(
            Observed(
                kind="department",
                name=name,
                uid=meta(parent_queue).get("uid", ""),
                state=state,
                actor=actor(parent_queue, spec_only=True),
                hot={"gpus": quota, "gpus_allocatable": limit, "queue": name, "gpu_units": allocated},
            )
        )
    return out


def map_kueue_departments(
    cohorts: list[dict[str, Any]], cluster_queues: list[dict[str, Any]]
) -> list[Observed]:
    """A department is a Kueue Cohort with ClusterQueues in it: its quota is its own nominal quota plus its
    ClusterQueues'; its limit, when it has a borrowing limit, that plus what it may borrow from its parent."""
    members: dict[str, list[dict[str, Any]]] = {}
    for cq in cluster_queues:
        cohort = (cq.get("spec") or {}).get("cohort")
        if cohort:
            members.setdefault(cohort, []).append(cq)
    out = []
    for c in cohorts:
        name = meta(c).get("name", "")
        cqs = sorted(members.get(name, []), key=lambda o: meta(o).get("name", ""))
        if not name or not cqs:
            continue
        own, borrow = _nominal(c)
        nominal = own + sum(_nominal(cq)[0] for cq in cqs)
        limit = None if borrow is None else nominal + borrow
        used = 0.0
        for cq in cqs:
            for fl in (cq.get("status") or {}).get("flavorsUsage") or []:
                for r in fl.get("resources") or []:
                    if r.get("name") == GPU:
                        used += _gpu_float(r.get("total")) or 0.0
        names = [meta(cq).get("name", "") for cq in cqs]
        state = {
            "scheduler": "kueue",
            "quota_gpus": int(nominal),
            "limit_gpus": None if limit is None else int(limit),
            "queues": names,
            "projects": names,
            "parent": (c.get("spec") or {}).get("parentName") or None,
            "allocated_gpus": round(used, 4),
        }
        out.append(
            Observed(
                kind="department",
                name=name,
                uid=meta(c).get("uid", ""),
                state=state,
                actor=actor(c, spec_only=True),
                hot={
                    "gpus": state["quota_gpus"],
                    "gpus_allocatable": state["limit_gpus"],
                    "queue": name,
                    "gpu_units": state["allocated_gpus"],
                },
            )
        )
    return out


def _nominal(obj: dict[str, Any]) -> tuple[float, float | None]:
    """nvidia.com/gpu nominal quota and borrowing limit (None = unlimited) over every flavor."""
    nominal, borrow = 0.0, 0.0
    unlimited = True
    for group in (obj.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if res.get("name") != GPU:
                    continue
                nominal += _gpu_float(res.get("nominalQuota")) or 0.0
                if res.get("borrowingLimit") is not None:
                    unlimited = False
                    borrow += _gpu_float(res.get("borrowingLimit")) or 0.0
    return nominal, (None if unlimited else borrow)


def link_departments(queues: list[Observed], departments: list[Observed]) -> None:
    """Projects and queues name their department (the department lists them, see map_*_departments)."""
    of_queue = {q: d.name for d in departments for q in d.state.get("queues") or []}
    of_project = {p: d.name for d in departments for p in d.state.get("projects") or []}
    for o in queues:
        if o.kind == "queue":
            o.state["department"] = of_queue.get(o.name)
        elif o.kind == "project":
            o.state["department"] = of_project.get(o.name)


def kai_namespaces(namespaces: list[dict[str, Any]]) -> dict[str, str]:
    """queue → namespace from the ``runai/queue`` namespace label Run:ai/KAI put on project namespaces."""
    out: dict[str, str] = {}
    for ns in namespaces:
        q = queue_label(meta(ns).get("labels") or {})
        if q and q not in out:
            out[q] = meta(ns).get("name", "")
    return out


def kueue_local_queue_map(local_queues: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue name) → ClusterQueue name: a pod's queue label names a LocalQueue."""
    return {
        (meta(lq).get("namespace", ""), meta(lq).get("name", "")): (lq.get("spec") or {}).get(
            "clusterQueue", ""
        )
        for lq in local_queues
    }


#
# Per-job scheduling state
#


@dataclass
class JobScheduling:
    """What the scheduler says about one job: queue, why it waits, whether it holds quota."""

    queue: str = ""
    project: str = ""
    scheduling: dict[str, Any] | None = None
    admitted: bool = False
    preemptible: bool | None = None
    waiting_for_admission: bool = False


@dataclass
class SchedulingIndex:
    """Scheduler objects indexed by the job (namespace, uid / name) they belong to."""

    by_uid: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    by_name: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def build(cls, objects: list[dict[str, Any]], *, uid_label: str = "") -> SchedulingIndex:
        idx = cls()
        for o in objects:
            m = meta(o)
            ns = m.get("namespace", "")
            own = owner(o)
            uid = (own or {}).get("uid") or ((m.get("labels") or {}).get(uid_label, "") if uid_label else "")
            if uid:
                idx.by_uid[(ns, uid)] = o
            if own and own.get("kind") == "Job":
                idx.by_name[(ns, own["name"])] = o
        return idx

    def find(self, job: dict[str, Any]) -> dict[str, Any] | None:
        m = meta(job)
        ns = m.get("namespace", "")
        return self.by_uid.get((ns, m.get("uid", ""))) or self.by_name.get((ns, m.get("name", "")))


def kai_job_scheduling(
    podgroup: dict[str, Any] | None, pods: list[Observed], project_of_queue: dict[str, str]
) -> JobScheduling:
    """``pods`` are the job's mapped pods (their inventory states)."""
    if podgroup is None:
        return pod_job_scheduling(pods)
    spec, status = podgroup.get("spec") or {}, podgroup.get("status") or {}
    queue = spec.get("queue") or queue_label(meta(podgroup).get("labels"))
    js = JobScheduling(queue=queue, project=project_of_queue.get(queue, queue))
    preemptibility = spec.get("preemptibility")
    if preemptibility:
        js.preemptible = preemptibility != "non-preemptible"
    conds = [c for c in status.get("schedulingConditions") or [] if isinstance(c, dict)]
    if conds:
        c = conds[-1]
        reasons = [r for r in c.get("reasons") or [] if isinstance(r, dict)]
        js.scheduling = {
            "source": "kai",
            "type": c.get("type", ""),
            "status": "False",  # KAI's condition says "Unschedulable...: True"; normalized: scheduled = False
            "reason": reasons[0].get("reason") if reasons else (c.get("reason") or ""),
            "reasons": [
                {"reason": r.get("reason", ""), "message": redact_text(r.get("message", ""))} for r in reasons
            ],
            "message": redact_text(c.get("message") or ""),
            "since": c.get("lastTransitionTime"),
            "nodepool": c.get("nodePool") or "",
        }
    js.admitted = any(p.state.get("node") for p in pods)
    if js.scheduling is None and not js.admitted:
        js.scheduling = pod_job_scheduling(pods).scheduling
    return js


def kueue_job_scheduling(
    workload: dict[str, Any] | None, pods: list[Observed], local_queues: dict[tuple[str, str], str]
) -> JobScheduling:
    if workload is None:
        return pod_job_scheduling(pods)
    m, spec, status = meta(workload), workload.get("spec") or {}, workload.get("status") or {}
    lq = spec.get("queueName", "")
    cq = (
        (status.get("admission") or {}).get("clusterQueue")
        or local_queues.get((m.get("namespace", ""), lq))
        or lq
    )
    js = JobScheduling(queue=cq, project=cq)
    conds = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    admitted = (conds.get("Admitted") or {}).get("status") == "True"
    js.admitted = admitted
    js.waiting_for_admission = not admitted and (conds.get("Finished") or {}).get("status") != "True"
    # The most telling condition: an eviction, else the quota reservation.
    for ctype in ("Evicted", "QuotaReserved"):
        c = conds.get(ctype)
        if not c or (ctype == "Evicted" and c.get("status") != "True"):
            continue
        js.scheduling = {
            "source": "kueue",
            "type": ctype,
            "status": c.get("status", ""),
            "reason": c.get("reason") or "",
            "message": redact_text(c.get("message") or ""),
            "since": c.get("lastTransitionTime"),
        }
        break
    return js


def pod_job_scheduling(pods: list[Observed]) -> JobScheduling:
    """kube-scheduler: the PodScheduled=False condition of the job's first unscheduled pod."""
    js = JobScheduling()
    for p in sorted(pods, key=lambda p: p.name):
        c = (p.state.get("conditions") or {}).get("PodScheduled") or {}
        if c.get("status") == "False":
            js.scheduling = {
                "source": "k8s",
                "type": "PodScheduled",
                "status": "False",
                "reason": c.get("reason") or "",
                "message": redact_text(c.get("message") or ""),
                "since": c.get("since"),
            }
            break
    js.admitted = any(p.state.get("node") for p in pods)
    return js


def most_common_namespace(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """queue → the namespace most of its jobs live in (fallback when namespaces carry no queue label)."""
    counts: dict[str, Counter[str]] = {}
    for queue, ns in pairs:
        counts.setdefault(queue, Counter())[ns] += 1
    return {q: c.most_common(1)[0][0] for q, c in counts.items()}
