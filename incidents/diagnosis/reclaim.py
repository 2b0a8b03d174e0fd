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
reservation pod with it. The job's fit table is built once per waiting job; a trial reads again only the rows
of the nodes its victims touch (``reclaim_fits.Fits``), and a whole-GPU gang's trial skips the placement when even every
GPU its victims hold could not make room. The eviction stands only if the job still fits once the victims are
served again with it in KAI's allocate order (``_stands``): a victim served first takes its room back.

When no eviction lets a whole-GPU job in, KAI may move running jobs instead (``consolidation``).

Pure: reads the ``DiagnosisInput`` and a ``QueueOrder``'s standings; no database, no simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from incidents.diagnosis.allocation import ACTIVE_POD_PHASES, job_units, pod_units
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.precedence import job_rank
from incidents.diagnosis.queue_order import QueueOrder, Standing, department_of, in_queue_key, job_queue
from incidents.diagnosis.quota import QuotaAt, quota_at
from incidents.diagnosis.reclaim_fits import Fits, carry_over, without
from incidents.diagnosis.reclaim_rules import (
    job_vector_held,
    may_reclaim,
    over_fair,
    path,
    standing_now,
    within_siblings,
)
from incidents.diagnosis.request import job_request
from incidents.diagnosis.resources import ZERO, Vector, request_vector
from incidents.diagnosis.types import DiagnosisInput, EntityState

EPS = 1e-6
MISSES = 8  # trials without room before ``victims`` asks whether all its candidates together would make it
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
    me = _rank(job)
    # another queue -> its priority and how far under its deserved quota it is
    standing: dict[str, tuple[object, float]] = {}
    out: list[tuple[tuple[object, ...], str, EntityState]] = []
    for other, rank, newest in _evictable(di):
        if other is job:
            continue
        theirs = job_queue(other)
        if theirs == mine:
            if me > rank:
                out.append(((0, rank, 0.0, newest), PREEMPT, other))
            continue
        if theirs not in standing:
            s = order.queue.get(theirs)
            over = (s.used - (s.deserved or 0.0)) if s is not None else 0.0
            standing[theirs] = (s.priority if s is not None else 0, -over)
        out.append(((1, *standing[theirs], newest), RECLAIM, other))
    out.sort(key=lambda x: x[0])
    return [(action, other) for _, action, other in out]


def _evictable(di: DiagnosisInput) -> list[tuple[EntityState, int, int]]:
    """The running jobs KAI may evict, in the input's order, each with its priority rank and its age's place
    (0 the newest: submission times compared as the candidates' order compares them); read once per indexed
    block (every waiting job weighed on one state tries the same ones)."""
    got: list[tuple[EntityState, int, int]] | None = di.memo("reclaim_evictable", lambda: _evictable_now(di))
    return _evictable_now(di) if got is None else got


def _evictable_now(di: DiagnosisInput) -> list[tuple[EntityState, int, int]]:
    # per running job: its pods when weighed, whether KAI may evict it, its rank and age (``carry_over`` hands
    # them to the next state, where a job with the same pods is not weighed again)
    memo: dict[int, tuple[EntityState, tuple[int, ...], bool, int, tuple[int, ...]]] | None = di.memo(
        "reclaim_evictable_seen", dict
    )
    seen = {} if memo is None else memo
    # the same, of the jobs whose pods are known to be those of this state (``carry_over``: not read again)
    checked: dict[int, tuple[EntityState, tuple[int, ...], bool, int, tuple[int, ...]]] | None = di.memo(
        "reclaim_evictable_checked", dict
    )
    jobs = []
    for other in di.jobs:
        if is_pending(other):
            continue
        got = checked.get(id(other)) if checked is not None else None
        if got is None or got[0] is not other:
            pods = tuple(map(id, di.pods_of_job(other)))
            got = seen.get(id(other))
            if got is None or got[0] is not other or got[1] != pods:
                age = tuple(-ord(c) for c in (other.get("submitted") or ""))
                ok = bool(held_units(di, other)) and preemptible(di, other)
                got = seen[id(other)] = (other, pods, ok, _rank(other), age)
            if checked is not None:
                checked[id(other)] = got
        if got[2]:
            jobs.append((other, got[3], got[4]))
    place = {age: i for i, age in enumerate(sorted({age for _, _, age in jobs}))}
    return [(other, rank, place[age]) for other, rank, age in jobs]


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
    fits = Fits(di, req)
    if not fits.may_fit_emptied():
        return None  # not even every node emptied would take the gang
    remaining: dict[int, list[float]] = {}  # id(standing) -> [GPUs, CPU, memory] once the victims are gone
    misses = 0  # trials whose victims' GPUs cannot make room (``Fits.may_fit``)
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
        fits.take(other)
        if not fits.may_fit_taken():
            misses += 1
            if misses == MISSES and not fits.may_fit([Victim(o, a, {}) for a, o in candidates]):
                return None  # not even every candidate's GPUs make room: no later trial can place the gang
            continue
        if (
            _quota_allows(quota, *_freed(order, job, taken))
            and within_siblings(order, mine, units, vec, _reclaimed(taken))
            and fits.place(fits.taken_rows())
        ):
            ev = _trim(
                fits,
                taken,
                lambda v: (
                    _quota_allows(quota, *_freed(order, job, v))
                    and within_siblings(order, mine, units, vec, _reclaimed(v))
                ),
            )
            if _stands(di, fits, job, ev.victims):
                return ev
    return None


def _reclaimed(taken: list[Victim]) -> list[tuple[str, float, Vector]]:
    return [
        (job_queue(v.job), float(sum(v.gpus.values())), v.resources) for v in taken if v.action == RECLAIM
    ]


def _stands(di: DiagnosisInput, fits: Fits, job: EntityState, gone: list[Victim]) -> bool:
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
    in_depts: dict[str, bool] = {}  # queue -> whether its department is one of ``depts``

    def offered(j: EntityState) -> bool:
        q = job_queue(j)
        if q in last:
            return in_queue_key(j) < last[q]
        if not depts:
            return False
        if q not in in_depts:
            in_depts[q] = department_of(di, q) in depts
        return in_depts[q]

    others = [j for j in _waiting(di) if id(j) not in mine and offered(j)]
    view = without(di, victims)
    retaken: set[int] = set()
    with view.indexed():  # the order reads each queue's allocation: one pass over the pods, not one per queue
        view.inherit(di)  # the lookups of the lists the victims leave as they were (its nodes, jobs, queues)
        order = QueueOrder(view, [job, *victims, *others])
        for other in order:
            if other is job:
                break
            if id(other) in mine:
                retaken.add(id(other))
            order.charge(other, job_units(other))
    if not retaken:
        return True
    left = [v for v in gone if id(v.job) not in retaken]
    return bool(left) and fits.may_fit(left) and bool(fits.place(fits.rows(left)))


def _waiting(di: DiagnosisInput) -> list[EntityState]:
    """The input's waiting jobs, in its order (once per indexed block)."""
    got: list[EntityState] | None = di.memo("reclaim_waiting", lambda: [j for j in di.jobs if is_pending(j)])
    return [j for j in di.jobs if is_pending(j)] if got is None else got


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


def _trim(fits: Fits, taken: list[Victim], allowed: Callable[[list[Victim]], bool]) -> Eviction:
    """Give back the victims the gang (and its quota, ``allowed``) does not need, the last taken first. ``taken``
    are ``fits``' trials; a victim given back changes only the rows of the nodes it touches."""
    keep = list(taken)
    rows = fits.taken_rows()
    for v in reversed(taken):
        rest = [x for x in keep if x is not v]
        if fits.may_fit(rest) and allowed(rest):
            fewer = fits.given_back(rows, v, rest)
            if fits.place(fewer):
                keep, rows = rest, fewer
    return Eviction(keep, fits.place(rows))


__all__ = [
    "PREEMPT",
    "RECLAIM",
    "Eviction",
    "Victim",
    "carry_over",
    "held_units",
    "preemptible",
    "victims",
    "without",
]
