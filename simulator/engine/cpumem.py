"""KAI's proportion plugin in CPU and memory: deserved quotas, fair shares and what reclaim checks in them.

KAI's queues have a deserved quota, a limit and a fair share in each of GPU, CPU and memory, and its reclaim
and queue-order rules read all three (``proportion.py`` holds the GPU side and calls these). A queue without a
CPU or memory deserved quota has KAI's -1, unlimited: its allocatable share is unbounded and its fair share is
what it requests, so every check here passes for it. Only a world where some queue sets one builds a
``CpuMem``; elsewhere the GPU rules alone decide, as they would in KAI.

Units: millicores and bytes. A fair share is divided as the GPUs are (``division.divide``), with an over-quota
weight of 1 (the Queue renders it so) and the cluster's ready nodes' allocatable CPU and memory (unbounded where
a pool does not say).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .sharing import cpu_memory_request

if TYPE_CHECKING:
    from ..state import SimJob
    from .world import World

EPS = 1e-6
Key = tuple[str, str]  # ("project" | "department", name), as proportion.Key
Vec = tuple[float, float]  # (CPU millicores, memory bytes)
ZERO: Vec = (0.0, 0.0)


def job_need(job: SimJob) -> Vec:
    """CPU and memory the whole job asks for."""
    cpu, mem = cpu_memory_request(job)
    return (float(cpu * job.pods), float(mem * job.pods))


def wanted(world: World) -> bool:
    """Whether any queue has a CPU or memory deserved quota."""
    queues: list[Any] = [*world.projects.values(), *world.departments.values()]
    return any(q.quota_cpu_millis is not None or q.quota_memory_bytes is not None for q in queues)


@dataclass
class CpuMem:
    """One pass's CPU and memory view of KAI's queues. Use is read live from the bound pods."""

    world: World
    fair: dict[Key, Vec]
    _members: dict[Key, set[str]] = field(default_factory=dict)

    def members(self, key: Key) -> set[str]:
        got = self._members.get(key)
        if got is None:
            if key[0] == "project":
                got = {key[1]}
            else:
                got = {n for n, p in self.world.projects.items() if p.department == key[1]}
            self._members[key] = got
        return got

    def used(self, key: Key) -> Vec:
        cpu = mem = 0.0
        names = self.members(key)
        for job in self.world.jobs.values():
            if job.project not in names:
                continue
            bound = sum(1 for p in self.world.pods_of(job) if p.node is not None)
            if bound:
                c, m = cpu_memory_request(job)
                cpu, mem = cpu + bound * c, mem + bound * m
        return (cpu, mem)

    def deserved(self, key: Key) -> Vec:
        q = self._queue(key)
        return (_bound(q.quota_cpu_millis), _bound(q.quota_memory_bytes))

    def allocatable(self, key: Key) -> Vec:
        """KAI's allocatable share per resource: max(deserved, fair share), capped by the limit; an unlimited
        deserved quota is bounded by the limit only."""
        q = self._queue(key)
        fair = self.fair.get(key, ZERO)
        out = []
        for deserved, limit, share in (
            (_bound(q.quota_cpu_millis), _bound(q.limit_cpu_millis), fair[0]),
            (_bound(q.quota_memory_bytes), _bound(q.limit_memory_bytes), fair[1]),
        ):
            out.append(limit if math.isinf(deserved) else min(limit, max(deserved, share)))
        return (out[0], out[1])

    def _queue(self, key: Key) -> Any:  # a SimProject or a SimDepartment
        return self.world.projects[key[1]] if key[0] == "project" else self.world.departments[key[1]]


def _bound(value: int | None) -> float:
    return math.inf if value is None else float(value)


def plus(a: Vec, b: Vec) -> Vec:
    return (a[0] + b[0], a[1] + b[1])


def minus(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1])


def within(a: Vec, b: Vec) -> bool:
    """a <= b in every resource."""
    return a[0] <= b[0] + EPS and a[1] <= b[1] + EPS


def over(a: Vec, b: Vec) -> bool:
    """a > b in some resource."""
    return not within(a, b)


def deserved_candidate(cm: CpuMem, need: Vec, theirs: Key) -> bool | None:
    """KAI's deserved-quota victim filter in CPU and memory, over the resources the reclaimer asks for whose
    deserved quota is bounded: True when the victim's queue is past it in one, False when it is below it in
    one (and past it in none), None when neither resource says anything."""
    used, deserved = cm.used(theirs), cm.deserved(theirs)
    under = False
    for i in (0, 1):
        if need[i] <= 0 or math.isinf(deserved[i]):
            continue
        if used[i] > deserved[i] + EPS:
            return True
        if used[i] < deserved[i] - EPS:
            under = True
    return False if under else None


def saturation(allocated: float, fair: float) -> float:
    if fair <= EPS:
        return math.inf if allocated > EPS else 0.0
    return allocated / fair


def dominant_share(cm: CpuMem, key: Key, extra: Vec) -> float:
    """The queue's largest share in CPU and memory, (use + extra) / allocatable (a bounded one only)."""
    used, allocatable = plus(cm.used(key), extra), cm.allocatable(key)
    out = 0.0
    for i in (0, 1):
        if math.isinf(allocatable[i]):
            continue
        out = max(out, used[i] * 1000.0 if allocatable[i] <= EPS else used[i] / allocatable[i])
    return out


def build(world: World) -> CpuMem:
    """The pass's fair shares in CPU and memory, divided level by level as the GPUs are."""
    from .division import Division, divide
    from .proportion import DEPARTMENT_PRIORITY

    requested: dict[str, list[float]] = {n: [0.0, 0.0] for n in world.projects}
    for job in world.jobs.values():
        if job.state not in ("Pending", "Running"):
            continue
        c, m = cpu_memory_request(job)
        requested[job.project][0] += c * job.pods
        requested[job.project][1] += m * job.pods
    ready = [n for n in world.nodes.values() if n.ready]
    totals = (
        math.inf
        if any(n.cpu_millis is None for n in ready)
        else float(sum(n.cpu_millis or 0 for n in ready)),
        math.inf
        if any(n.memory_bytes is None for n in ready)
        else float(sum(n.memory_bytes or 0 for n in ready)),
    )
    fair: dict[Key, list[float]] = {}
    for i, (qattr, lattr) in enumerate(
        (("quota_cpu_millis", "limit_cpu_millis"), ("quota_memory_bytes", "limit_memory_bytes"))
    ):

        def deserved(q: Any, qattr: str = qattr) -> float:
            v = getattr(q, qattr)
            return -1.0 if v is None else float(v)

        def demand(q: Any, want: float, lattr: str = lattr) -> float:
            limit = getattr(q, lattr)
            return want if limit is None else min(want, float(limit))

        members: dict[str, list[str]] = {d: [] for d in world.departments}
        top: list[Division] = []
        for n, p in world.projects.items():
            if p.department in members:
                members[p.department].append(n)
            else:
                top.append(Division(n, deserved(p), demand(p, requested[n][i]), p.priority, 1))
        for d, names in members.items():
            dept = world.departments[d]
            want = demand(dept, sum(demand(world.projects[n], requested[n][i]) for n in names))
            top.append(Division(f"department/{d}", deserved(dept), want, DEPARTMENT_PRIORITY, 1))
        level = divide(totals[i], top)
        for n, p in world.projects.items():
            if p.department not in members:
                fair.setdefault(("project", n), [0.0, 0.0])[i] = level[n]
        for d, names in members.items():
            fair.setdefault(("department", d), [0.0, 0.0])[i] = level[f"department/{d}"]
            inner = divide(
                level[f"department/{d}"],
                [
                    Division(
                        n,
                        deserved(world.projects[n]),
                        demand(world.projects[n], requested[n][i]),
                        world.projects[n].priority,
                        1,
                    )
                    for n in names
                ],
                within=True,
            )
            for n, v in inner.items():
                fair.setdefault(("project", n), [0.0, 0.0])[i] = v
    return CpuMem(world, {k: (v[0], v[1]) for k, v in fair.items()})
