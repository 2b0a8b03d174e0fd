"""The order a scheduler serves its waiting jobs in: the one ordering every "who starts first" answer reads.

The diagnosis' counterfactuals ("fixing h100-03 would start research/w1 first"), an action's impact ("pending
jobs that would then start") and the cluster's pass (the what-if page, the why-pending panel) all walk the
waiting jobs through :class:`QueueOrder`, so they never disagree about who goes first.

- **KAI** (its proportion plugin, as KAI Scheduler's docs/fairness describe it): each queue offers its next job
  (inference before train, then the oldest); queues are compared at each level of the hierarchy, departments
  (parent queues) first, then the projects of one department, by: still within its deserved quota with the
  job, then queue priority, then the smaller share allocated / max(deserved, fair share) with the job and then
  without it, then the smaller job, then the job's priority class and age. The fair share is the cluster's
  GPUs divided among the queues (``division.divide``): deserved quota first, then the spare by priority and
  over-quota weight, never past a queue's demand or its limit. Each start is charged to its queue (and
  department) before the next choice, so two equal queues split free GPUs between them.
- **Kueue**: each ClusterQueue orders its workloads by priority class, then creation time (StrictFIFO or
  BestEffortFIFO: the caller blocks a StrictFIFO queue whose head cannot be admitted, :meth:`block`); the heads
  are compared by queue priority, then whether admitting the head makes its ClusterQueue borrow from its cohort
  (borrowing goes after), then priority class, then creation time.
- **Kubernetes**: priority class, then creation time.

Pure: reads the ``DiagnosisInput`` only (no database, no simulator).
"""

# size: one class, both schedulers' order with the heads and keys it keeps current, and the copy the replay serves
# at each step (``moved``); the helpers that name its rule and its keys sit beside it
from __future__ import annotations

import copy
import heapq
from typing import Any, TypeVar

from incidents.diagnosis.allocation import job_units, project_allocated
from incidents.diagnosis.division import capacity
from incidents.diagnosis.precedence import CLASS_RANK, job_rank, queue_priority_of
from incidents.diagnosis.resources import DIMS, ZERO, Vector, dims_of, held, job_vector, totals
from incidents.diagnosis.standing import Standing, fair_shares, standing_of
from incidents.diagnosis.types import DiagnosisInput, EntityState

_T = TypeVar("_T")


def job_queue(job: EntityState) -> str:
    """The queue a job is charged to (KAI Queue / Kueue ClusterQueue), else its project."""
    return job.get("queue") or job.get("project") or ""


def in_queue_key(job: EntityState) -> tuple[int, str, str, str]:
    """A job's place in its own queue: inference before train, then the oldest (submission, then name)."""
    return (
        -job_rank(job),
        job.get("submitted") or "",
        job.namespace,
        job.name,
    )


def department_of(di: DiagnosisInput, queue: str) -> str:
    """The department (KAI parent queue, Kueue cohort) above a queue, or ""."""
    for kind in ("queue", "project"):
        q = di.find(kind, queue)
        if q is not None and (q.get("department") or q.get("parent")):
            return str(q.get("department") or q.get("parent"))
    for d in di.departments:
        if queue in (d.get("projects") or []) or queue in (d.get("queues") or []):
            return d.name
    return ""


def leaf_queues(di: DiagnosisInput) -> list[str]:
    """The queues jobs are charged to (KAI leaf queues, Kueue ClusterQueues, else the projects), not the parent
    queues a department is: every one holding GPUs has its standing, waiting jobs or not."""
    depts = {d.name for d in di.departments}
    parents = {q.get("parent") for q in di.queues} | {q.get("department") for q in di.queues}
    leaves = [q.name for q in di.queues if q.name not in depts and q.name not in parents]
    return sorted(leaves or [p.name for p in di.projects])


class QueueOrder:
    """Waiting jobs in the scheduler's order, one at a time (:meth:`next`); the caller :meth:`charge`\\ s each
    start to its queue before asking for the next, so fair share follows what the pass has started."""

    def __init__(self, di: DiagnosisInput, waiting: list[EntityState]) -> None:
        self.di = di
        self.scheduler = di.scheduler
        self.queues: dict[str, list[EntityState]] = {}
        for j in sorted(waiting, key=in_queue_key):
            self.queues.setdefault(job_queue(j), []).append(j)
        self.heads = dict.fromkeys(self.queues, 0)
        self.blocked: set[str] = set()
        self.position = {id(j): i for jobs in self.queues.values() for i, j in enumerate(jobs, 1)}
        self.queue: dict[str, Standing] = {}
        self.parent: dict[str, str] = {}
        self.capacity: float | None = None
        kai = self.scheduler == "kai"
        # CPU and memory each waiting job asks (KAI weighs them beside GPUs; other schedulers' order does not)
        self.vec: dict[int, Vector] = {id(j): job_vector(di, j) for j in waiting} if kai else {}
        self.total: Vector = totals(di) if kai else ZERO
        for name in [*self.queues, *(q for q in leaf_queues(di) if q not in self.queues)]:
            state = di.find("queue", name) or di.find("project", name)
            s = standing_of(state, name, project_allocated(di, name, name))
            s.demand = s.used + sum(job_units(j) for j in self.queues.get(name, []))
            s.priority = queue_priority_of(di, name)
            if kai:
                s.res = dims_of(state)
                asks = [self.vec[id(j)] for j in self.queues.get(name, [])]
                for i, (dim, used) in enumerate(zip(DIMS, held(di, name, name), strict=True)):
                    s.res[dim].used = used
                    s.res[dim].demand = used + sum(a[i] for a in asks)
            self.queue[name] = s
            self.parent[name] = department_of(di, name)
        self.department: dict[str, Standing] = {}
        for name in set(self.parent.values()) - {""}:
            state = di.find("department", name) or di.find("queue", name)
            members = [self.queue[q] for q in self.queue if self.parent[q] == name]
            d = standing_of(state, name, sum(m.used for m in members))
            d.demand = sum(m.demand for m in members)
            if state is None or state.get("over_quota_weight") is None:
                d.weight = 1.0  # KAI renders a department's parent queue with weight 1
            if kai:
                d.res = dims_of(state)
                for dim in DIMS:
                    d.res[dim].used = sum(m.res[dim].used for m in members)
                    d.res[dim].demand = sum(m.res[dim].demand for m in members)
            self.department[name] = d
        # CPU and memory weigh in only where something asks, holds or bounds them (else every CPU and memory term
        # of KAI's key is 0 or true, and the key is the GPUs' alone: 12,000 waiting jobs keyed half as fast)
        self.weigh = kai and (
            any(any(v) for v in self.vec.values())
            or any(
                x.res[d].used > 0 or x.res[d].deserved is not None or x.res[d].limit is not None
                for x in [*self.queue.values(), *self.department.values()]
                for d in DIMS
            )
        )
        if kai:
            self._fair()
        self._keys: dict[str, tuple[Any, ...]] = {}  # live queue -> its key, kept up to date by _refresh
        self._heap: list[tuple[tuple[Any, ...], str]] = []
        for name in self.queues:
            self._refresh(name)

    def _fair(self) -> None:
        top = [*self.department.values(), *(self.queue[q] for q in self.queue if not self.parent[q])]
        if self.capacity is None:  # the GPUs divided, read once (a replay divides again at each step)
            self.capacity = capacity(self.di)
        fair_shares(self.capacity, top, self.total if self.weigh else None)
        for name, d in self.department.items():
            inner: Vector | None = (d.res[DIMS[0]].fair, d.res[DIMS[1]].fair) if self.weigh else None
            fair_shares(d.fair, [self.queue[q] for q in self.queue if self.parent[q] == name], inner)

    #
    # Serving
    #
    def __iter__(self) -> QueueOrder:
        return self

    def __next__(self) -> EntityState:
        job = self.next()
        if job is None:
            raise StopIteration
        return job

    def next(self) -> EntityState | None:
        """The next job the scheduler would consider, or None when every queue is served."""
        if not self._keys:
            return None
        if self.scheduler == "kai" and self.department:
            name = self._kai_pick()
        else:  # no department: a queue's own key is its key at the top, kept in a heap (stale entries skipped)
            while self._heap[0][0] != self._keys.get(self._heap[0][1]):
                heapq.heappop(self._heap)
            name = self._heap[0][1]
        job = self.queues[name][self.heads[name]]
        self.heads[name] += 1
        self._refresh(name)
        return job

    def charge(self, job: EntityState, units: float, *, release: bool = False) -> None:
        """Count a started job against its queue and department before the next choice (``release``: take a
        running job's ``units`` and CPU and memory off them, as an eviction does)."""
        name = job_queue(job)
        s = self.queue.get(name)
        if s is None:
            return
        vec = self._vector(job)
        if release:
            units, vec = -units, (-vec[0], -vec[1])
        if (
            any(vec) and not self.weigh
        ):  # a job the order was not built with asks CPU or memory: weigh them now
            self.weigh = True
            self._fair()
            for q in list(self._keys):
                self._refresh(q)
        d = self.department.get(self.parent.get(name, ""))
        for x in (s, d):
            if x is None:
                continue
            x.used += units
            for dim, v in zip(DIMS, vec, strict=True):
                x.res[dim].used += v
        if name in self._keys:
            self._refresh(name)

    def moved(
        self,
        waiting: list[EntityState],
        delta: dict[str, tuple[float, Vector]],
        ended: dict[str, tuple[float, Vector]] | None = None,
    ) -> QueueOrder:
        """A copy serving ``waiting`` from the start, each queue's (and its department's) holdings moved by
        ``delta`` (queue -> GPU units, [CPU, memory]) and, on KAI, what it asks moved by ``ended`` (what its jobs
        that ended held, negative: a start or an eviction moves what a queue holds, not what it holds plus what
        waits), the fair shares divided again from it (``_fair``). What the queue replayed forward serves at
        each step: KAI and Kueue weigh their queues again every session, as jobs end and start, and KAI divides
        its fair shares again from what the queues then ask. The jobs of a queue this order serves keep its
        order; others go by :func:`in_queue_key`."""
        new = copy.copy(self)
        new.queue = {n: _copied(s) for n, s in self.queue.items()}
        new.department = {n: _copied(d) for n, d in self.department.items()}
        new.parent = dict(self.parent)
        mine = {id(j) for j in waiting}
        new.queues = {}
        for name, jobs in self.queues.items():
            kept = [j for j in jobs if id(j) in mine]
            if kept:
                new.queues[name] = kept
        known = {id(j) for jobs in new.queues.values() for j in jobs}
        others = [j for j in waiting if id(j) not in known]
        for j in others:
            name = job_queue(j)
            if name not in new.queue:
                state = self.di.find("queue", name) or self.di.find("project", name)
                new.queue[name] = standing_of(state, name, project_allocated(self.di, name, name))
                new.queue[name].priority = queue_priority_of(self.di, name)
                new.parent[name] = ""
            new.queues.setdefault(name, []).append(j)
        for name in {job_queue(j) for j in others}:
            new.queues[name].sort(key=in_queue_key)
        new._move(delta)
        if ended and self.scheduler == "kai":
            new._move(ended, demand=True)
            new._fair()
        new.heads = dict.fromkeys(new.queues, 0)
        new.blocked = set()
        new.position = {id(j): i for jobs in new.queues.values() for i, j in enumerate(jobs, 1)}
        new._keys, new._heap = {}, []
        for name in new.queues:
            new._refresh(name)
        return new

    def _move(self, delta: dict[str, tuple[float, Vector]], *, demand: bool = False) -> None:
        """Move each queue's (and its department's) holdings by ``delta``, or (``demand``) what it asks."""
        for name, (units, vec) in delta.items():
            if name not in self.queue:
                continue
            for x in (self.queue[name], self.department.get(self.parent[name])):
                if x is None:
                    continue
                if demand:
                    x.demand = max(x.demand + units, 0.0)
                else:
                    x.used += units
                for dim, v in zip(DIMS, vec, strict=True):
                    if demand:
                        x.res[dim].demand = max(x.res[dim].demand + v, 0.0)
                    else:
                        x.res[dim].used += v

    def block(self, queue: str) -> None:
        """A StrictFIFO queue whose head cannot be admitted: the jobs behind it wait too."""
        self.blocked.add(queue)

    def is_blocked(self, queue: str) -> bool:
        return queue in self.blocked

    def in_queue(self, job: EntityState) -> int:
        """The job's 1-based place in its own queue."""
        return self.position.get(id(job), 0)

    def why_before(self, other: EntityState, job: EntityState) -> str:
        """Why ``other`` is served before ``job``, in the pages' words (:func:`why_before`)."""
        return why_before(self.di, other, job)

    #
    # Keys
    #
    def _head(self, queue: str) -> EntityState:
        return self.queues[queue][self.heads[queue]]

    def _tail_key(self, queue: str) -> tuple[Any, ...]:
        rank, submitted = in_queue_key(self._head(queue))[:2]
        return (rank, submitted, queue)

    def _flat_key(self, queue: str) -> tuple[Any, ...]:
        rank, submitted = in_queue_key(self._head(queue))[:2]
        if self.scheduler == "kueue":
            s = self.queue[queue]
            borrows = s.deserved is not None and not s.within(job_units(self._head(queue)))
            return (-s.priority, borrows, rank, submitted)
        return (rank, submitted)

    def _vector(self, job: EntityState) -> Vector:
        """The CPU and memory a job asks, as this order weighs them (none where the scheduler is not KAI)."""
        if self.scheduler != "kai":
            return ZERO
        got = self.vec.get(id(job))
        return got if got is not None else job_vector(self.di, job)

    def _kai_key(self, s: Standing, units: float, vec: Vector = ZERO) -> tuple[Any, ...]:
        """KAI's queue order: not over its fair share in every resource, then within its deserved quota with the
        job, queue priority, the smaller dominant share with the job and then without it; a tie: the smaller
        job."""
        if not self.weigh:
            return (False, not s.within(units), -s.priority, s.ratio(units), s.ratio(), units)
        return (
            s.over_fair_share(),
            not s.within_all(units, vec),
            -s.priority,
            s.dominant(self.total, units, vec),
            s.dominant(self.total),
            units,
        )

    def _refresh(self, queue: str) -> None:
        """Key a queue again after its head or its standing changed (the others' keys stay as they were: 12,000
        waiting jobs in 50 queues were 20 s keyed afresh at every step)."""
        if self.heads[queue] >= len(self.queues[queue]):
            self._keys.pop(queue, None)
        else:
            key: tuple[Any, ...]
            if self.scheduler == "kai":
                first = self._head(queue)
                key = (
                    self._kai_key(self.queue[queue], job_units(first), self._vector(first)),
                    self._tail_key(queue),
                )
            else:
                key = (self._flat_key(queue), queue)
            self._keys[queue] = key
            heapq.heappush(self._heap, (key, queue))

    def _kai_pick(self) -> str:
        """Departments (and ungrouped projects) first, then the projects of the chosen department."""
        best: dict[str, str] = {}  # top-level name -> its best project
        for q, key in self._keys.items():
            top = self.parent[q] or q
            if top not in best or key < self._keys[best[top]]:
                best[top] = q

        def top_key(top: str) -> tuple[Any, ...]:
            q = best[top]
            d = self.department.get(top) if self.parent[q] else None
            if d is None:
                return self._keys[q]
            head = self._head(q)
            return (self._kai_key(d, job_units(head), self._vector(head)), self._tail_key(q))

        return best[min(best, key=top_key)]


def _copied(s: Standing) -> Standing:
    """A standing to move apart from the one it copies (its CPU and memory standings too), copied field by field
    (a replay copies every queue's standing at each step; ``dataclasses.replace`` costs several times more)."""
    new = _bare(s)
    new.res = {d: _bare(x) for d, x in s.res.items()}
    return new


def _bare(x: _T) -> _T:
    new = object.__new__(type(x))
    new.__dict__.update(x.__dict__)
    return new


def why_before(di: DiagnosisInput, other: EntityState, job: EntityState) -> str:
    """Why ``other`` is served before ``job``, in the pages' words."""
    mine, theirs = job_queue(job), job_queue(other)
    rank = CLASS_RANK.get(other.get("priority_class") or "train", 0) > CLASS_RANK.get(
        job.get("priority_class") or "train", 0
    )
    if theirs == mine:
        return "same queue, higher priority class" if rank else "same queue, submitted earlier"
    if queue_priority_of(di, theirs) > queue_priority_of(di, mine):
        return "higher queue priority"
    if di.scheduler == "kai":
        return "its queue is further below its fair share"
    if rank:
        return "higher priority class"
    return "submitted earlier"


def order_words(scheduler: str) -> str:
    """The order rule in a few words, for a citation's locator."""
    if scheduler == "kai":
        return "KAI: within deserved quota, queue priority, fair share, priority class, age"
    if scheduler == "kueue":
        return "Kueue: queue priority, not borrowing, priority class, creation"
    return "priority class, creation"


def rule(scheduler: str) -> str:
    """The words of the order rule, as the pages show them."""
    if scheduler == "kueue":
        return (
            "Kueue: each ClusterQueue by its queueing strategy (BestEffortFIFO unless the queue records "
            "StrictFIFO: a head that cannot be admitted blocks the jobs behind it), within a queue by priority "
            "class then creation time; across queues by queue priority, then not borrowing from the cohort "
            "before borrowing, then priority class, then creation time"
        )
    if scheduler == "kai":
        return (
            "KAI: departments first, then their projects; a queue still within its deserved quota first, then "
            "queue priority, then fair share (the smaller share allocated / fair share, the fair share "
            "dividing spare GPUs by over-quota weight), then the job's priority class, then its age; each "
            "start is charged to its queue before the next choice"
        )
    return "Kubernetes: priority class, then creation time"


def strict_fifo(di: DiagnosisInput, queue: str) -> bool:
    q = di.find("queue", queue)
    return q is not None and str(q.get("queueing_strategy") or "") == "StrictFIFO"


__all__ = [
    "QueueOrder",
    "Standing",
    "department_of",
    "fair_shares",
    "in_queue_key",
    "job_queue",
    "order_words",
    "rule",
    "strict_fifo",
    "why_before",
]
