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
of the nodes its victims touch (``_Fits``), and a whole-GPU gang's trial skips the placement when even every
GPU its victims hold could not make room. The eviction stands only if the job still fits once the victims are
served again with it in KAI's allocate order (``_stands``): a victim served first takes its room back.

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
    jobs = []
    for other in di.jobs:
        if is_pending(other):
            continue
        pods = tuple(map(id, di.pods_of_job(other)))
        got = seen.get(id(other))
        if got is None or got[0] is not other or got[1] != pods:
            age = tuple(-ord(c) for c in (other.get("submitted") or ""))
            ok = bool(held_units(di, other)) and preemptible(di, other)
            got = seen[id(other)] = (other, pods, ok, _rank(other), age)
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
    fits = _Fits(di, req)
    if not fits.may_fit_emptied():
        return None  # not even every node emptied would take the gang
    remaining: dict[int, list[float]] = {}  # id(standing) -> [GPUs, CPU, memory] once the victims are gone
    misses = 0  # trials whose victims' GPUs cannot make room (``_Fits.may_fit``)
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


def _stands(di: DiagnosisInput, fits: _Fits, job: EntityState, gone: list[Victim]) -> bool:
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


def _shared_at(di: DiagnosisInput) -> list[int]:
    """Where in ``di.gpus`` the GPUs with shares are (once per indexed block: a fleet's GPUs are mostly whole)."""
    got: list[int] | None = di.memo(
        "reclaim_shared_at", lambda: [i for i, g in enumerate(di.gpus) if g.get("shares")]
    )
    return [i for i, g in enumerate(di.gpus) if g.get("shares")] if got is None else got


def without(di: DiagnosisInput, jobs: Iterable[EntityState]) -> DiagnosisInput:
    """The input as it would be with ``jobs``' pods gone: their shares leave their GPUs, and a shared GPU left
    with no share loses its reservation pod (KAI releases it), so the GPU is whole again."""
    pods = {(p.namespace, p.name) for j in jobs for p in di.pods_of_job(j)}
    if not pods:
        return di
    keys = {f"{ns}/{name}" for ns, name in pods}
    gpus = list(di.gpus)
    emptied: set[str] = set()
    for i in _shared_at(di):
        g = gpus[i]
        shares = g.get("shares") or []
        if any(x.get("pod") in keys for x in shares):
            left = [x for x in shares if x.get("pod") not in keys]
            state = {**g.state, "shares": left}
            if not left:
                state.pop("reservation", None)
                emptied |= {g.name, str(g.get("uuid") or g.name)}
            gpus[i] = replace(g, state=state)
    kept = [
        p for p in di.pods if (p.namespace, p.name) not in pods and p.get("reservation_for") not in emptied
    ]
    return replace(di, pods=kept, gpus=gpus)


def _place_rows(rows: list[F.NodeFit], req: Request, usable: list[bool] | None = None) -> dict[str, int]:
    """Where the job's pods go over the fit ``rows`` of the cluster without the victims ({} when its gang does
    not fit): whole GPUs as KAI's binpack places them, shares first onto GPUs already shared, MIG where the
    profile is free (the fit rules). ``usable``: per row, whether it has no static blocker (known already)."""
    if usable is None:
        rows = [r for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
    else:
        rows = [r for r, u in zip(rows, usable, strict=True) if u]
    if not (req.share or req.share_memory_mib or req.mig):
        free = {r.node: r.free for r in rows}
        per = req.gpus_per_pod
        # a row without room for one pod takes nothing (``place`` skips it): left out before it sorts them
        return place([r for r in rows if per <= 0 or free[r.node] >= per], req, free, frozenset())
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


def _trim(fits: _Fits, taken: list[Victim], allowed: Callable[[list[Victim]], bool]) -> Eviction:
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


def carry_over(old: DiagnosisInput, new: DiagnosisInput) -> None:
    """Give ``new`` the fit tables ``victims`` built on ``old`` (both indexed), the rows of the nodes whose pods or
    GPUs differ read again on ``new``, and what it read of each running job (weighed again where the job's pods
    differ): for a state written from another (the victims gone, the reclaimer bound), most of whose nodes and
    jobs are as they were. Nothing when the nodes or their history differ."""
    tables: dict[str, tuple[Request, list[F.NodeFit]]] | None = old.memo("reclaim_fit_tables", dict)
    target: dict[str, tuple[Request, list[F.NodeFit]]] | None = new.memo("reclaim_fit_tables", dict)
    if new is old or target is None:
        return
    seen = old.memo("reclaim_evictable_seen", dict)
    if seen:
        new.memo("reclaim_evictable_seen", dict).update(seen)
    if not tables or new.nodes is not old.nodes or new.history is not old.history:
        return
    if new.peak_gpus is not old.peak_gpus:
        return
    changed: set[str] = set()
    for before, after in ((old.pods, new.pods), (old.gpus, new.gpus)):
        kept = {id(x) for x in after}
        was = {id(x) for x in before}
        changed |= {x.get("node") for x in before if id(x) not in kept}
        changed |= {x.get("node") for x in after if id(x) not in was}
    names = {n.name for n in new.nodes}
    changed = {n for n in changed if n in names}
    view = replace(
        new,
        nodes=[n for n in new.nodes if n.name in changed],
        pods=[p for n in changed for p in new.pods_bound_to(n)],
        gpus=[g for n in changed for g in new.gpus_of_node(n)],
    )
    for key, (req, rows) in tables.items():
        if key in target:
            continue
        at: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            at.setdefault(r.node, []).append(i)
        out = list(rows)
        placed: dict[str, int] = {}
        for r in F.node_fits(view, req) if changed else []:
            k = placed.get(r.node, 0)
            out[at[r.node][k]] = r
            placed[r.node] = k + 1
        target[key] = (req, out)


class _Fits:
    """The job's fit table over the cluster without some victims, built once on the state as given.

    A node's row reads only the node, the pods bound to it and its GPUs (``fit.node_fits``), so evicting a
    victim changes only the rows of the nodes it touches (``touch``): those are read again on a view of these
    nodes alone, the victims' pods gone (``without``); every other row is the first table's. One trial costs
    the victims' few nodes, not the 1,213 of a fleet. For a whole-GPU gang, ``may_fit`` first bounds the room
    from above (each row's free GPUs, plus what the victims' pods and the reservation pods they free hold
    there) and skips the placement when even that cannot take the gang.

    ``take`` and ``taken_rows`` follow the growing list of ``victims``' trials (the rows read again only for
    the last victim's nodes); ``rows`` and ``may_fit`` answer for any set (``_trim``, ``_stands``)."""

    def __init__(self, di: DiagnosisInput, req: Request) -> None:
        self.di, self.req = di, req
        self.per = req.gpus_per_pod
        self.whole = self.per > 0 and not (req.share or req.share_memory_mib or req.mig)
        self._base: list[F.NodeFit] | None = None  # the table on the state as given, read at its first use
        self.at: dict[str, list[int]] = {}  # node -> its rows' positions in the table
        self.by_name: dict[str, list[EntityState]] = {}
        self.usable: list[bool] = []  # rows without a static blocker
        self.room = 0  # pods of a whole-GPU gang the table's usable rows take
        self._touch: dict[int, tuple[frozenset[str], dict[str, int]]] = {}
        # share pod "ns/name" -> the GPUs it holds; GPU name or uuid -> its reservation pods (read at first use)
        self._shares: dict[str, list[EntityState]] | None = None
        self._reserving: dict[str, list[EntityState]] | None = None
        # the trials' running state: the victims so far, their freeable GPUs per node, the rows read again
        self.taken: list[EntityState] = []
        self.gain: dict[str, int] = {}
        self.unweighed: list[dict[str, int]] = []  # the GPUs of the victims taken since the bound was moved
        self.taken_room: int | None = None
        self.current: list[F.NodeFit] | None = None
        self.dirty: set[str] = set()

    @property
    def base(self) -> list[F.NodeFit]:
        """The job's fit table on the state as given: once per request while the input is indexed (the jobs
        weighed on one state ask a few shapes; a table's rows are read, never changed)."""
        if self._base is None:
            tables: dict[str, tuple[Request, list[F.NodeFit]]] | None = self.di.memo(
                "reclaim_fit_tables", dict
            )
            key = repr(self.req)
            if tables is None:
                self._base = F.node_fits(self.di, self.req)
            elif key in tables:
                self._base = tables[key][1]
            else:
                self._base = F.node_fits(self.di, self.req)
                tables[key] = (self.req, self._base)
            for i, r in enumerate(self._base):
                self.at.setdefault(r.node, []).append(i)
            for n in self.di.nodes:
                self.by_name.setdefault(n.name, []).append(n)
            self.usable = [not any(b in F.STATIC_BLOCKERS for b in r.blockers) for r in self._base]
            if self.whole:
                self.room = sum(r.free // self.per for r, u in zip(self._base, self.usable, strict=True) if u)
        return self._base

    def touch(self, job: EntityState) -> tuple[frozenset[str], dict[str, int]]:
        """The nodes whose rows evicting ``job`` may change: where its pods are, where the GPUs holding its
        shares are, and where those GPUs' reservation pods are (``without`` releases them); and per node the
        most GPUs its eviction frees there (its active pods' and those reservation pods')."""
        got = self._touch.get(id(job))
        if got is not None:
            return got
        nodes: set[str] = set()
        gain: dict[str, int] = {}

        def held(p: EntityState) -> None:
            node = p.get("node")
            if node:
                nodes.add(node)
                if p.get("phase") in ACTIVE_POD_PHASES:
                    gain[node] = gain.get(node, 0) + max(int(p.get("gpus") or 0), 0)

        for p in self.di.pods_of_job(job):
            held(p)
            for g in self._shared().get(f"{p.namespace}/{p.name}", ()):
                if g.get("node"):
                    nodes.add(g.get("node"))
                seen: set[int] = set()
                for key in (g.name, str(g.get("uuid") or g.name)):
                    for r in self._reservations().get(key, ()):
                        if id(r) not in seen:
                            seen.add(id(r))
                            held(r)
        got = self._touch[id(job)] = (frozenset(nodes), gain)
        return got

    def _shared(self) -> dict[str, list[EntityState]]:
        if self._shares is None:
            self._shares = {}
            for g in self.di.gpus:
                for x in g.get("shares") or []:
                    self._shares.setdefault(x.get("pod"), []).append(g)
        return self._shares

    def _reservations(self) -> dict[str, list[EntityState]]:
        if self._reserving is None:
            self._reserving = {}
            for p in self.di.pods:
                if p.get("reservation_for"):
                    self._reserving.setdefault(str(p.get("reservation_for")), []).append(p)
        return self._reserving

    def _gained(self, node: str, before: int, after: int) -> int:
        """Pods of the gang the node's usable rows take more once ``after`` GPUs, not ``before``, may be freed."""
        base = self.base
        more = 0
        for i in self.at.get(node, ()):
            if self.usable[i]:
                r = base[i]
                top = r.allocatable - r.allocated
                more += max(top + after, 0) // self.per - max(top + before, 0) // self.per
        return more

    def _bound(self, gain: dict[str, int]) -> int:
        """Pods of the gang the table's usable rows take at most once ``gain`` GPUs per node may be freed."""
        if not self.base:
            return 0  # no row: no placement
        return self.room + sum(self._gained(node, 0, g) for node, g in gain.items())

    def may_fit_emptied(self) -> bool:
        """False only when a whole-GPU gang would not fit even with every pod gone: its pods of the allocatable
        GPUs of the rows without a static blocker (a pod of 16 GPUs on nodes of 8). Pods recorded with fewer
        than no GPUs would free more than that: then True."""
        if not self.whole or any(int(p.get("gpus") or 0) < 0 for p in self.di.pods):
            return True
        room = sum(
            max(r.allocatable, 0) // self.per for r, u in zip(self.base, self.usable, strict=True) if u
        )
        return room >= self.req.pods

    def may_fit(self, gone: list[Victim]) -> bool:
        """False only when the gang cannot fit once ``gone`` are evicted (a whole-GPU gang's room bounded from
        above); True otherwise, and always for shares and MIG."""
        if not self.whole:
            return True
        gain: dict[str, int] = {}
        for v in gone:
            for node, g in self.touch(v.job)[1].items():
                gain[node] = gain.get(node, 0) + g
        return self._bound(gain) >= self.req.pods

    def rows(self, gone: list[Victim]) -> list[F.NodeFit]:
        """The fit table over the cluster without ``gone``'s pods (``F.node_fits(without(di, gone))``)."""
        jobs = [v.job for v in gone]
        nodes: set[str] = set()
        for j in jobs:
            nodes |= self.touch(j)[0]
        out = list(self.base)
        self._swap(out, nodes, jobs)
        return out

    def given_back(self, rows: list[F.NodeFit], v: Victim, rest: list[Victim]) -> list[F.NodeFit]:
        """``rows(rest)`` from ``rows``, the table without ``rest`` and ``v``: only ``v``'s nodes read again."""
        out = list(rows)
        self._swap(out, set(self.touch(v.job)[0]), [x.job for x in rest])
        return out

    def place(self, rows: list[F.NodeFit]) -> dict[str, int]:
        """``_place_rows`` over a table of this job (its rows where the first table's are, static blockers
        alike: they are the node's, not its pods')."""
        return _place_rows(rows, self.req, self.usable if len(rows) == len(self.usable) else None)

    def take(self, job: EntityState) -> None:
        """One more victim for the trials (``taken_rows``, ``may_fit_taken``)."""
        self.taken.append(job)
        nodes, gain = self.touch(job)
        self.dirty |= nodes
        self.unweighed.append(gain)

    def may_fit_taken(self) -> bool:
        """``may_fit`` of every victim taken so far, the bound moved by the last ones' GPUs only."""
        if not self.whole:
            return True
        if self.taken_room is None:
            self.taken_room = self._bound({})
        for gain in self.unweighed:
            for node, g in gain.items():
                before = self.gain.get(node, 0)
                self.gain[node] = before + g
                self.taken_room += self._gained(node, before, before + g)
        self.unweighed = []
        return self.taken_room >= self.req.pods

    def taken_rows(self) -> list[F.NodeFit]:
        """``rows`` of every victim taken so far: the rows of the nodes the last ones touch read again."""
        if self.current is None:
            self.current = list(self.base)
        if self.dirty:
            self._swap(self.current, self.dirty, self.taken)
            self.dirty = set()
        return self.current

    def _swap(self, out: list[F.NodeFit], nodes: set[str], jobs: list[EntityState]) -> None:
        """Put into ``out`` the rows of ``nodes`` read on a view of them alone without ``jobs``' pods. The view
        holds the nodes, the pods bound to them, their GPUs, and of the jobs that touch them their pods and the
        GPUs holding their shares: all ``without`` reads to release a share, a GPU and its reservation pod."""
        if not self.base:
            return
        nodes = {n for n in nodes if n in self.at}
        if not nodes:
            return
        di = self.di
        near = [j for j in jobs if self.touch(j)[0] & nodes]
        pods = {id(p): p for n in nodes for p in di.pods_bound_to(n)}
        gpus = {id(g): g for n in nodes for g in di.gpus_of_node(n)}
        for j in near:
            for p in di.pods_of_job(j):
                pods.setdefault(id(p), p)
                for g in self._shared().get(f"{p.namespace}/{p.name}", ()):
                    gpus.setdefault(id(g), g)
        view = replace(
            di,
            nodes=[n for name in nodes for n in self.by_name[name]],
            pods=list(pods.values()),
            gpus=list(gpus.values()),
        )
        taken: dict[str, int] = {}
        for r in F.node_fits(without(view, near), self.req):
            k = taken.get(r.node, 0)
            out[self.at[r.node][k]] = r
            taken[r.node] = k + 1


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
