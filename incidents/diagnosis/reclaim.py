"""Who KAI would evict so that a waiting job starts: preemption within its queue, reclaim from other queues.

When a waiting gang does not fit the free room, KAI looks for victims among running, preemptible (train) jobs:

- **preempt**: a job of the same queue with a lower priority class (inference over train), newest first;
- **reclaim**: a job of another queue that holds more than its fair share (or more than its deserved quota
  while the reclaimer's queue, with the job, stays within its own). The two queues are compared where their
  hierarchies diverge (two projects of one department by their own standing, otherwise their departments).
  The reclaimer's queue must, with the job, stay within its fair share. Victims: lowest queue priority first,
  then the most over its quota, then the newest job.

Victims are taken one at a time, each queue's standing charged as it goes, until the job's gang fits the room
they free; then those not needed are given back. Whole GPUs only: a share or MIG job gets no victims here.

Pure: reads the ``DiagnosisInput`` and a ``QueueOrder``'s standings; no database, no simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from incidents.diagnosis import fit as F
from incidents.diagnosis.queue_order import QueueOrder, Standing, job_queue
from incidents.diagnosis.quota import CLASS_RANK, QuotaAt, is_pending, quota_at
from incidents.diagnosis.scheduling_pass import place
from incidents.diagnosis.types import DiagnosisInput, EntityState

EPS = 1e-6
PREEMPT = "preempt"
RECLAIM = "reclaim"


@dataclass
class Eviction:
    """The victims KAI would take for a waiting job, and where the job's pods would then go."""

    victims: list[Victim]
    nodes: dict[str, int]  # node -> pods of the job


@dataclass
class Victim:
    """A running job KAI would evict, and why it may be taken."""

    job: EntityState
    action: str  # PREEMPT | RECLAIM
    gpus: dict[str, int]  # node -> whole GPUs it frees there

    @property
    def label(self) -> str:
        return self.job.ref.label


def _rank(job: EntityState) -> int:
    return CLASS_RANK.get(job.get("priority_class") or "train", 0)


def _preemptible(di: DiagnosisInput, job: EntityState) -> bool:
    return F.job_request(di, job).preemptible


def _held(di: DiagnosisInput, job: EntityState) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in di.pods_of_job(job):
        if p.get("node") and p.get("phase") in F.ACTIVE_POD_PHASES:
            out[p.get("node")] = out.get(p.get("node"), 0) + int(p.get("gpus") or 0)
    return out


def _units(di: DiagnosisInput, job: EntityState) -> float:
    return sum(_held(di, job).values())


def _levels(order: QueueOrder, mine: str, theirs: str) -> tuple[Standing | None, Standing | None]:
    """The two queues' standings where their hierarchies diverge."""
    pm, pt = order.parent.get(mine, ""), order.parent.get(theirs, "")
    if pm and pm == pt:
        return order.queue.get(mine), order.queue.get(theirs)
    a = order.department.get(pm) if pm else order.queue.get(mine)
    b = order.department.get(pt) if pt else order.queue.get(theirs)
    return a, b


def _may_reclaim(me: Standing, them: Standing, units: float) -> bool:
    """Whether ``me`` (with a job of ``units``) may take from ``them`` now."""
    fair_me = max(me.fair, me.deserved or 0.0)
    within_fair = me.used + units <= fair_me + EPS
    within_deserved = me.deserved is not None and me.used + units <= me.deserved + EPS
    if not within_fair and not within_deserved:
        return False
    over_fair = them.used > max(them.fair, them.deserved or 0.0) + EPS
    over_deserved = them.used > (them.deserved or 0.0) + EPS
    return over_fair or (over_deserved and within_deserved)


def _candidates(di: DiagnosisInput, job: EntityState, order: QueueOrder) -> list[tuple[str, EntityState]]:
    mine = job_queue(job)
    out: list[tuple[tuple[object, ...], str, EntityState]] = []
    for other in di.jobs:
        if is_pending(other) or other is job or not _held(di, other) or not _preemptible(di, other):
            continue
        theirs = job_queue(other)
        newest = tuple(-ord(c) for c in (other.get("submitted") or ""))
        if theirs == mine:
            if _rank(job) > _rank(other):
                out.append(((0, 0, 0.0, newest), PREEMPT, other))
            continue
        s = order.queue.get(theirs)
        over = (s.used - (s.deserved or 0.0)) if s is not None else 0.0
        prio = s.priority if s is not None else 0
        out.append(((1, prio, -over, newest), RECLAIM, other))
    out.sort(key=lambda x: x[0])
    return [(action, other) for _, action, other in out]


def victims(di: DiagnosisInput, job: EntityState, order: QueueOrder | None = None) -> Eviction | None:
    """The running jobs KAI would evict so that the waiting ``job`` starts (module doc), and where it would go;
    None when no eligible set makes room for its whole gang (or it is not a whole-GPU job)."""
    req = F.job_request(di, job)
    if req.pods == 0 or req.share or req.share_memory_mib or req.mig or req.gpus_per_pod <= 0:
        return None
    order = order or QueueOrder(di, [j for j in di.jobs if is_pending(j)])
    quota = quota_at(di, job, req, 0)
    rows = [r for r in F.node_fits(di, req) if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
    free = {r.node: r.free for r in rows}
    units = req.units
    mine = job_queue(job)
    taken: list[Victim] = []
    charged: list[tuple[Standing, float]] = []  # standings lowered while victims are weighed, put back after
    dept = order.parent.get(mine, "")
    freed_queue = freed_dept = 0.0  # what the victims free in the job's own queue and department
    try:
        for action, other in _candidates(di, job, order):
            held = _held(di, other)
            gone = float(sum(held.values()))
            if action == RECLAIM:
                me, them = _levels(order, mine, job_queue(other))
                if me is None or them is None or not _may_reclaim(me, them, units):
                    continue
                charged.append((them, gone))
                them.used -= gone
            taken.append(Victim(other, action, held))
            for node, n in held.items():
                free[node] = free.get(node, 0) + n
            if job_queue(other) == mine:
                freed_queue += gone
            if dept and order.parent.get(job_queue(other), "") == dept:
                freed_dept += gone
            if place(rows, req, free, frozenset()) and _quota_allows(quota, freed_queue, freed_dept):
                return _trim(rows, req, free, taken, lambda v: _quota_allows(quota, *_freed(order, job, v)))
        return None
    finally:
        for standing, gone in charged:
            standing.used += gone


def _quota_allows(quota: QuotaAt | None, freed_queue: float, freed_dept: float) -> bool:
    """Whether the job's own quota and limit (and its department's) let it in once the victims of its own queue
    (and department) are gone: KAI preempts within a queue also to bring it back within its limit."""
    if quota is None:
        return True
    after = quota.allocated - freed_queue + quota.requested
    if quota.limit is not None and after > quota.limit + EPS:
        return False
    if quota.quota is not None and after > quota.quota + EPS and not quota.preemptible:
        return False
    d = quota.department
    if d is None:
        return True
    after = d.allocated - freed_dept + d.requested
    if d.limit is not None and after > d.limit + EPS:
        return False
    return not (d.quota is not None and after > d.quota + EPS and not d.preemptible)


def _freed(order: QueueOrder, job: EntityState, victims: list[Victim]) -> tuple[float, float]:
    """GPUs ``victims`` free in the job's own queue, and in its department."""
    mine = job_queue(job)
    dept = order.parent.get(mine, "")
    queue = sum(sum(v.gpus.values()) for v in victims if job_queue(v.job) == mine)
    in_dept = sum(
        sum(v.gpus.values()) for v in victims if dept and order.parent.get(job_queue(v.job), "") == dept
    )
    return float(queue), float(in_dept)


def _trim(
    rows: list[F.NodeFit],
    req: F.Request,
    free: dict[str, int],
    taken: list[Victim],
    allowed: Callable[[list[Victim]], bool],
) -> Eviction:
    """Give back the victims the gang (and its quota, ``allowed``) does not need, the last taken first."""
    keep = list(taken)
    for v in reversed(taken):
        without = dict(free)
        for node, n in v.gpus.items():
            without[node] -= n
        rest = [x for x in keep if x is not v]
        if place(rows, req, without, frozenset()) and allowed(rest):
            keep = rest
            free = without
    return Eviction(keep, place(rows, req, free, frozenset()))


__all__ = ["PREEMPT", "RECLAIM", "Eviction", "Victim", "victims"]
