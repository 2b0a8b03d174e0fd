"""Queue policy: usage and preemption victims (KAI deserved/limit, Kueue nominal/cohort).

Only preemptible (train) work is ever a victim. KAI: a queue reclaims while it stays within its fair share,
from queues over their fair share (or over their deserved quota while it stays within its own), compared where
the two diverge in the hierarchy of departments (parent queues) and projects (``proportion``). Kueue:
cross-queue victims come only from queues over their nominal quota at the moment they are picked, and only for
a queue that stays within its own.

KAI's fair shares, which these rules read, are divided in ``division``; the queues' status is ``status``.
"""
# size: the rules that evict: KAI's victims with their requeue check, and Kueue's single-cohort model

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING

from ..scenario.model import TRAIN_PRIORITY
from . import cpumem, lifecycle, messages, proportion
from .division import fair_shares, requested_gpus

if TYPE_CHECKING:
    from ..state import SimJob
    from .placement import Placer
    from .world import World


def department_nominal(world: World, dept: str) -> float:
    """A department's own nominal quota (Kueue: the Cohort's nominalQuota) on top of its projects' quotas."""
    d = world.departments[dept]
    return max(0.0, d.quota_gpus - sum(p.quota_gpus for p in world.projects.values() if p.department == dept))


def cohort_quota(world: World) -> float:
    """All nominal quota of the cohort tree: the ClusterQueues' and the department Cohorts' own."""
    return sum(p.quota_gpus for p in world.projects.values()) + sum(
        department_nominal(world, d) for d in world.departments
    )


def department_used(world: World, dept: str, used: dict[str, float]) -> float:
    return round(sum(used[p.name] for p in world.projects.values() if p.department == dept), 4)


def usage(world: World) -> tuple[dict[str, float], dict[str, float]]:
    """GPUs per project held by bound pods (KAI) or reserved by admitted workloads (Kueue); and non-preemptible.

    Fractions count as themselves (KAI GPU sharing), MIG instances as their "<n>g" under KAI."""
    alloc, alloc_np = _usage(world)
    return {k: round(v, 4) for k, v in alloc.items()}, {k: round(v, 4) for k, v in alloc_np.items()}


def _usage(world: World) -> tuple[dict[str, float], dict[str, float]]:
    alloc: dict[str, float] = dict.fromkeys(world.projects, 0)
    alloc_np: dict[str, float] = dict.fromkeys(world.projects, 0)
    if world.scheduler == "kueue":
        for job in world.jobs.values():
            if job.admitted and job.state in ("Pending", "Running"):
                alloc[job.project] += job.pods * job.gpus_per_pod
                if job.priority_class == "inference":
                    alloc_np[job.project] += job.pods * job.gpus_per_pod
        return alloc, alloc_np
    for pod in world.pods.values():
        if pod.node is not None and pod.deleted_at is None and pod.phase in ("Pending", "Running"):
            job = world.jobs[pod.job]
            alloc[job.project] += pod.gpus_requested
            if job.priority_class == "inference":
                alloc_np[job.project] += pod.gpus_requested
    return alloc, alloc_np


def _bound_jobs(world: World, placer: Placer) -> list[SimJob]:
    """Jobs holding GPUs, by name. Cached for the pass until the placer's version moves (bind or preemption)."""
    cached = placer.memo.get("bound")
    if cached is not None and cached[0] == placer.version:
        return cached[1]
    names = {
        p.job
        for p in world.pods.values()
        if p.node is not None and p.deleted_at is None and p.phase in ("Pending", "Running")
    }
    bound = [world.jobs[n] for n in sorted(names)]
    placer.memo["bound"] = (placer.version, bound)
    return bound


def _started(job: SimJob) -> datetime:
    return job.started_at or job.admitted_at or job.submit_at


def _newest_first(world: World, job: SimJob) -> tuple[float, int]:
    """Sort key putting the most recently created job first: KAI takes victims of a queue in reverse job order
    (lowest priority, then newest PodGroup). A job keeps its PodGroup through restarts, so its age is its
    submission; jobs submitted together were created in the scenario's order."""
    return (-job.submit_at.timestamp(), -world.creation_order.get(job.name, 0))


#
# KAI
#


def top_queue(world: World, project: str) -> tuple[str, str]:
    """The project's queue at the top level of KAI's hierarchy: ("department", name) or ("project", name)."""
    dept = world.projects[project].department
    if dept and dept in world.departments:
        return ("department", dept)
    return ("project", project)


def _top_used(world: World, top: tuple[str, str], alloc: dict[str, float]) -> float:
    return department_used(world, top[1], alloc) if top[0] == "department" else alloc[top[1]]


def _top_quota(world: World, top: tuple[str, str]) -> float:
    return proportion.deserved_gpus(
        world.departments[top[1]].quota_gpus if top[0] == "department" else world.projects[top[1]].quota_gpus
    )


def _overage(world: World, reclaimer: str, victim: str, alloc: dict[str, float]) -> float:
    """How far over quota the victim's queue is at the level the two queues compare at."""
    theirs = top_queue(world, victim)
    if top_queue(world, reclaimer) == theirs:
        return alloc[victim] - proportion.deserved_gpus(world.projects[victim].quota_gpus)
    return _top_used(world, theirs, alloc) - _top_quota(world, theirs)


def kai_queues(world: World, placer: Placer, alloc: dict[str, float]) -> proportion.Queues:
    """KAI's queue attributes for this pass. Fair shares follow the queues' demand (use plus waiting requests),
    which binding and evicting within a pass do not change: computed once per pass."""
    cached = placer.memo.get("kai-fair")
    if cached is None:
        requested, _pending, _admitted = requested_gpus(world, alloc)
        projects, departments = fair_shares(world, requested)
        fair: dict[proportion.Key, float] = {("project", n): v for n, v in projects.items()}
        fair.update({("department", n): v for n, v in departments.items()})
        cached = (placer.version, fair)
        placer.memo["kai-fair"] = cached
        placer.memo["kai-cpumem"] = (placer.version, cpumem.build(world) if cpumem.wanted(world) else None)
    cm = placer.memo["kai-cpumem"][1]
    return proportion.Queues(world, cached[1], alloc, cm=cm)


def _candidates(
    world: World,
    placer: Placer,
    job: SimJob,
    alloc: dict[str, float],
    queues: proportion.Queues,
    need: cpumem.Vec,
    over_limit: float,
) -> list[tuple[str, SimJob]]:
    """The jobs that may go for this one, in the order they are taken: other queues' train work its queue may
    reclaim (lowest queue priority, most over quota, lowest job priority, newest), then its own queue's
    preemptible work of a lower priority (KAI's preempt action: lowest, then newest)."""
    proj = world.projects[job.project]
    r = job.pods * job.gpus_per_pod
    cands: list[tuple[str, SimJob]] = []
    reclaim = (
        not over_limit
        and proportion.can_reclaim(queues, proj.name, r, need)
        and any(proportion.candidate(queues, proj.name, r, n, need) for n in world.projects)
    )
    if not reclaim and job.priority_value <= TRAIN_PRIORITY:
        return []  # no queue to reclaim from, nothing of its own of a lower priority to preempt
    bound = _bound_jobs(world, placer)
    if reclaim:
        others = [
            j
            for j in bound
            if j.project != proj.name
            and j.priority_class == "train"
            and proportion.candidate(queues, proj.name, r, j.project, need)
        ]
        others.sort(
            key=lambda j: (
                world.projects[j.project].priority,
                -_overage(world, proj.name, j.project, alloc),
                j.priority_value,
                *_newest_first(world, j),
            )
        )
        cands += [("reclaim", j) for j in others]
    same = [
        j
        for j in bound
        if j.project == proj.name and j.priority_class == "train" and j.priority_value < job.priority_value
    ]
    same.sort(key=lambda j: (j.priority_value, *_newest_first(world, j)))
    cands += [("preempt", j) for j in same]
    return cands


def kai_victims(
    world: World, placer: Placer, job: SimJob, alloc: dict[str, float], *, over_limit: float = 0.0
) -> list[tuple[str, SimJob]]:
    """Victims that let the job in (proportion's rules for other queues' train work; an inference job also
    preempts train work of its own queue, newest first), or [] when no such set makes it fit.

    ``over_limit``: GPUs the job's own queue must give up first, its limit (or its department's) being in the
    way; only its own train work can make room then (KAI's preempt action checks the queue's capacity with the
    victims gone)."""
    proj = world.projects[job.project]
    r = job.pods * job.gpus_per_pod
    queues = kai_queues(world, placer, alloc)
    need = cpumem.job_need(job) if queues.cm is not None else cpumem.ZERO
    cands = _candidates(world, placer, job, alloc, queues, need, over_limit)
    if not cands:
        return []
    chosen: list[tuple[str, SimJob]] = []
    remaining: dict[proportion.Key, float] = {}  # what each queue holds once the chosen victims are gone
    cm_remaining: dict[proportion.Key, cpumem.Vec] = {}  # the same in CPU and memory
    extra: dict[str, list[int]] = {}
    released: list = []
    freed = 0.0  # of the job's own queue
    for kind, victim in cands:
        pods = [p for p in world.pods_of(victim) if p.node is not None]
        if kind == "preempt":
            freed += sum(p.gpus_requested for p in pods)
        if kind == "reclaim":
            if not proportion.allowed(queues, proj.name, r, victim.project, remaining, need, cm_remaining):
                continue  # earlier victims already brought its queue back to its share
            freed_cm = cpumem.job_need(victim) if queues.cm is not None else cpumem.ZERO
            proportion.take(
                queues,
                victim.project,
                sum(p.gpus_requested for p in pods),
                remaining,
                freed_cm,
                cm_remaining,
            )
        chosen.append((kind, victim))
        for pod in pods:
            extra.setdefault(pod.node or "", []).extend(pod.gpu_indices)
            released.append(pod)
        # Whole GPUs only: the fast path; shares, MIG instances or counted CPU/memory: the rooms.
        simple = (
            not placer.counts_resources
            and not (job.shared or job.mig_profile)
            and not any(p.shared or p.mig_instances for p in released)
        )
        placement, _placed, _counts = (
            placer.place(job, extra) if simple else placer.place(job, released=released)
        )
        if (
            placement is not None
            and freed >= over_limit - 1e-9
            and proportion.within_bounds(queues, proj.name, r, remaining, need, cm_remaining)
            and _placed_after_requeue(world, placer, job, chosen, queues, released, simple)
        ):
            return chosen
    return []


def _placed_after_requeue(
    world: World,
    placer: Placer,
    job: SimJob,
    chosen: list[tuple[str, SimJob]],
    queues: proportion.Queues,
    released: list,
    simple: bool,
) -> bool:
    """Whether the job is still placed once its victims are back in the queues.

    KAI's solver evicts the victims, then allocates them again together with the job, in its allocate order
    (``proportion.serve``, with the queues' use less the victims): a victim its queue serves before the job
    takes its GPUs back, and the eviction stands only if the job still fits in what the others left. Without
    this a reclaim could be undone by the next pass's allocation, and redone, for ever."""
    victims = {v.name: v for _kind, v in chosen}
    alloc = dict(queues.alloc)
    for v in victims.values():
        alloc[v.project] -= sum(p.gpus_requested for p in world.pods_of(v) if p.node is not None)
    # The jobs that decide the order up to the job's turn: in the queues involved (and their departments'
    # siblings), the waiting jobs a queue would offer before its last victim or the job itself.
    involved = {job.project, *(v.project for v in victims.values())}
    depts = {world.projects[n].department for n in involved} - {None, ""}
    last: dict[str, tuple] = {}
    for j in (job, *victims.values()):
        key = proportion.job_order(world, j)
        last[j.project] = max(last.get(j.project, key), key)
    jobs = [job, *victims.values()]
    for j in world.jobs.values():
        if j is job or j.name in victims or j.state != "Pending" or j.suspended:
            continue
        if j.project in last:
            if proportion.job_order(world, j) < last[j.project] and _waiting(world, j):
                jobs.append(j)
        elif world.projects[j.project].department in depts and _waiting(world, j):
            jobs.append(j)
    retaken: set[str] = set()
    for j in proportion.serve(proportion.Queues(world, queues.fair, alloc, cm=queues.cm), jobs):
        if j is job:
            break
        if j.name in victims:
            retaken.add(j.name)
            alloc[j.project] += sum(p.gpus_requested for p in world.pods_of(j) if p.node is not None)
    if not retaken:
        return True
    left = [p for p in released if p.job not in retaken]
    if simple:
        extra: dict[str, list[int]] = {}
        for pod in left:
            extra.setdefault(pod.node or "", []).extend(pod.gpu_indices)
        return bool(extra) and placer.place(job, extra)[0] is not None
    return bool(left) and placer.place(job, released=left)[0] is not None


def _waiting(world: World, job: SimJob) -> bool:
    pods = world.pods_of(job)
    return bool(pods) and all(p.node is None for p in pods)


def preempt_kai(
    world: World,
    placer: Placer,
    job: SimJob,
    victims: list[tuple[str, SimJob]],
    alloc: dict[str, float],
    alloc_np: dict[str, float],
) -> None:
    touched: set[str] = set()
    mine = world.projects[job.project]
    for kind, victim in victims:
        vq = world.projects[victim.project]
        record_preemption(world, kind, victim, job, alloc, kai_queues(world, placer, alloc).fair)
        for pod in world.pods_of(victim):
            if kind == "reclaim":
                msg = "\n".join(
                    (
                        messages.kai_reclaim_message(pod.namespace, pod.name, job.namespace, job.podgroup),
                        messages.kai_queue_details(
                            vq.name, alloc[vq.name], vq.quota_gpus, vq.fair_share_gpus, vq.priority
                        ),
                        messages.kai_queue_details(
                            mine.name, alloc[mine.name], mine.quota_gpus, mine.fair_share_gpus, mine.priority
                        ),
                    )
                )
            else:
                msg = messages.kai_preempt_message(pod.namespace, pod.name, job.namespace, job.podgroup)
            world.emit(world.involved_group(victim), "Evict", msg, component="kai-scheduler")
            if pod.node:
                touched.add(pod.node)
            alloc[vq.name] -= pod.gpus_requested
        mark_preempted(world, victim, job)
        lifecycle.restart_job(
            world, victim, "preempted", status_reason="Preempted", message="Preempted by the scheduler"
        )
    placer.refresh(touched)


def record_preemption(
    world: World,
    kind: str,
    victim: SimJob,
    by: SimJob,
    used: dict[str, float],
    fair: dict[proportion.Key, float] | None = None,
) -> None:
    """Keep every preemption with the numbers it was decided on (``world.preemptions``); under KAI with the
    preemptor's fair share in the pass (KAI lets a queue reclaim up to it)."""
    world.preemptions.append(
        {
            "time": world.now,
            "kind": kind,  # reclaim (cross-queue) | preempt (same queue, higher priority) | consolidate (moved)
            "victim": f"{victim.namespace}/{victim.name}",
            "victim_project": victim.project,
            "victim_priority_class": victim.priority_class,
            "victim_project_allocated": used[victim.project],
            "victim_project_quota": world.projects[victim.project].quota_gpus,
            "preemptor": f"{by.namespace}/{by.name}",
            "preemptor_project": by.project,
            "preemptor_project_allocated": used[by.project],
            "preemptor_project_quota": world.projects[by.project].quota_gpus,
            "preemptor_project_fair_share": (fair or {}).get(("project", by.project)),
            "preemptor_gpus": by.pods * by.gpus_per_pod,
            # where KAI compared the two queues: "project" (siblings, or two ungrouped projects) or "top"
            # (across departments), with the victim's queue at that level and its use and quota then
            **_compared(world, kind, victim, by, used),
        }
    )


def _compared(
    world: World, kind: str, victim: SimJob, by: SimJob, used: dict[str, float]
) -> dict[str, object]:
    if kind != "reclaim":
        return {}
    theirs = top_queue(world, victim.project)
    quota: float
    if top_queue(world, by.project) == theirs or theirs[0] == "project":
        level, name = "project", victim.project
        allocated, quota = used[victim.project], world.projects[victim.project].quota_gpus
    else:
        level, name = "top", theirs[1]
        allocated, quota = _top_used(world, theirs, used), _top_quota(world, theirs)
    return {
        "compared_at": level,
        "victim_queue": name,
        "victim_queue_allocated": allocated,
        "victim_queue_quota": quota,
    }


def mark_preempted(world: World, victim: SimJob, by: SimJob) -> None:
    victim.preempted_count += 1
    victim.last_preempted_at = world.now
    victim.last_preempted_by = f"{by.namespace}/{by.name}"
    world.touch(victim)


#
# Kueue
#


def kueue_available(
    world: World, project: str, used: dict[str, float], cohort_unused: float | None = None
) -> float:
    """GPUs the ClusterQueue can still reserve: unused cohort quota, capped by nominal + borrowing limit.

    ``cohort_unused`` (total quota minus total use) may be passed when the caller keeps it (one pass over
    10,000 waiting workloads would otherwise sum every queue for each of them)."""
    proj = world.projects[project]
    if cohort_unused is None:
        cohort_unused = cohort_quota(world) - sum(used.values())
    cap = math.inf if proj.limit_gpus is None else proj.limit_gpus - used[project]
    dept = world.departments.get(proj.department or "")
    if dept is not None and dept.limit_gpus is not None:
        # the department Cohort borrows from its parent at most borrowingLimit = limit - its nominal quota
        cap = min(cap, dept.limit_gpus - department_used(world, dept.name, used))
    return int(max(0, min(cohort_unused, cap)))


def kueue_victims(world: World, job: SimJob, used: dict[str, float]) -> list[tuple[str, SimJob]]:
    proj = world.projects[job.project]
    r = job.pods * job.gpus_per_pod
    reclaim = used[proj.name] + r <= proj.quota_gpus and any(
        used[n] > p.quota_gpus for n, p in world.projects.items()
    )
    if not reclaim and job.priority_class != "inference":
        return []  # no borrower to reclaim from, nothing of its own to preempt
    admitted = [
        j
        for j in world.jobs.values()
        if j.admitted and j.state in ("Pending", "Running") and j.priority_class == "train"
    ]
    cands: list[tuple[str, SimJob]] = []
    if reclaim:
        borrowers = [
            j
            for j in admitted
            if j.project != proj.name and used[j.project] > world.projects[j.project].quota_gpus
        ]
        borrowers.sort(key=lambda j: (world.projects[j.project].priority, -_started(j).timestamp(), j.name))
        cands += [("reclaim", j) for j in borrowers]
    if job.priority_class == "inference":
        same = [j for j in admitted if j.project == proj.name]
        same.sort(key=lambda j: (-_started(j).timestamp(), j.name))
        cands += [("preempt", j) for j in same]
    tentative = dict(used)
    chosen: list[tuple[str, SimJob]] = []
    for kind, victim in cands:
        vq = world.projects[victim.project]
        if kind == "reclaim" and tentative[vq.name] <= vq.quota_gpus:
            continue
        chosen.append((kind, victim))
        tentative[vq.name] -= victim.pods * victim.gpus_per_pod
        if r <= kueue_available(world, proj.name, tentative):
            return chosen
    return []


def preempt_kueue(
    world: World, job: SimJob, victims: list[tuple[str, SimJob]], used: dict[str, float]
) -> None:
    group_uid = world.involved_group(job)["uid"]
    for kind, victim in victims:
        record_preemption(world, kind, victim, job, used)
        msg = messages.kueue_preempted(group_uid, job.uid, kind == "reclaim")
        world.emit(world.involved_group(victim), "Preempted", msg, component="kueue-admission")
        world.emit(world.involved_job(victim), "Stopped", msg, component="kueue-job-controller")
        used[victim.project] -= victim.pods * victim.gpus_per_pod
        mark_preempted(world, victim, job)
        lifecycle.restart_job(world, victim, "preempted", status_reason="Preempted", message=msg)
