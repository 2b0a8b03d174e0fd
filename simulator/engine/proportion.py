"""KAI's proportion plugin as the simulator models it: the order queues are served in, and reclaim between them.

Read from KAI Scheduler's behaviour, its documentation (docs/fairness) and its own test tables
(tests/simulator/kai_cases), not its code. GPUs only: KAI also weighs CPU and memory, which the simulator's
queues do not have.

Queue order (allocate): each queue offers its next job (inference before train, then the oldest); the queues
are compared at each level of the hierarchy (departments and ungrouped projects, then a department's projects)
by, in turn: still within its deserved quota with the job first; higher queue priority; a queue with nothing to
hold (no quota, no fair share) last; the smaller share with the job (allocated / max(deserved, fair share)),
then without it; the smaller share; the queue created first. (KAI puts a queue over its fair share in every
resource last of all; the simulator's queues have unlimited CPU and memory quotas, whose fair share is what
they request, so that never happens.)

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


def can_reclaim(q: Queues, project: str, r: float) -> bool:
    """The reclaimer's queue, with the job, stays within its fair share."""
    key = ("project", project)
    return q.alloc[project] + r <= q.fair.get(key, 0.0) + EPS


def candidate(q: Queues, project: str, r: float, victim: str) -> bool:
    """Whether the victim's queue can lose work to this reclaimer at all (its use now, before any victim)."""
    if victim == project:
        return False
    mine, theirs = q.leveled(project, victim)
    if q.used(mine) + r > q.deserved(mine) + EPS:
        return q.used(theirs) > q.allocatable(theirs) + EPS
    return q.used(theirs) >= q.deserved(theirs) - EPS


def allowed(q: Queues, project: str, r: float, victim: str, remaining: dict[Key, float]) -> bool:
    """Whether one more victim of ``victim``'s queue may go, given what that queue still holds (``remaining``)."""
    if victim == project:
        return False
    mine, theirs = q.leveled(project, victim)
    left = remaining.setdefault(theirs, q.used(theirs))
    if left > q.allocatable(theirs) + EPS:  # maintain fair share
        return True
    # guarantee deserved quota
    return q.used(mine) + r <= q.deserved(mine) + EPS and left > q.deserved(theirs) + EPS


def take(q: Queues, victim: str, gpus: float, remaining: dict[Key, float]) -> None:
    """The victim's GPUs leave its queue and every queue above it."""
    for key in q.chain(victim):
        remaining[key] = remaining.get(key, q.used(key)) - gpus


def within_bounds(q: Queues, project: str, r: float, remaining: dict[Key, float]) -> bool:
    """At every level of the reclaimer's hierarchy: within its fair share, or less saturated than each sibling
    it takes from."""
    for key in q.chain(project):
        mine = remaining.get(key, q.used(key)) + r
        ratio = _saturation(mine, q.fair.get(key, 0.0))
        if ratio <= 1 + EPS:
            continue
        for other, left in remaining.items():
            if other == key or q.parent(other) != q.parent(key):
                continue
            fair = q.fair.get(other, 0.0)
            if fair > EPS and ratio >= _saturation(left, fair) - EPS:
                return False
    return True


def _saturation(allocated: float, fair: float) -> float:
    if fair <= EPS:
        return math.inf if allocated > EPS else 0.0
    return allocated / fair


#
# Queue order
#


def queue_key(q: Queues, key: Key, r: float) -> tuple:
    """Where the queue stands, offering a job of ``r`` GPUs: lower is served first."""
    used, deserved, share = q.used(key), q.deserved(key), q.allocatable(key)
    return (
        used + r > deserved + EPS,  # past its deserved quota with the job
        -q.priority(key),
        share <= EPS and used + r > EPS,  # nothing to hold, yet it would hold something
        _share(used + r, share),
        _share(used, share),
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

    def entry(top: Key) -> tuple[tuple, str] | None:
        names = [n for n in tops[top] if queued[n]]
        if not names:
            return None
        if top[0] == "project":
            return queue_key(q, top, head(top[1])), top[1]
        best = min(names, key=lambda n: queue_key(q, ("project", n), head(n)))
        return queue_key(q, top, head(best)), best

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
