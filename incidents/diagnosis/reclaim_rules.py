"""KAI's reclaim rules over queue standings, in GPUs, CPU and memory (``reclaim`` walks the victims with them).

- A queue reclaims only while, with the job, it stays within its fair share in every resource (``over_fair``).
- A victim's queue may lose it while it holds more than it may (the larger of deserved and fair share) in some
  resource, or while the reclaimer stays within its deserved quota in every resource and the victim's queue is
  over its own in some resource (``may_reclaim``).
- At each level of the reclaimer's hierarchy, its side over its fair share in a resource must stay less saturated
  in it than every sibling a victim is taken from (``within_siblings``).

Pure: reads a ``QueueOrder``'s standings.
"""

from __future__ import annotations

from incidents.diagnosis.allocation import ACTIVE_POD_PHASES
from incidents.diagnosis.queue_order import QueueOrder
from incidents.diagnosis.resources import DIMS, Vector, pod_vector
from incidents.diagnosis.standing import Standing
from incidents.diagnosis.types import DiagnosisInput, EntityState

EPS = 1e-6


def may_reclaim(
    order: QueueOrder, me: Standing, them: Standing, remaining: list[float], units: float, vec: Vector
) -> bool:
    """Whether ``me`` (with a job of ``units`` GPUs and ``vec`` CPU and memory) may take a job from ``them``,
    which holds ``remaining`` ([GPUs, CPU, memory]) once the victims taken before are gone: ``them`` stays over
    what it may hold (the larger of deserved and fair share) in some resource (KAI's maintain-fair-share
    strategy), or ``me`` stays within its deserved quota in every resource while ``them`` is over its own in
    some resource (guarantee-deserved-quota)."""
    gpus, rest = remaining[0], remaining[1:]
    dims = list(zip(DIMS, order.total, rest, strict=True))
    if gpus > max(them.fair, them.deserved or 0.0) + EPS or any(
        r > them.res[d].allocatable(total) + EPS for d, total, r in dims
    ):
        return True
    within_deserved = me.deserved is not None and me.used + units <= me.deserved + EPS
    if not (within_deserved and all(me.res[d].within(v) for d, v in zip(DIMS, vec, strict=True))):
        return False
    over = gpus > (them.deserved or 0.0) + EPS
    return over or any(r > _bound(them.res[d].deserved) + EPS for d, _, r in dims)


def _bound(deserved: float | None) -> float:
    """A deserved quota as a ceiling: an unlimited one (None) is never passed."""
    return float("inf") if deserved is None else deserved


def over_fair(me: Standing, units: float, vec: Vector) -> bool:
    """KAI reclaims only for a queue that, with the job, stays within its fair share in every resource (GPUs: the
    larger of fair share and deserved quota)."""
    if me.used + units > max(me.fair, me.deserved or 0.0) + EPS:
        return True
    return any(me.res[d].used + v > me.res[d].fair + EPS for d, v in zip(DIMS, vec, strict=True))


def standing_now(s: Standing) -> list[float]:
    return [s.used, *(s.res[d].used for d in DIMS)]


def job_vector_held(di: DiagnosisInput, job: EntityState) -> Vector:
    """CPU millicores and memory bytes a running job's bound pods request."""
    cpu = mem = 0.0
    for p in di.pods_of_job(job):
        if p.get("node") and p.get("phase") in ACTIVE_POD_PHASES:
            c, m = pod_vector(p)
            cpu += c
            mem += m
    return (cpu, mem)


def _saturation(used: float, fair: float) -> float:
    if fair <= EPS:
        return float("inf") if used > EPS else 0.0
    return used / fair


def path(order: QueueOrder, queue: str) -> list[Standing]:
    """A queue's standing and its department's, leaf first."""
    out = [s for s in (order.queue.get(queue),) if s is not None]
    d = order.department.get(order.parent.get(queue, ""))
    return [*out, d] if d is not None else out


def within_siblings(
    order: QueueOrder, mine: str, units: float, vec: Vector, taken: list[tuple[str, float, Vector]]
) -> bool:
    """KAI's last reclaim check: at each level of the reclaimer's hierarchy, its side (less its own victims, with
    the job) over its fair share in a resource must stay less saturated in it than every sibling a victim is
    taken from; the resources weighed are those the job or that sibling's victims hold. ``taken``: each reclaimed
    job's queue, GPU units and CPU and memory."""
    gone: dict[int, list[float]] = {}
    involved: dict[int, Standing] = {}
    for queue, gpus, resources in taken:
        for s in path(order, queue):
            got = gone.setdefault(id(s), [0.0, 0.0, 0.0])
            for i, amount in enumerate((gpus, *resources)):
                got[i] += amount
            involved[id(s)] = s
    parent_of = {id(s): order.parent.get(q, "") for q, s in order.queue.items()}
    parent_of.update({id(d): "" for d in order.department.values()})
    asks = [units, *vec]
    for level in path(order, mine):
        mine_gone = gone.get(id(level), [0.0, 0.0, 0.0])
        for key, sib in involved.items():
            if sib is level or parent_of.get(key) != parent_of.get(id(level)):
                continue
            for i, (mine_now, mine_fair, sib_now, sib_fair) in enumerate(_dims(level, sib)):
                if asks[i] <= EPS and gone[key][i] <= EPS:
                    continue  # a resource neither the job nor these victims hold
                ratio = _saturation(mine_now - mine_gone[i] + asks[i], mine_fair)
                if (
                    ratio > 1 + EPS
                    and sib_fair > EPS
                    and ratio >= _saturation(sib_now - gone[key][i], sib_fair)
                ):
                    return False
    return True


def _dims(a: Standing, b: Standing) -> list[tuple[float, float, float, float]]:
    """(a's held, a's fair share, b's held, b's fair share) per resource: GPUs, CPU, memory."""
    return [(a.used, a.fair, b.used, b.fair)] + [
        (a.res[d].used, a.res[d].fair, b.res[d].used, b.res[d].fair) for d in DIMS
    ]


__all__ = ["job_vector_held", "may_reclaim", "over_fair", "path", "standing_now", "within_siblings"]
