"""One scheduling pass per tick: queue policy first, then nodes.

Ordering: KAI serves queue by queue as its proportion plugin orders them
(``proportion.serve``: fair share, deserved quota, queue priority, share ratio),
each queue's inference work before its train work, oldest first; Kueue by queue
priority (higher first), then job priority class (inference before train), then
submission time. A job that cannot go does not block the ones behind it (KAI's
allocate action and Kueue's BestEffortFIFO both let smaller work pass).

KAI / Run:ai: a queue may not exceed its ``limit`` (``OverLimit``); inference
(non-preemptible) work must fit in the deserved quota (``NonPreemptibleOverQuota``);
train work may go over quota into idle GPUs. When a gang does not fit, a queue
that stays within its fair share reclaims train work from queues over theirs
(``proportion``'s rules), and inference work preempts train work of its own
queue, also to bring the queue back within its limit.

Kueue: a ClusterQueue per project, all in one cohort. A workload is admitted
when its GPUs fit in the unused cohort quota without passing the queue's limit
(nominal + borrowing limit); otherwise it stays suspended with QuotaReserved=False
(Pending, ``insufficient unused quota …``). Within its nominal quota it reclaims
from borrowers; inference preempts train in its own ClusterQueue. Admitted pods
are then bound by default-scheduler (all or nothing, as with waitForPodsReady).
Inference work is never preempted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from . import consolidation, kueue, lifecycle, messages, proportion
from .limits import cpu_memory_over_limit
from .placement import Placer
from .quota import (
    cohort_quota,
    kai_queues,
    kai_victims,
    kueue_available,
    kueue_victims,
    preempt_kai,
    preempt_kueue,
    usage,
)
from .status import update_projects

if TYPE_CHECKING:
    from ..state import SimJob
    from .world import World

__all__ = ["order_key", "schedule", "update_projects"]
REPEAT_EVENT_S = 300  # an unschedulable pod is retried and re-reported at least every 5 minutes


def order_key(world: World, job: SimJob) -> tuple:
    proj = world.projects[job.project]
    return (-proj.priority, 0 if job.priority_class == "inference" else 1, job.submit_at, job.name)


def schedule(world: World) -> None:
    alloc, alloc_np = usage(world)
    waiting: list[SimJob] = []
    if world.scheduler == "kueue" and world.scenario.kueue is not None:
        kueue.admit_pass(world, lambda j: _admit(world, j), lambda j, m: _wait_kueue(world, j, m, waiting))
    elif world.scheduler == "kueue":
        _admit_kueue(world, alloc, alloc_np, waiting)
    placer = Placer(world)  # after admission: Kueue preemption may have freed GPUs
    pending = [
        j for j in world.jobs.values() if j.state == "Pending" and not j.suspended and _unbound(world, j)
    ]
    candidates: Iterable[SimJob]
    if world.scheduler == "kai":  # queue by queue, as KAI's proportion plugin orders them
        candidates = proportion.serve(kai_queues(world, placer, alloc), pending) if pending else ()
    else:
        candidates = sorted(pending, key=lambda j: order_key(world, j))
    failed: dict[tuple, tuple[int, int, dict[str, int]]] = {}
    for job in candidates:
        r = job.pods * job.gpus_per_pod
        # a job the scenario starts running (running_on) is already there, over its quota or not, as a KAI
        # test fixture binds it; the quota checks hold it only once it restarts
        if world.scheduler == "kai" and not job.running_on:
            blocked = _kai_quota_block(world, job, alloc, alloc_np, r)
            if blocked and blocked[0] == "OverLimit" and job.priority_class == "inference":
                # KAI's preempt action: train work of the job's own queue may go to bring it within its limit
                victims = kai_victims(world, placer, job, alloc, over_limit=_over_limit(world, job, alloc, r))
                if victims:
                    preempt_kai(world, placer, job, victims, alloc, alloc_np)
                    blocked = _kai_quota_block(world, job, alloc, alloc_np, r)
            if blocked:
                _unschedulable(world, job, "Unschedulable", f"{blocked[0]}: {blocked[1]}.", [blocked[2]])
                waiting.append(job)
                continue
        key = (
            placer.shape(job),
            job.pods,
            job.gpus_per_pod,
            job.gpu_fraction,
            job.gpu_memory_mib,
            job.mig_profile,
            job.mig_count,
            job.cpu_millis,
            job.memory_bytes,
        )
        hit = failed.get(key)
        counts: dict[str, Any]
        # a job the scenario starts running on given nodes (as a KAI test fixture binds it) goes there
        pinned = placer.place_on(job, job.running_on) if job.running_on else None
        if pinned is not None:
            placement, placed, counts = pinned, job.pods, {}
        elif hit and hit[0] == placer.version:
            placement, placed, counts = None, hit[1], hit[2]
        else:
            placement, placed, counts = placer.place(job)
        if placement is None and world.scheduler == "kai":
            victims = kai_victims(world, placer, job, alloc)
            if victims:
                preempt_kai(world, placer, job, victims, alloc, alloc_np)
                placement, placed, counts = placer.place(job)
            elif _consolidated(world, placer, job, alloc):
                continue
        if placement is None:
            failed[key] = (placer.version, placed, counts)
            _node_unschedulable(world, placer, job, placed, counts, key)
            waiting.append(job)
            continue
        lifecycle.bind(world, job, placement)
        placer.commit(placement, job)
        job.running_on = []  # a restart goes wherever the scheduler puts it
        if world.scheduler == "kai":
            alloc[job.project] = round(alloc[job.project] + r, 4)
            if job.priority_class == "inference":
                alloc_np[job.project] = round(alloc_np[job.project] + r, 4)
    _queue_positions(world, waiting)


def _consolidated(world: World, placer: Placer, job: SimJob, alloc: dict[str, float]) -> bool:
    """KAI's consolidation for a job nothing else lets in: move running jobs, bind the job and, in the same
    step (KAI pipelines them), the moved jobs; whether the job was bound."""
    moved, placement = consolidation.plan(world, placer, job)
    if not moved:
        return False
    consolidation.move(world, placer, job, moved, alloc)
    lifecycle.bind(world, job, placement)
    placer.commit(placement, job)
    job.running_on = []
    alloc[job.project] = round(alloc[job.project] + job.pods * job.gpus_per_pod, 4)
    consolidation.place_moved(world, placer, moved, alloc)
    return True


def _unbound(world: World, job: SimJob) -> bool:
    pods = world.pods_of(job)
    return bool(pods) and all(p.node is None for p in pods)


def _over_limit(world: World, job: SimJob, alloc: dict[str, float], r: float) -> float:
    """How many GPUs the job's queue holds past what its limit (or its department's) leaves room for."""
    proj = world.projects[job.project]
    over = 0.0 if proj.limit_gpus is None else alloc[proj.name] + r - proj.limit_gpus
    dept = world.departments.get(proj.department or "")
    if dept is not None and dept.limit_gpus is not None:
        used = sum(alloc[p.name] for p in world.projects.values() if p.department == dept.name)
        over = max(over, used + r - dept.limit_gpus)
    return max(0.0, over)


def _kai_quota_block(
    world: World, job: SimJob, alloc: dict[str, float], alloc_np: dict[str, float], r: float
) -> tuple[str, str, dict[str, Any]] | None:
    proj = world.projects[job.project]
    details = {
        "queueDetails": {
            "name": proj.name,
            "queueRequestedResources": {"gpu": proj.requested_gpus},
            "queueDeservedResources": {"gpu": proj.quota_gpus},
            "queueAllocatedResources": {"gpu": alloc[proj.name]},
            "queueAllocatedNonPreemptibleResources": {"gpu": alloc_np[proj.name]},
            "queueResourceLimits": {"gpu": -1 if proj.limit_gpus is None else proj.limit_gpus},
            "podGroupRequestedResources": {"gpu": r},
        }
    }
    if proj.limit_gpus is not None and alloc[proj.name] + r > proj.limit_gpus + 1e-9:
        msg = messages.kai_over_limit(proj.name, proj.limit_gpus, alloc[proj.name], r)
        return "OverLimit", msg, {"reason": "OverLimit", "message": msg, "details": details}
    over = cpu_memory_over_limit(
        world, job, proj.name, {proj.name}, proj.limit_cpu_millis, proj.limit_memory_bytes
    )
    if over:
        return "OverLimit", over, {"reason": "OverLimit", "message": over, "details": details}
    dept = world.departments.get(proj.department or "")
    if dept is not None:
        # KAI checks every queue up the hierarchy with the same policy: the parent queue's limit, and
        # for non-preemptible work its deserved quota, each named in KAI's own words.
        used = round(sum(alloc[p.name] for p in world.projects.values() if p.department == dept.name), 4)
        used_np = round(
            sum(alloc_np[p.name] for p in world.projects.values() if p.department == dept.name), 4
        )
        ddetails = {
            "queueDetails": {
                "name": dept.name,
                "queueRequestedResources": {"gpu": dept.requested_gpus},
                "queueDeservedResources": {"gpu": dept.quota_gpus},
                "queueAllocatedResources": {"gpu": used},
                "queueAllocatedNonPreemptibleResources": {"gpu": used_np},
                "queueResourceLimits": {"gpu": -1 if dept.limit_gpus is None else dept.limit_gpus},
                "podGroupRequestedResources": {"gpu": r},
            }
        }
        if dept.limit_gpus is not None and used + r > dept.limit_gpus + 1e-9:
            msg = messages.kai_over_limit(dept.name, dept.limit_gpus, used, r)
            return "OverLimit", msg, {"reason": "OverLimit", "message": msg, "details": ddetails}
        over = None
        if dept.limit_cpu_millis is not None or dept.limit_memory_bytes is not None:
            members = {p.name for p in world.projects.values() if p.department == dept.name}
            over = cpu_memory_over_limit(
                world, job, dept.name, members, dept.limit_cpu_millis, dept.limit_memory_bytes
            )
        if over:
            return "OverLimit", over, {"reason": "OverLimit", "message": over, "details": ddetails}
        if (
            job.priority_class == "inference"
            and used_np + r > proportion.deserved_gpus(dept.quota_gpus) + 1e-9
        ):
            msg = messages.kai_non_preemptible_over_quota(dept.name, r, dept.quota_gpus, used_np)
            return (
                "NonPreemptibleOverQuota",
                msg,
                {"reason": "NonPreemptibleOverQuota", "message": msg, "details": ddetails},
            )
    if (
        job.priority_class == "inference"
        and alloc_np[proj.name] + r > proportion.deserved_gpus(proj.quota_gpus) + 1e-9
    ):
        msg = messages.kai_non_preemptible_over_quota(proj.name, r, proj.quota_gpus, alloc_np[proj.name])
        return (
            "NonPreemptibleOverQuota",
            msg,
            {"reason": "NonPreemptibleOverQuota", "message": msg, "details": details},
        )
    return None


def _node_unschedulable(
    world: World, placer: Placer, job: SimJob, placed: int, counts: dict[str, int], key: tuple
) -> None:
    # The per-node reasons depend only on the job's shape and the free counts: every job of one
    # shape that fails while the placer's version holds shares the text (one node scan, not one per job).
    memo = placer.memo.get(("fit", key))
    if memo is not None and memo[0] == placer.version and memo[1][0] is counts:
        text = memo[1][1]
    else:
        reasons = placer.reasons(job, counts)
        if world.scheduler == "kai":
            text = messages.kai_fit_reasons(reasons)
        else:
            text = messages.kube_fit_message(len(world.nodes), reasons)
        placer.memo[("fit", key)] = (placer.version, (counts, text))
    if world.scheduler == "kai":
        first = min(world.pods_of(job), key=lambda p: p.index)
        msg = messages.kai_fit_message(job.namespace, first.name, placed, job.pods, text)
        _unschedulable(world, job, "Unschedulable", msg, [])
    else:
        _unschedulable(world, job, None, text, [], pod_only=True)


def _unschedulable(
    world: World,
    job: SimJob,
    reason: str | None,
    message: str,
    reasons: list[dict[str, Any]],
    *,
    pod_only: bool = False,
) -> None:
    """Record why a job waits: job condition (PodGroup/Workload), pod condition, and throttled events."""
    if not pod_only and (job.condition_reason != reason or job.condition_message != message):
        job.condition_reason, job.condition_message, job.condition_reasons = reason, message, reasons
        job.condition_changed_at = world.now
        world.touch(job)
    kai = world.scheduler == "kai"
    if job.suspended:  # Kueue workload without pods
        if _due(world, f"wl/{job.name}", message):
            world.emit(world.involved_group(job), "Pending", message, component="kueue-admission")
        return
    if kai and _due(world, f"pg/{job.name}", message):
        world.emit(world.involved_group(job), "Unschedulable", message, component="kai-scheduler")
    for pod in world.pods_of(job):
        if pod.scheduled_message != message:
            pod.scheduled_message, pod.scheduled_reason = message, "Unschedulable"
            world.touch(pod)
        if _due(world, f"pod/{pod.namespace}/{pod.name}", message):
            if kai:
                world.emit(
                    world.involved_pod(pod),
                    "Unschedulable",
                    message,
                    type="Warning",
                    component="kai-scheduler",
                )
            else:
                world.emit(
                    world.involved_pod(pod),
                    "FailedScheduling",
                    message,
                    type="Warning",
                    component="default-scheduler",
                )


def _due(world: World, key: str, message: str) -> bool:
    last = world.ledger.last_sched_event.get(key)
    if last and last[0] == message and world.now - last[1] < timedelta(seconds=REPEAT_EVENT_S):
        return False
    world.ledger.last_sched_event[key] = (message, world.now)
    return True


def _queue_positions(world: World, waiting: list[SimJob]) -> None:
    seen: dict[str, int] = {}
    for job in sorted(waiting, key=lambda j: order_key(world, j)):
        seen[job.project] = seen.get(job.project, 0) + 1
        if job.queue_position != seen[job.project]:
            job.queue_position = seen[job.project]
            world.touch(job)


def _admit_kueue(
    world: World, usage_: dict[str, float], usage_np: dict[str, float], waiting: list[SimJob]
) -> None:
    queue = sorted(
        (j for j in world.jobs.values() if j.state == "Pending" and j.suspended),
        key=lambda j: order_key(world, j),
    )
    quota_total = cohort_quota(world)
    unused = quota_total - sum(usage_.values())  # kept up to date below: one sum per change, not per workload
    for job in queue:
        r = job.pods * job.gpus_per_pod
        avail = kueue_available(world, job.project, usage_, unused)
        if r > avail:
            victims = kueue_victims(world, job, usage_)
            if victims:
                preempt_kueue(world, job, victims, usage_)
                unused = quota_total - sum(usage_.values())
                avail = kueue_available(world, job.project, usage_, unused)
        if r > avail:
            msg = messages.kueue_insufficient(math.ceil(r - avail - 1e-9))
            _unschedulable(world, job, "Pending", msg, [])
            waiting.append(job)
            continue
        usage_[job.project] += r
        unused = quota_total - sum(usage_.values())
        if job.priority_class == "inference":
            usage_np[job.project] += r
        _admit(world, job)


def _wait_kueue(world: World, job: SimJob, message: str, waiting: list[SimJob]) -> None:
    _unschedulable(world, job, "Pending", message, [])
    waiting.append(job)


def _admit(world: World, job: SimJob) -> None:
    wait = int((world.now - (job.pending_since or world.now)).total_seconds())
    cq = job.project
    group = world.involved_group(job)
    world.emit(
        group,
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {cq}, wait time since queued was {wait}s",
        component="kueue-admission",
    )
    world.emit(
        group,
        "Admitted",
        f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s",
        component="kueue-admission",
    )
    world.emit(
        world.involved_job(job), "Started", f"Admitted by clusterQueue {cq}", component="kueue-job-controller"
    )
    job.admitted = True
    job.admitted_at = world.now
    job.suspended = False
    job.condition_reason = job.condition_message = None
    job.condition_reasons = []
    job.condition_changed_at = world.now
    since = job.pending_since
    lifecycle.create_pods(world, job)
    job.pending_since = since  # still waiting since it was queued
    world.touch(job)
