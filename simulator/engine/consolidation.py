"""KAI's consolidation action: room for a job by moving running preemptible jobs, none of them stopped for good.

When a preemptible job fits nowhere and neither reclaim nor preemption lets it in, KAI evicts running
preemptible jobs (of any queue) and allocates them again elsewhere in the same step; the move stands only
if the job and every moved job are placed (its ``allPodsReallocated``), and only when the cluster has the
job's GPUs idle in total. Moved jobs keep their queue's use, so no quota rule is involved.

Here: whole GPUs only (a share or a MIG instance is neither moved nor made room for), and not on pools that
count CPU and memory. Jobs are tried lowest priority first, then the smallest, then the newest, adding one
at a time until a set works; each moved job's pods then go, largest first, to the most allocated node that
takes them, in the same pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..scenario.model import NON_PREEMPTIBLE_PRIORITY
from . import lifecycle, messages

if TYPE_CHECKING:
    from ..state import SimJob
    from .placement import Placer
    from .world import World

MAX_MOVED = 8  # jobs moved for one job at most


def _whole(job: SimJob) -> bool:
    return not (job.shared or job.mig_profile) and float(job.gpus_per_pod).is_integer()


def movable(world: World, job: SimJob) -> list[SimJob]:
    """Running preemptible jobs that could be moved for ``job``, in the order they are tried."""
    out = []
    for other in world.jobs.values():
        if other is job or other.priority_value >= NON_PREEMPTIBLE_PRIORITY or not _whole(other):
            continue
        if other.state not in ("Pending", "Running"):
            continue
        pods = world.pods_of(other)
        if len(pods) == other.pods and all(
            p.node is not None and p.phase in ("Pending", "Running") for p in pods
        ):
            out.append(other)
    out.sort(
        key=lambda j: (
            j.priority_value,
            j.pods * j.gpus_per_pod,
            -j.submit_at.timestamp(),
            -world.creation_order.get(j.name, 0),
        )
    )
    return out


def plan(world: World, placer: Placer, job: SimJob) -> tuple[list[SimJob], list[tuple[str, Any]]]:
    """The jobs to move so that ``job`` fits, and where the job goes once they have moved (the placement every
    moved job was checked to fit beside: bound anywhere else, one of them might not); ([], []) when no move
    works."""
    if job.priority_value >= NON_PREEMPTIBLE_PRIORITY or not _whole(job) or placer.counts_resources:
        return [], []
    need = job.pods * int(job.gpus_per_pod)
    if sum(len(free) for free in placer.free.values()) < need:
        return [], []  # KAI: not enough idle GPUs in the cluster for the job
    key = ("consolidation-failed", placer.shape(job), job.pods, job.gpus_per_pod)
    failed = placer.memo.get(key)
    if failed is not None and failed[0] == placer.version:
        return [], []  # a job of this shape found no move since the last bind or eviction
    chosen: list[SimJob] = []
    extra: dict[str, list[int]] = {}
    for victim in movable(world, job)[: MAX_MOVED * 4]:
        chosen.append(victim)
        for pod in world.pods_of(victim):
            extra.setdefault(pod.node or "", []).extend(pod.gpu_indices)
        placement = placer.place(job, extra)[0]
        where = _all_placed_again(placer, chosen, extra, placement) if placement is not None else None
        if placement is not None and where is not None:
            for victim in chosen:
                victim.moved_to = where[victim.name]
            return chosen, placement
        if len(chosen) >= MAX_MOVED:
            break
    placer.memo[key] = (placer.version, None)
    return [], []


def _all_placed_again(
    placer: Placer, moved: list[SimJob], extra: dict[str, list[int]], placement: list[tuple[str, object]]
) -> dict[str, list[str]] | None:
    """Where each moved job's pods go (job -> a node per pod) in what is free once the job has taken its place;
    None when one of them does not fit."""
    where: dict[str, list[str]] = {}
    room = {n: len(free) + len(extra.get(n, ())) for n, free in placer.free.items()}
    for node, gpus in placement:
        room[node] -= len(gpus)  # type: ignore[arg-type]
    for victim in sorted(moved, key=lambda j: -j.gpus_per_pod):
        ok = [n for n, why in placer.filters(victim).items() if why is None]
        gpp = int(victim.gpus_per_pod)
        for _ in range(victim.pods):
            fits = [n for n in ok if room.get(n, 0) >= gpp]
            if not fits:
                return None
            best = min(fits, key=lambda n: (room[n], placer.order[n]))
            room[best] -= gpp
            where.setdefault(victim.name, []).append(best)
    return where


def move(world: World, placer: Placer, job: SimJob, moved: list[SimJob], alloc: dict[str, float]) -> None:
    """Evict the moved jobs with KAI's consolidation message (``place_moved`` binds them again)."""
    from .quota import mark_preempted, record_preemption

    touched = {p.node for v in moved for p in world.pods_of(v) if p.node}
    for victim in moved:
        record_preemption(world, "consolidate", victim, job, alloc)
        for pod in world.pods_of(victim):
            msg = messages.kai_consolidate_message(pod.namespace, pod.name)
            world.emit(world.involved_group(victim), "Evict", msg, component="kai-scheduler")
            alloc[victim.project] -= pod.gpus_requested
        mark_preempted(world, victim, job)
        lifecycle.restart_job(
            world, victim, "preempted", status_reason="Preempted", message="Preempted by the scheduler"
        )
    placer.refresh(touched)


def place_moved(world: World, placer: Placer, moved: list[SimJob], alloc: dict[str, float]) -> None:
    """Bind the moved jobs again once the job has its place, each on the nodes the plan found room on (placed
    anew in another order, one could find its room taken by another: KAI's move stands only with every moved
    job placed); one that no longer fits there waits."""
    for victim in sorted(moved, key=lambda j: -j.gpus_per_pod):
        placement = placer.place_on(victim, victim.moved_to) if victim.moved_to else placer.place(victim)[0]
        victim.moved_to = []
        if placement is None or len(world.pods_of(victim)) != len(placement):
            continue
        lifecycle.bind(world, victim, placement)
        placer.commit(placement, victim)
        victim.running_on = []
        alloc[victim.project] = round(alloc[victim.project] + victim.pods * victim.gpus_per_pod, 4)
