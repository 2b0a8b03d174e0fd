"""The quota and limit raises that would admit a waiting job (``edits.smallest_edits``): its GPU quota or limit,
and on KAI each CPU or memory quota or limit of its queue or department that holds it, each raised to exactly
what admits it, with what the pass started before it charged.

Pure: no database, no simulator.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

from incidents.diagnosis.quota import QuotaAt
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.resource_quota import LIMIT, ResourceQuota
from incidents.diagnosis.resources import CPU, DIMS, EPS, request_vector
from incidents.diagnosis.scheduling_pass import ClusterPass, Considered
from incidents.diagnosis.types import DiagnosisInput
from incidents.diagnosis.whatif_edits import RESOURCE_KEYS, Edit, bound_words, cores_words, memory_words


def is_raise(kind: str) -> bool:
    """A quota or limit raise: GPUs, CPU or memory."""
    return kind in ("quota", "limit") or kind in RESOURCE_KEYS


@dataclass
class Raise:
    """One quota or limit to raise: GPUs (``quota``, ``limit``), or a CPU or memory bound (``cpu_limit`` …) in
    its edit's units (cores, bytes)."""

    kind: str
    name: str
    target: float
    current: float | None
    step: float  # one more job of its size

    @property
    def edit(self) -> Edit:
        return Edit(self.kind, self.name, number=self.target)

    @property
    def words(self) -> str:
        """ "limit +8 on vision (to 16)", "CPU limit +8 cores on vision (to 48 cores)"."""
        delta = self.target - (self.current or 0)
        sign = "+" if delta >= 0 else "-"
        if self.kind in ("quota", "limit"):
            return f"{self.kind} {sign}{abs(delta):g} on {self.name} (to {self.target:g})"
        fmt = cores_words if self.kind.startswith("cpu_") else memory_words
        return f"{bound_words(self.kind)} {sign}{fmt(abs(delta))} on {self.name} (to {fmt(self.target)})"


def queue_name(q: QuotaAt) -> str:
    """The queue (or project) state that carries the job's quota: what an edit names."""
    return q.policy.name if q.policy is not None else q.queue


def gpu_raises(q: QuotaAt, req: Request, *, fallback: bool = False) -> list[Raise]:
    """The GPU quota or limit that holds the job: its queue's, else its department's (none when its GPUs fit,
    unless ``fallback``: then its queue's)."""
    step = max(math.ceil(req.units), 1)
    dept = q.department
    if not q.blocks and dept is not None and dept.blocks:
        kind = "limit" if dept.over_limit else "quota"
        current = dept.limit if dept.over_limit else dept.quota
        return [Raise(kind, dept.name, math.ceil(dept.after - 1e-9), current, step)]
    if not q.blocks and not fallback:
        return []
    kind = "limit" if q.over_limit else "quota"
    current = q.limit if q.over_limit else q.quota
    return [Raise(kind, queue_name(q), math.ceil(q.after - 1e-9), current, step)]


def resource_raises(rq: ResourceQuota, queue: str) -> list[Raise]:
    """Each CPU or memory bound the job would pass, raised to exactly what it needs, until none holds it: its
    queue's (named ``queue``, the state it was read from) and its department's, limit first, then a
    non-preemptible job's deserved quota (as KAI checks them)."""
    trial = copy.deepcopy(rq)
    out: list[Raise] = []
    for _ in range(2 * len(DIMS) * len(trial.bounds)):  # each bound's each resource: its limit and its quota
        b = trial.breach()
        if b is None:
            break
        d, i = b.bound.dims[b.dim], DIMS.index(b.dim)
        need = math.ceil(b.after - EPS)  # millicores or bytes
        if b.kind == LIMIT:
            d.limit = need
        else:
            d.deserved = need
        scale = 1000.0 if b.dim == CPU else 1.0
        name = queue if b.bound.level == "queue" else b.bound.name
        out.append(Raise(f"{b.dim}_{b.kind}", name, need / scale, b.cap / scale, trial.asks[i] / scale))
    return out


def started_resources(
    di: DiagnosisInput, base: ClusterPass, me: Considered
) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], list[float]]]:
    """The CPU and memory the pass started before the job, per (project, queue): all of it, and its
    non-preemptible part (as the pass charged them)."""
    started: dict[tuple[str, str], list[float]] = {}
    np: dict[tuple[str, str], list[float]] = {}
    for c in base.starts:
        if c.order >= me.order:
            continue
        r = job_request(di, c.job)
        vec = request_vector(r)
        if not any(vec):
            continue
        for into in (started, *((np,) if not r.preemptible else ())):
            row = into.setdefault((c.project, c.queue), [0.0, 0.0])
            row[0] += vec[0]
            row[1] += vec[1]
    return started, np


def resource_edits(q: QuotaAt) -> list[Edit]:
    """The CPU and memory quota and limit raises that admit the job ``q`` was read for (``quota_at``), as
    what-if edits; none when no CPU or memory bound holds it."""
    if q.resources is None:
        return []
    return [r.edit for r in resource_raises(q.resources, queue_name(q))]


__all__ = [
    "Raise",
    "gpu_raises",
    "is_raise",
    "queue_name",
    "resource_edits",
    "resource_raises",
    "started_resources",
]
