"""Who holds what: each queue's and department's deserved quota, allocation and fair share at t, and who is
starved or borrowing while others starve (issue 44 item 5, the queues page ``/c/<cluster>/queues/``).

The fair share is the product's own reading of how KAI's proportion plugin (and a Kueue cohort's lending)
divides the cluster: every claimant first gets what it deserves (its quota) up to what it asks (held plus
waiting); what is left is split among those that still ask for more, in proportion to their over-quota
weight, never past their limit nor past what they ask, until nothing is left or nobody asks. It is divided
twice: the cluster among departments and the queues in none, then each department's share among its queues.

Pure: reads the ``DiagnosisInput`` and a ``cluster_pass``; no database, no simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from incidents.diagnosis.allocation import project_allocated
from incidents.diagnosis.division import EPS, Claim, capacity, divide
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduling_pass import ClusterPass, Considered
from incidents.diagnosis.types import DiagnosisInput, EntityState


@dataclass
class Standing:
    """A queue (KAI Queue / Kueue ClusterQueue) or a department (KAI parent queue / Kueue Cohort) at t."""

    kind: str  # "queue" | "department"
    name: str
    department: str | None
    deserved: float | None
    limit: float | None
    weight: float
    allocated: float
    waiting_units: float
    waiting: list[Considered | EntityState] = field(default_factory=list)  # in the cluster's order
    fair_share: float = 0.0
    starved: bool = False  # below deserved with jobs waiting
    borrowing_while_starved: list[str] = field(default_factory=list)  # starved queues while this one borrows

    @property
    def borrowing(self) -> float:
        """What it holds beyond its deserved quota (over-quota use, reclaimable by starved queues)."""
        if self.deserved is None:
            return round(self.allocated, 4)
        return round(max(self.allocated - self.deserved, 0.0), 4)

    @property
    def borrowing_limit(self) -> float | None:
        """Kueue: how much it may borrow beyond its nominal quota (None: no limit)."""
        if self.limit is None or self.deserved is None:
            return None
        return round(max(self.limit - self.deserved, 0.0), 4)

    @property
    def over_fair_share(self) -> bool:
        return self.allocated > self.fair_share + EPS

    @property
    def short(self) -> float:
        """How far below its deserved quota it is (0 when at or over it, or without quota)."""
        if self.deserved is None:
            return 0.0
        return round(max(self.deserved - self.allocated, 0.0), 4)


@dataclass
class Shares:
    """The cluster's division at t: its capacity, every queue and every department."""

    capacity: float
    queues: list[Standing]
    departments: list[Standing]

    @property
    def starved(self) -> list[Standing]:
        return [s for s in self.queues if s.starved]

    @property
    def borrowers(self) -> list[Standing]:
        return [s for s in self.queues if s.borrowing_while_starved]


def amount(value: Any) -> float | None:
    """A quota, limit or weight as the state records it: a finite number ≥ 0, else None (not set)."""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return None
    return n if math.isfinite(n) and n >= 0 else None


def leaf_queues(di: DiagnosisInput) -> list[EntityState]:
    """The queues jobs are charged to: KAI leaf queues and Kueue ClusterQueues (else the projects), not the
    parent queues a department is."""
    depts = {d.name for d in di.departments}
    parents = {q.get("parent") for q in di.queues}
    leaves = [q for q in di.queues if q.name not in depts and q.name not in parents]
    return sorted(leaves or di.projects, key=lambda q: q.name)


def department_of(di: DiagnosisInput) -> dict[str, str]:
    """queue or project name -> the department listing it."""
    out: dict[str, str] = {}
    for d in sorted(di.departments, key=lambda d: d.name):
        for m in [*(d.get("queues") or []), *(d.get("projects") or [])]:
            out.setdefault(m, d.name)
    return out


def shares(di: DiagnosisInput, cp: ClusterPass) -> Shares:
    """Every queue's and department's standing at t; ``cp`` is the cluster's pass (the waiting jobs' order and
    outcome). Call it inside ``di.indexed()`` on a large input."""
    dept_of = department_of(di)
    waiting: dict[str, list[EntityState]] = {}
    for j in di.jobs:
        if is_pending(j):
            waiting.setdefault(j.get("queue") or j.get("project") or "", []).append(j)
    order = {(c.job.namespace, c.job.name): c for c in cp.considered}
    queues: list[Standing] = []
    for q in leaf_queues(di):
        project = q.get("project") or (q.name if q.kind == "project" else "")
        jobs = waiting.get(q.name, []) + (waiting.get(project, []) if project and project != q.name else [])
        rows: list[Considered | EntityState] = sorted(
            (order.get((j.namespace, j.name), j) for j in jobs),
            key=lambda x: (0, x.order, "") if isinstance(x, Considered) else (1, 0, x.ref.label),
        )
        queues.append(
            Standing(
                kind="queue",
                name=q.name,
                department=dept_of.get(q.name) or dept_of.get(project) or q.get("department") or None,
                deserved=amount(q.get("quota_gpus")),
                limit=amount(q.get("limit_gpus")),
                weight=amount(q.get("over_quota_weight")) or 1.0,
                allocated=project_allocated(di, project, q.name),
                waiting_units=round(sum(job_request(di, j).units for j in jobs), 4),
                waiting=rows,
            )
        )
    departments = [
        Standing(
            kind="department",
            name=d.name,
            department=d.get("parent") or None,
            deserved=amount(d.get("quota_gpus")),
            limit=amount(d.get("limit_gpus")),
            weight=amount(d.get("over_quota_weight")) or 1.0,
            allocated=round(sum(s.allocated for s in queues if s.department == d.name), 4),
            waiting_units=round(sum(s.waiting_units for s in queues if s.department == d.name), 4),
        )
        for d in sorted(di.departments, key=lambda d: d.name)
    ]
    out = Shares(capacity(di), queues, departments)
    fill(out)
    judge(out, kueue=di.scheduler == "kueue")
    return out


def fill(s: Shares) -> None:
    """Fair shares in two divisions: the cluster among departments and lone queues, then each department's."""
    known = {d.name for d in s.departments}
    top = [d for d in s.departments] + [q for q in s.queues if q.department not in known]
    share = divide(s.capacity, [_claim(x) for x in top])
    for x in top:
        x.fair_share = share[x.name]
    for d in s.departments:
        members = [q for q in s.queues if q.department == d.name]
        inner = divide(d.fair_share, [_claim(q) for q in members])
        for q in members:
            q.fair_share = inner[q.name]


def _claim(s: Standing) -> Claim:
    return Claim(s.name, s.deserved, s.limit, s.weight, s.allocated + s.waiting_units)


def judge(s: Shares, *, kueue: bool) -> None:
    """Starved: below deserved with jobs waiting. A queue borrowing (over its deserved quota) while a queue it
    competes with starves is named with them: under Kueue only its cohort lends to it, under KAI the cluster."""
    for q in s.queues:
        q.starved = q.deserved is not None and q.waiting_units > EPS and q.allocated < q.deserved - EPS
    for q in s.queues:
        if q.borrowing <= EPS or q.deserved is None:
            continue
        q.borrowing_while_starved = [
            o.name
            for o in s.queues
            if o.starved
            and o is not q
            and (not kueue or (o.department is not None and o.department == q.department))
        ]


__all__ = ["Claim", "Shares", "amount", "Standing", "capacity", "department_of", "divide", "leaf_queues", "shares"]
