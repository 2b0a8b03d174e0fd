"""KAI's proportion plugin as the simulator models it: the order queues are served in, and reclaim between them.

Read from KAI Scheduler's behaviour, its documentation (docs/fairness) and its own test tables
(tests/simulator/kai_cases), and checked against its code. GPUs here; where a queue has a CPU or memory
deserved quota, ``cpumem`` adds those resources to every check below, as KAI weighs all three.

Queue order (allocate): each queue offers its next job (inference before train, then the oldest); the queues
are compared at each level of the hierarchy (departments and ungrouped projects, then a department's projects)
by, in turn: still within its deserved quota with the job first; higher queue priority; a queue with nothing to
hold (no quota, no fair share) last; the smaller share with the job (allocated / max(deserved, fair share)),
then without it; the smaller share; the queue created first. (KAI puts a queue over its fair share in every
resource last of all; a queue with an unlimited CPU and memory quota has a fair share in them of what it
requests, so that happens only by its GPUs.)

Reclaim:

- A job may reclaim only when its queue, with the job, stays within its fair share.
- Each victim is judged where the reclaimer's and the victim's queues diverge in the hierarchy (two projects of
  one department compare as siblings; otherwise the top-level queues compare: departments and ungrouped
  projects), on what the victim's queue still holds before that victim goes: either it stays over the victim
  queue's fair share ("maintain fair share"), or the reclaimer's queue at that level stays within its deserved
  quota with the job while the victim's is over its own ("guarantee deserved quota").
- Once the victims are chosen, at every level of the reclaimer's hierarchy its queue (with the job, less what
  the victims free in it) either stays within its fair share or stays less saturated (allocated / fair share)
  than every sibling queue it takes from.

- The victims are then allocated again with the reclaimer in allocate's order (``serve``): one served before the
  reclaimer takes its GPUs back, and the set stands only if the reclaimer still fits (``quota.kai_victims``).

Non-preemptible work must also stay within the deserved quota at every level; the allocate step already holds
it there (``NonPreemptibleOverQuota``), so a reclaimer never passes it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import cpumem
from .cpumem import ZERO, CpuMem, Vec

if TYPE_CHECKING:
    from ..state import SimJob
    from .world import World

EPS = 1e-9
Key = tuple[str, str]  # ("project" | "department", name)
DEPARTMENT_PRIORITY = 0  # a department's parent Queue is rendered without priority, weight 1 (kube/kai.py)
# A queue with nothing to hold: its use counts this many times over (KAI's DRF penalty).
NO_SHARE_PENALTY = 1000.0


@dataclass
class Queues:
    """KAI's queue attributes during one scheduling pass: the tree, deserved quotas, fair shares and limits.

    ``alloc`` is the pass's live use per project (the scheduler updates it as it binds and evicts)."""

    world: World
    fair: dict[Key, float]
    alloc: dict[str, float]
    _created: dict[Key, int] | None = None
    cm: CpuMem | None = None  # CPU and memory, where some queue has a deserved quota in them

    def chain(self, project: str) -> list[Key]:
        """The project's queue and its ancestors, leaf first."""
        dept = self.world.projects[project].department
        if dept and dept in self.world.departments:
            return [("project", project), ("department", dept)]
        return [("project", project)]

    def parent(self, key: Key) -> Key | None:
        chain = self.chain(key[1]) if key[0] == "project" else [key]
        return chain[1] if len(chain) > 1 else None

    def used(self, key: Key) -> float:
        if key[0] == "project":
            return self.alloc[key[1]]
        return sum(self.alloc[n] for n, p in self.world.projects.items() if p.department == key[1])

    def deserved(self, key: Key) -> float:
        q = self.world.projects[key[1]] if key[0] == "project" else self.world.departments[key[1]]
        return deserved_gpus(q.quota_gpus)

    def priority(self, key: Key) -> int:
        return self.world.projects[key[1]].priority if key[0] == "project" else DEPARTMENT_PRIORITY

    def created(self, key: Key) -> int:
        """Which queue was created first (departments, then projects, each in the scenario's order)."""
        if self._created is None:
            self._created = {("department", d): i for i, d in enumerate(self.world.departments)}
            start = len(self._created)
            self._created.update({("project", p): start + i for i, p in enumerate(self.world.projects)})
        return self._created[key]

    def allocatable(self, key: Key) -> float:
        """What the queue may hold before it counts as over its share: max(deserved, fair share), capped by its limit."""
        q = self.world.projects[key[1]] if key[0] == "project" else self.world.departments[key[1]]
        share = max(deserved_gpus(q.quota_gpus), self.fair.get(key, 0.0))
        return share if q.limit_gpus is None else min(share, float(q.limit_gpus))

    def leveled(self, reclaimer: str, victim: str) -> tuple[Key, Key]:
        """The two queues where the reclaimer's and the victim's hierarchies diverge."""
        mine, theirs = self.chain(reclaimer)[::-1], self.chain(victim)[::-1]
        pair = (mine[0], theirs[0])
        for a, b in zip(mine, theirs, strict=False):
            pair = (a, b)
            if a != b:
                break
        return pair


def deserved_gpus(quota: float) -> float:
    """A queue's deserved GPUs; KAI's unlimited (-1) deserves whatever it asks for."""
    return math.inf if quota < 0 else float(quota)


def can_reclaim(q: Queues, project: str, r: float, need: Vec = ZERO) -> bool:
    """The reclaimer's queue, with the job, stays within its fair share (in every resource)."""
    key = ("project", project)
    if q.alloc[project] + r > q.fair.get(key, 0.0) + EPS:
        return False
    return q.cm is None or cpumem.within(cpumem.plus(q.cm.used(key), need), q.cm.fair.get(key, ZERO))


def _fits_deserved(q: Queues, key: Key, r: float, need: Vec) -> bool:
    """The queue, with the job, stays within its deserved quota in every resource."""
    if q.used(key) + r > q.deserved(key) + EPS:
        return False
    return q.cm is None or cpumem.within(cpumem.plus(q.cm.used(key), need), q.cm.deserved(key))


def candidate(q: Queues, project: str, r: float, victim: str, need: Vec = ZERO) -> bool:
    """Whether the victim's queue can lose work to this reclaimer at all (its use now, before any victim)."""
    if victim == project:
        return False
    mine, theirs = q.leveled(project, victim)
    if q.cm is None:
        if q.used(mine) + r > q.deserved(mine) + EPS:
            return q.used(theirs) > q.allocatable(theirs) + EPS
        return q.used(theirs) >= q.deserved(theirs) - EPS
    if not _fits_deserved(q, mine, r, need):
        return _over_allocatable(q, theirs, q.used(theirs), q.cm.used(theirs))
    # KAI's deserved-quota filter: over the resources the job asks for, past the victim's deserved quota in
    # one, and below it in none
    under = False
    if r > 0:
        if q.used(theirs) > q.deserved(theirs) + EPS:
            return True
        under = q.used(theirs) < q.deserved(theirs) - EPS
    verdict = cpumem.deserved_candidate(q.cm, need, theirs)
    if verdict is not None:
        return verdict
    return not under


def _over_allocatable(q: Queues, key: Key, gpus: float, cm_left: Vec) -> bool:
    """The queue holds more than its allocatable share in some resource."""
    if gpus > q.allocatable(key) + EPS:
        return True
    return q.cm is not None and cpumem.over(cm_left, q.cm.allocatable(key))


def allowed(
    q: Queues,
    project: str,
    r: float,
    victim: str,
    remaining: dict[Key, float],
    need: Vec = ZERO,
    cm_remaining: dict[Key, Vec] | None = None,
) -> bool:
    """Whether one more victim of ``victim``'s queue may go, given what that queue still holds (``remaining``,
    and in CPU and memory ``cm_remaining``)."""
    if victim == project:
        return False
    mine, theirs = q.leveled(project, victim)
    left = remaining.setdefault(theirs, q.used(theirs))
    if q.cm is None:
        if left > q.allocatable(theirs) + EPS:  # maintain fair share
            return True
        # guarantee deserved quota
        return q.used(mine) + r <= q.deserved(mine) + EPS and left > q.deserved(theirs) + EPS
    cm_left = (cm_remaining if cm_remaining is not None else {}).setdefault(theirs, q.cm.used(theirs))
    if _over_allocatable(q, theirs, left, cm_left):  # maintain fair share, in some resource
        return True
    # guarantee deserved quota: the reclaimer within it in every resource, the victim's queue past it in one
    past = left > q.deserved(theirs) + EPS or cpumem.over(cm_left, q.cm.deserved(theirs))
    return _fits_deserved(q, mine, r, need) and past


def take(
    q: Queues,
    victim: str,
    gpus: float,
    remaining: dict[Key, float],
    freed: Vec = ZERO,
    cm_remaining: dict[Key, Vec] | None = None,
) -> None:
    """The victim's GPUs (and CPU and memory, ``freed``) leave its queue and every queue above it."""
    for key in q.chain(victim):
        remaining[key] = remaining.get(key, q.used(key)) - gpus
        if q.cm is not None and cm_remaining is not None:
            cm_remaining[key] = cpumem.minus(cm_remaining.get(key, q.cm.used(key)), freed)


def within_bounds(
    q: Queues,
    project: str,
    r: float,
    remaining: dict[Key, float],
    need: Vec = ZERO,
    cm_remaining: dict[Key, Vec] | None = None,
) -> bool:
    """At every level of the reclaimer's hierarchy: within its fair share, or less saturated than each sibling
    it takes from (in every resource the job or its victims hold)."""
    for key in q.chain(project):
        mine = remaining.get(key, q.used(key)) + r
        ratio = _saturation(mine, q.fair.get(key, 0.0))
        if ratio > 1 + EPS:
            for other, left in remaining.items():
                if other == key or q.parent(other) != q.parent(key):
                    continue
                fair = q.fair.get(other, 0.0)
                if fair > EPS and ratio >= _saturation(left, fair) - EPS:
                    return False
        if q.cm is None or cm_remaining is None:
            continue
        held = cpumem.plus((cm_remaining or {}).get(key, q.cm.used(key)), need)
        fair_mine = q.cm.fair.get(key, ZERO)
        for i in (0, 1):
            ratio_i = cpumem.saturation(held[i], fair_mine[i])
            if ratio_i <= 1 + EPS or math.isinf(fair_mine[i]):
                continue
            for other, left_cm in cm_remaining.items():
                if other == key or q.parent(other) != q.parent(key):
                    continue
                fair_i = q.cm.fair.get(other, ZERO)[i]
                if fair_i > EPS and ratio_i >= cpumem.saturation(left_cm[i], fair_i) - EPS:
                    return False
    return True


def _saturation(allocated: float, fair: float) -> float:
    if fair <= EPS:
        return math.inf if allocated > EPS else 0.0
    return allocated / fair


#
# Queue order
#


def queue_key(q: Queues, key: Key, r: float, need: Vec = ZERO) -> tuple:
    """Where the queue stands, offering a job of ``r`` GPUs (and ``need`` CPU and memory): lower is served
    first. In CPU and memory, where a queue has a deserved quota: past it with the job counts as in GPUs, and
    the share compared is the dominant one (the largest of the three)."""
    used, deserved, share = q.used(key), q.deserved(key), q.allocatable(key)
    if q.cm is None:
        return (
            used + r > deserved + EPS,  # past its deserved quota with the job
            -q.priority(key),
            share <= EPS and used + r > EPS,  # nothing to hold, yet it would hold something
            _share(used + r, share),
            _share(used, share),
            share,
            q.created(key),
        )
    return (
        not _fits_deserved(q, key, r, need),
        -q.priority(key),
        share <= EPS and used + r > EPS,
        max(_share(used + r, share), cpumem.dominant_share(q.cm, key, need)),
        max(_share(used, share), cpumem.dominant_share(q.cm, key, ZERO)),
        share,
        q.created(key),
    )


def _share(used: float, share: float) -> float:
    return used * NO_SHARE_PENALTY if share <= EPS else used / share


def job_order(world: World, job: SimJob) -> tuple:
    """A queue's own order: higher priority (inference) first, then the oldest job."""
    return (
        -job.priority_value,
        job.submit_at,
        world.creation_order.get(job.name, 0),
    )


def serve(q: Queues, jobs: list[SimJob]) -> Iterator[SimJob]:
    """Jobs in the order KAI's allocate action takes them: the best queue's next job, again and again.

    Queue keys read the pass's live use (``q.alloc``), so a job bound meanwhile moves its queue back; only the
    served queue's key changes after a bind, every key after an eviction."""
    world = q.world
    queued: dict[str, list[SimJob]] = {}
    for job in sorted(jobs, key=lambda j: job_order(world, j)):
        queued.setdefault(job.project, []).append(job)
    for lst in queued.values():
        lst.reverse()  # pop() from the end: the next job
    tops: dict[Key, list[str]] = {}
    for name in queued:
        tops.setdefault(q.chain(name)[-1], []).append(name)

    def head(name: str) -> float:
        job = queued[name][-1]
        return job.pods * job.gpus_per_pod

    def need(name: str) -> Vec:
        return ZERO if q.cm is None else cpumem.job_need(queued[name][-1])

    def entry(top: Key) -> tuple[tuple, str] | None:
        names = [n for n in tops[top] if queued[n]]
        if not names:
            return None
        if top[0] == "project":
            return queue_key(q, top, head(top[1]), need(top[1])), top[1]
        best = min(names, key=lambda n: queue_key(q, ("project", n), head(n), need(n)))
        return queue_key(q, top, head(best), need(best)), best

    heap: list[tuple[tuple, int, Key, str]] = []
    current: dict[Key, int] = {}
    seq = 0

    def push(top: Key) -> None:
        nonlocal seq
        seq += 1
        current[top] = seq
        got = entry(top)
        if got is not None:
            heapq.heappush(heap, (got[0], seq, top, got[1]))

    for top in tops:
        push(top)
    evictions = len(world.preemptions)
    while heap:
        _key, s, top, name = heapq.heappop(heap)
        if current.get(top) != s:
            continue
        yield queued[name].pop()
        if len(world.preemptions) != evictions:  # victims' queues hold less now
            evictions = len(world.preemptions)
            for t in tops:
                push(t)
        else:
            push(top)
