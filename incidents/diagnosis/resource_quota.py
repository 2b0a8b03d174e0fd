"""A job's CPU and memory against its queue's and department's CPU and memory quota and limit (KAI).

KAI checks each queue up the hierarchy, every resource the job asks: its limit (the job waits "over limit"
whatever it is), and, for a non-preemptible job, its deserved quota counted with the non-preemptible work only.
GPUs are ``quota``'s; this is the same check for CPU and memory (``resources`` reads the quotas).

Pure: reads the ``DiagnosisInput`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from incidents.diagnosis.quantities import format_cpu, format_memory
from incidents.diagnosis.request import Request
from incidents.diagnosis.resources import (
    CPU,
    DIMS,
    EPS,
    WORDS,
    Dim,
    Vector,
    bounded,
    dims_of,
    held,
    request_vector,
)
from incidents.diagnosis.types import DiagnosisInput, EntityState

LIMIT = "limit"
QUOTA = "quota"


@dataclass
class Bound:
    """One level of the job's hierarchy (its queue, its department) with a CPU or memory quota or limit."""

    level: str  # "queue" | "department"
    name: str
    members: tuple[str, ...]  # the projects / queues whose pods count against it
    dims: dict[str, Dim]
    held: list[float]  # [CPU millicores, memory bytes] its members' bound pods request
    non_preemptible: list[float]  # the same, of their non-preemptible jobs only


@dataclass
class Breach:
    """The first bound the job would pass: where, which resource, and the numbers."""

    bound: Bound
    dim: str
    kind: str  # LIMIT | QUOTA
    after: float
    cap: float

    @property
    def words(self) -> str:
        """ "queue queue0 at 4 cores of its CPU limit 2.5 cores"."""
        fmt = show(self.dim)
        what = f"{WORDS[self.dim]} {'limit' if self.kind == LIMIT else 'quota (non-preemptible work)'}"
        return f"{self.bound.level} {self.bound.name} at {fmt(self.after)} of its {what} {fmt(self.cap)}"


def show(dim: str) -> Callable[[float], str]:
    return (lambda v: format_cpu(v / 1000.0)) if dim == CPU else format_memory


@dataclass
class ResourceQuota:
    """The job's CPU and memory against every bound above it."""

    bounds: list[Bound]
    asks: Vector
    preemptible: bool

    def breach(self) -> Breach | None:
        for b in self.bounds:
            for i, dim in enumerate(DIMS):
                ask = self.asks[i]
                if ask <= EPS:
                    continue
                d = b.dims[dim]
                if d.limit is not None and b.held[i] + ask > d.limit + EPS:
                    return Breach(b, dim, LIMIT, b.held[i] + ask, d.limit)
        if self.preemptible:
            return None
        for b in self.bounds:
            for i, dim in enumerate(DIMS):
                ask = self.asks[i]
                d = b.dims[dim]
                if ask > EPS and d.deserved is not None and b.non_preemptible[i] + ask > d.deserved + EPS:
                    return Breach(b, dim, QUOTA, b.non_preemptible[i] + ask, d.deserved)
        return None

    @property
    def blocks(self) -> bool:
        return self.breach() is not None

    def charge(
        self, started: dict[tuple[str, str], list[float]], np: dict[tuple[str, str], list[float]]
    ) -> None:
        """Add what a pass started before the job to each bound: ``started`` (project, queue) -> [CPU, memory] of
        every start, ``np`` of the non-preemptible ones."""
        for b in self.bounds:
            for into, source in ((b.held, started), (b.non_preemptible, np)):
                for (p, q), vec in source.items():
                    if p in b.members or q in b.members:
                        for i in range(len(DIMS)):
                            into[i] += vec[i]


def resource_quota(
    di: DiagnosisInput,
    req: Request,
    project: str,
    queue: str,
    policy: EntityState | None,
    department: EntityState | None,
) -> ResourceQuota | None:
    """The job's CPU and memory bounds (None when neither its queue nor its department sets one)."""
    bounds: list[Bound] = []
    if bounded(policy):
        mine = held(di, project, queue)
        pre = held(di, project, queue, preemptible=True)
        bounds.append(
            Bound(
                "queue",
                queue or project,
                tuple(x for x in (project, queue) if x),
                dims_of(policy),
                list(mine),
                [max(a - b, 0.0) for a, b in zip(mine, pre, strict=True)],
            )
        )
    if department is not None and bounded(department):
        members = tuple(
            dict.fromkeys([*(department.get("projects") or []), *(department.get("queues") or [])])
        )
        total = [0.0, 0.0]
        np = [0.0, 0.0]
        for m in dict.fromkeys(department.get("projects") or members):
            a, b = held(di, m, m), held(di, m, m, preemptible=True)
            for i in range(len(DIMS)):
                total[i] += a[i]
                np[i] += max(a[i] - b[i], 0.0)
        bounds.append(Bound("department", department.name, members, dims_of(department), total, np))
    if not bounds:
        return None
    return ResourceQuota(bounds, request_vector(req), req.preemptible)


__all__ = ["LIMIT", "QUOTA", "Bound", "Breach", "ResourceQuota", "resource_quota", "show"]
