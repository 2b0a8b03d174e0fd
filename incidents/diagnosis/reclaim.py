"""Who KAI would evict so that a waiting job starts: preemption within its queue, reclaim from other queues.

When a waiting gang does not fit the free room, KAI looks for victims among running, preemptible (train) jobs:

- **preempt**: a job of the same queue with a lower priority (``precedence.job_rank``: inference over build over
  train, or the PriorityClass value), lowest then newest first;
- **reclaim**: a job of another queue, as KAI's proportion plugin allows it. The reclaimer's own queue must,
  with the job, stay within its fair share. The two queues are compared where their hierarchies diverge (two
  projects of one department by their own standing, otherwise their departments): the victim's side, less the
  victims already taken from it, must still hold more than its fair share, or more than its deserved quota
  while the reclaimer's side, with the job, stays within its own. Once the victims make room, at each level of
  the reclaimer's hierarchy, its side (less its own victims, with the job) must not end more saturated
  (allocated / fair share, over 1) than a sibling a victim was taken from. Victims: lowest queue priority
  first, then the most over its quota, then the newest job.

Victims are taken one at a time, each queue's remaining allocation (and its department's) charged as it goes,
until the job's gang fits the room they free; then those not needed are given back. The room is read by the
fit rules over the cluster without the victims' pods (``without``), so whole GPUs, GPU shares (fraction or
memory) and MIG instances are weighed alike: a share's GPU comes back whole once its last share goes, its
reservation pod with it. The eviction stands only if the job still fits once the victims are served again
with it in KAI's allocate order (``_stands``): a victim served first takes its room back.

When no eviction lets a whole-GPU job in, KAI may move running jobs instead (``consolidation``).

Pure: reads the ``DiagnosisInput`` and a ``QueueOrder``'s standings; no database, no simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from incidents.diagnosis import fit as F
from incidents.diagnosis.allocation import ACTIVE_POD_PHASES, job_units, pod_units
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.placement import place, share_order
from incidents.diagnosis.precedence import job_rank
from incidents.diagnosis.queue_order import QueueOrder, Standing, department_of, in_queue_key, job_queue
from incidents.diagnosis.quota import QuotaAt, quota_at
from incidents.diagnosis.reclaim_rules import (
    job_vector_held,
    may_reclaim,
    over_fair,
    path,
    standing_now,
    within_siblings,
)
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.resources import ZERO, Vector, request_vector
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
    gpus: dict[str, float]  # node -> GPU units it frees there (a share: its fraction; MIG: its "<n>g")
    resources: Vector = ZERO  # CPU millicores and memory bytes it frees

    @property
    def label(self) -> str:
        return self.job.ref.label


def _rank(job: EntityState) -> int:
    return job_rank(job)


def preemptible(di: DiagnosisInput, job: EntityState) -> bool:
    """Whether KAI may evict the job (train work, not inference or build)."""
    return job_request(di, job).preemptible


def held_units(di: DiagnosisInput, job: EntityState) -> dict[str, float]:
    """GPU units a running job holds per node (a share its fraction, a MIG instance its "<n>g")."""
    out: dict[str, float] = {}
    for p in di.pods_of_job(job):
        if p.get("node") and p.get("phase") in ACTIVE_POD_PHASES:
            out[p.get("node")] = round(out.get(p.get("node"), 0) + pod_units(p), 4)
    return out


def _levels(order: QueueOrder, mine: str, theirs: str) -> tuple[Standing | None, Standing | None]:
    """The two queues' standings where their hierarchies diverge."""
    pm, pt = order.parent.get(mine, ""), order.parent.get(theirs, "")
    if pm and pm == pt:
        return order.queue.get(mine), order.queue.get(theirs)
    a = order.department.get(pm) if pm else order.queue.get(mine)
    b = order.department.get(pt) if pt else order.queue.get(theirs)
    return a, b


def _candidates(di: DiagnosisInput, job: EntityState, order: QueueOrder) -> list[tuple[str, EntityState]]:
    mine = job_queue(job)
    out: list[tuple[tuple[object, ...], str, EntityState]] = []
    for other in di.jobs:
        if is_pending(other) or other is job or not held_units(di, other) or not preemptible(di, other):
            continue
        theirs = job_queue(other)
        newest = tuple(-ord(c) for c in (other.get("submitted") or ""))
        if theirs == mine:
            if _rank(job) > _rank(other):
                out.append(((0, _rank(other), 0.0, newest), PREEMPT, other))
            continue
        s = order.queue.get(theirs)
        over = (s.used - (s.deserved or 0.0)) if s is not None else 0.0
        prio = s.priority if s is not None else 0
        out.append(((1, prio, -over, newest), RECLAIM, other))
    out.sort(key=lambda x: x[0])
    return [(action, other) for _, action, other in out]


def victims(di: DiagnosisInput, job: EntityState, order: QueueOrder | None = None) -> Eviction | None:
    """The running jobs KAI would evict so that the waiting ``job`` starts (module doc), and where it would go;
    None when no eligible set makes room for its whole gang."""
    req = job_request(di, job)
    vec = request_vector(req)
    if req.pods == 0 or not (
        req.share or req.share_memory_mib or req.mig or req.gpus_per_pod > 0 or any(vec)
    ):
        return None
    order = order or QueueOrder(di, [j for j in di.jobs if is_pending(j)])
    if order.scheduler != "kai":
        vec = ZERO
    quota = quota_at(di, job, req, 0)
    units = req.units
    mine = job_queue(job)
    taken: list[Victim] = []
    me = order.queue.get(mine)
    if me is not None and over_fair(me, units, vec):
        # over its fair share with the job: it may preempt within its queue, not reclaim
        candidates = [(a, o) for a, o in _candidates(di, job, order) if a == PREEMPT]
    else:
        candidates = _candidates(di, job, order)
    remaining: dict[int, list[float]] = {}  # id(standing) -> [GPUs, CPU, memory] once the victims are gone
    for action, other in candidates:
        held = held_units(di, other)
        victim = Victim(other, action, held, job_vector_held(di, other))
        if action == RECLAIM:
            mine_side, their_side = _levels(order, mine, job_queue(other))
            if mine_side is None or their_side is None:
                continue
            left = remaining.get(id(their_side)) or standing_now(their_side)
            if not may_reclaim(order, mine_side, their_side, left, units, vec):
                continue
            gone = [float(sum(held.values())), *victim.resources]
            for s in path(order, job_queue(other)):
                now = remaining.get(id(s)) or standing_now(s)
                remaining[id(s)] = [a - b for a, b in zip(now, gone, strict=True)]
        taken.append(victim)
        if (
            _quota_allows(quota, *_freed(order, job, taken))
            and within_siblings(order, mine, units, vec, _reclaimed(taken))
            and _placement(di, req, taken)
        ):
            ev = _trim(
                di,
                req,
                taken,
                lambda v: (
                    _quota_allows(quota, *_freed(order, job, v))
                    and within_siblings(order, mine, units, vec, _reclaimed(v))
                ),
            )
            if _stands(di, req, job, ev.victims):
                return ev
    return None


def _reclaimed(taken: list[Victim]) -> list[tuple[str, float, Vector]]:
    return [
        (job_queue(v.job), float(sum(v.gpus.values())), v.resources) for v in taken if v.action == RECLAIM
    ]


def _stands(di: DiagnosisInput, req: Request, job: EntityState, gone: list[Victim]) -> bool:
    """KAI's solver evicts the victims, then serves them again with the job in its allocate order: a victim
    served before the job (its queue of a higher priority, say) takes its GPUs back, and the eviction stands
    only if the job still fits in what the others leave. The order counts the waiting jobs a queue involved
    would offer before its victim or the job (and those of its department's queues). Without this a reclaim
    would be undone by the next allocation, and redone, for ever."""
    victims = [v.job for v in gone]
    mine = {id(j) for j in (job, *victims)}
    last: dict[str, tuple[int, str, str, str]] = {}
    for j in (job, *victims):
        q = job_queue(j)
        last[q] = max(last.get(q, in_queue_key(j)), in_queue_key(j))
    depts = {department_of(di, q) for q in last} - {""}
    others = [
        j
        for j in di.jobs
        if id(j) not in mine
        and is_pending(j)
        and (
            in_queue_key(j) < last[job_queue(j)]
            if job_queue(j) in last
            else department_of(di, job_queue(j)) in depts
        )
    ]
    view = without(di, victims)
    order = QueueOrder(view, [job, *victims, *others])
    retaken: set[int] = set()
    for other in order:
        if other is job:
            break
        if id(other) in mine:
            retaken.add(id(other))
        order.charge(other, job_units(other))
    if not retaken:
        return True
    left = [v for v in gone if id(v.job) not in retaken]
    return bool(left) and bool(_placement(di, req, left))


def without(di: DiagnosisInput, jobs: Iterable[EntityState]) -> DiagnosisInput:
    """The input as it would be with ``jobs``' pods gone: their shares leave their GPUs, and a shared GPU left
    with no share loses its reservation pod (KAI releases it), so the GPU is whole again."""
    pods = {(p.namespace, p.name) for j in jobs for p in di.pods_of_job(j)}
    if not pods:
        return di
    keys = {f"{ns}/{name}" for ns, name in pods}
    gpus: list[EntityState] = []
    emptied: set[str] = set()
    for g in di.gpus:
        shares = g.get("shares") or []
        if any(x.get("pod") in keys for x in shares):
            left = [x for x in shares if x.get("pod") not in keys]
            state = {**g.state, "shares": left}
            if not left:
                state.pop("reservation", None)
                emptied |= {g.name, str(g.get("uuid") or g.name)}
            g = replace(g, state=state)
        gpus.append(g)
    kept = [
        p for p in di.pods if (p.namespace, p.name) not in pods and p.get("reservation_for") not in emptied
    ]
    return replace(di, pods=kept, gpus=gpus)


def _placement(di: DiagnosisInput, req: Request, gone: list[Victim]) -> dict[str, int]:
    """Where the job's pods go once ``gone`` are evicted ({} when its gang does not fit): whole GPUs as KAI's
    binpack places them, shares first onto GPUs already shared, MIG where the profile is free (the fit rules)."""
    view = without(di, [v.job for v in gone])
    rows = [r for r in F.node_fits(view, req) if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
    if not (req.share or req.share_memory_mib or req.mig):
        return place(rows, req, {r.node: r.free for r in rows}, frozenset())
    if not F.fits(rows, req):
        return {}

    out: dict[str, int] = {}
    want = req.pods
    for r in share_order(rows, req):
        if r.fits and want > 0:
            out[r.node] = min(r.pods_fit, want)
            want -= out[r.node]
    return out


def _quota_allows(quota: QuotaAt | None, freed_queue: float, freed_dept: float) -> bool:
    """Whether the job's own quota and limit (and its department's) let it in once the victims of its own queue
    (and department) are gone: KAI preempts within a queue also to bring it back within its limit. A
    non-preemptible job must fit the deserved quota with the non-preemptible work only (victims are all
    preemptible, so they free none of it)."""
    if quota is None:
        return True
    after = quota.allocated - freed_queue + quota.requested
    if quota.limit is not None and after > quota.limit + EPS:
        return False
    if quota.quota is not None and not quota.preemptible:
        held = quota.allocated - freed_queue if quota.preemptible_held is None else quota.non_preemptible_held
        if held + quota.requested > quota.quota + EPS:
            return False
    d = quota.department
    if d is None:
        return True
    after = d.allocated - freed_dept + d.requested
    if d.limit is not None and after > d.limit + EPS:
        return False
    if d.quota is not None and not d.preemptible:
        held = d.allocated - freed_dept if d.preemptible_held is None else d.non_preemptible_held
        return held + d.requested <= d.quota + EPS
    return True


def _freed(order: QueueOrder, job: EntityState, victims: list[Victim]) -> tuple[float, float]:
    """GPU units ``victims`` free in the job's own queue, and in its department."""
    mine = job_queue(job)
    dept = order.parent.get(mine, "")
    queue = sum(sum(v.gpus.values()) for v in victims if job_queue(v.job) == mine)
    in_dept = sum(
        sum(v.gpus.values()) for v in victims if dept and order.parent.get(job_queue(v.job), "") == dept
    )
    return float(queue), float(in_dept)


def _trim(
    di: DiagnosisInput,
    req: Request,
    taken: list[Victim],
    allowed: Callable[[list[Victim]], bool],
) -> Eviction:
    """Give back the victims the gang (and its quota, ``allowed``) does not need, the last taken first."""
    keep = list(taken)
    for v in reversed(taken):
        rest = [x for x in keep if x is not v]
        if allowed(rest) and _placement(di, req, rest):
            keep = rest
    return Eviction(keep, _placement(di, req, keep))


__all__ = ["PREEMPT", "RECLAIM", "Eviction", "Victim", "held_units", "preemptible", "victims", "without"]
