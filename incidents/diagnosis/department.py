"""The department above a job's project at t (KAI parent Queue, Kueue Cohort): its quota, limit and use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from incidents.diagnosis.allocation import units_held
from incidents.diagnosis.policy import QUOTA_FIELDS, field_leaf, quota_number
from incidents.diagnosis.request import Request
from incidents.diagnosis.types import ChangeRec, DiagnosisInput, EntityState


class _Quantities(Protocol):
    """What a quota's page numbers are read from (a project's ``QuotaAt``, a department's ``DepartmentAt``)."""

    @property
    def allocated(self) -> float: ...
    @property
    def requested(self) -> float: ...
    @property
    def after(self) -> float: ...
    @property
    def quota(self) -> float | None: ...
    @property
    def limit(self) -> float | None: ...


class Written:
    """A quota's numbers as the pages write them (``display``): one rule for a project's and a department's."""

    @property
    def display(self: _Quantities) -> dict[str, str]:
        """3.5, 16 (not 16.0), ∞ for no quota or limit."""
        return {
            k: "∞" if v is None else f"{round(float(v), 4):g}"
            for k, v in (
                ("allocated", self.allocated),
                ("requested", self.requested),
                ("after", self.after),
                ("quota", self.quota),
                ("limit", self.limit),
            )
        }


@dataclass
class DepartmentAt(Written):
    """The department above a job's project at t (KAI parent Queue, Kueue Cohort): its quota, limit and use.

    ``allocated`` counts what the scheduler charges: the GPU units (fractions, MIG "<n>g") of the bound pods of
    every project of the department, computed from the pods at t; ``siblings`` has each project's share of it.
    """

    name: str
    scheduler: str
    quota: float | None
    limit: float | None
    allocated: float
    requested: float
    preemptible: bool
    projects: dict[str, float]  # project -> GPU units held at t
    project_quotas: dict[str, float | None]
    state: EntityState | None = None
    changes: list[ChangeRec] = field(default_factory=list)
    preemptible_held: float | None = None  # KAI: GPU units the department's preemptible jobs hold

    @property
    def after(self) -> float:
        return round(self.allocated + self.requested, 4)

    @property
    def over_limit(self) -> bool:
        return self.limit is not None and self.after > self.limit + 1e-9

    @property
    def over_quota(self) -> bool:
        return self.quota is not None and self.after > self.quota + 1e-9

    @property
    def blocks(self) -> bool:
        """KAI checks each queue up the hierarchy: the department's limit, and its quota for non-preemptible work;
        Kueue admits within the cohort's nominal quota plus its borrowing limit."""
        return self.over_limit or (self.scheduler == "kai" and self.non_preemptible_over)

    @property
    def non_preemptible_over(self) -> bool:
        """KAI: a non-preemptible job past the department's quota, its non-preemptible work only counted."""
        if self.preemptible or self.quota is None:
            return False
        return self.non_preemptible_held + self.requested > self.quota + 1e-9

    @property
    def non_preemptible_held(self) -> float:
        return max(self.allocated - (self.preemptible_held or 0.0), 0.0)

    @property
    def projects_words(self) -> str:
        """ "nlp 16 (quota 4), speech 0 (quota 12)": each project's use with its own quota."""
        return ", ".join(
            f"{p} {round(u, 4):g}"
            + (f" (quota {self.project_quotas[p]:g})" if self.project_quotas.get(p) is not None else "")
            for p, u in self.projects.items()
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "department": self.name,
            "quota": self.quota,
            "limit": self.limit,
            "allocated": self.allocated,
            "requested": self.requested,
            "after": self.after,
            "projects": dict(self.projects),
            "project_quotas": dict(self.project_quotas),
            "blocks": self.blocks,
        }


def department_at(
    di: DiagnosisInput, job: EntityState, req: Request, policy: EntityState | None
) -> DepartmentAt | None:
    """The job's department at t, from the department its queue/project names (or the one listing them)."""
    project = job.get("project") or ""
    queue = job.get("queue") or ""
    name = (policy.get("department") if policy is not None else None) or ""
    if not name:
        proj = di.find("project", project) if project else None
        name = (proj.get("department") if proj is not None else None) or ""
    dept = di.find("department", name) if name else None
    if dept is None:
        for d in di.departments:
            if project in (d.get("projects") or []) or queue in (d.get("queues") or []):
                dept = d
                break
    if dept is None:
        return None
    members = list(dict.fromkeys([*(dept.get("projects") or []), *(dept.get("queues") or [])]))
    projects: dict[str, float] = {}
    quotas: dict[str, float | None] = {}
    preemptible = 0.0
    for m in dict.fromkeys(dept.get("projects") or members):
        q = di.find("queue", m) or di.find("project", m)
        projects[m] = units_held(di, m, m)
        preemptible += units_held(di, m, m, preemptible=True)
        quotas[m] = quota_number(q.get("quota_gpus")) if q is not None else None
    requested = req.units
    changes = [
        c
        for c in di.changes
        if c.entity is not None
        and c.entity.kind == "department"
        and c.entity.name == dept.name
        and field_leaf(c.field) in QUOTA_FIELDS + ("quota", "limit")
        and c.time <= di.t
    ]
    return DepartmentAt(
        name=dept.name,
        scheduler=dept.get("scheduler") or di.scheduler,
        quota=quota_number(dept.get("quota_gpus")),
        limit=quota_number(dept.get("limit_gpus")),
        allocated=round(sum(projects.values()), 4),
        requested=round(requested, 4),
        preemptible=req.preemptible,
        projects=projects,
        project_quotas=quotas,
        state=dept,
        changes=sorted(changes, key=lambda c: c.time),
        preemptible_held=round(preemptible, 4) if (dept.get("scheduler") or di.scheduler) == "kai" else None,
    )
