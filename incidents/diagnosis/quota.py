"""A project's quota, limit and allocation at t, and what they mean for a job's request.

Allocation is computed from the pods bound at t (what the scheduler charges
against the queue), not read from a status counter, so it is as-of-t exact and
citable as one computed fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from incidents.diagnosis.allocation import project_allocated, units_held
from incidents.diagnosis.department import DepartmentAt, Written, department_at
from incidents.diagnosis.kueue_quota import quotas_of, usage_of
from incidents.diagnosis.policy import QUOTA_FIELDS, field_leaf, policy_of, quota_number
from incidents.diagnosis.request import Request
from incidents.diagnosis.resource_quota import ResourceQuota, resource_quota
from incidents.diagnosis.types import ChangeRec, DiagnosisInput, EntityState


@dataclass
class QuotaAt(Written):
    """Quota/limit/allocation of a job's project at t, and what it means for the job's request."""

    project: str
    queue: str
    quota: float | None
    limit: float | None
    allocated: float  # GPU units held: a 0.5 share counts 0.5, a MIG instance its "<n>g"
    requested: float  # GPU units the job still needs, counted the same way
    preemptible: bool
    free_for_borrowing: int  # unused GPUs over-quota could use
    policy: EntityState | None = None  # the queue (or project) state it was read from
    changes: list[ChangeRec] = field(default_factory=list)  # quota/limit changes before t, oldest first
    department: DepartmentAt | None = None  # the department above the project, when it has one
    # KAI: GPU units its preemptible jobs hold, which a non-preemptible job's quota check leaves out (it must fit
    # the quota with the non-preemptible work only); None where the scheduler counts everything (Kueue)
    preemptible_held: float | None = None
    # KAI: the job's CPU and memory against its queue's and department's CPU and memory quota and limit (None
    # when neither sets one)
    resources: ResourceQuota | None = None

    @property
    def holds(self) -> bool:
        """The project's own quota or its department's keeps the job from running, whatever the free capacity:
        its GPUs, or its CPU or memory (``resources``)."""
        return (
            self.blocks
            or (self.department is not None and self.department.blocks)
            or (self.resources is not None and self.resources.blocks)
        )

    @property
    def after(self) -> float:
        return round(self.allocated + self.requested, 4)

    @property
    def within_quota(self) -> bool:
        return self.quota is None or self.after <= self.quota + 1e-9

    @property
    def over_limit(self) -> bool:
        return self.limit is not None and self.after > self.limit + 1e-9

    @property
    def over_quota_possible(self) -> bool:
        """Whether the scheduler may run this job over its quota at all (preemptible and within the limit)."""
        return self.preemptible and not self.over_limit

    @property
    def blocks(self) -> bool:
        """True when the quota policy alone keeps the job from running, whatever the free capacity.

        Over quota but preemptible and within the limit is not a quota block: the job may borrow
        unused GPUs, so what it waits for then is capacity (or its turn), not policy.
        """
        if self.within_quota:
            return False
        return self.over_limit or self.non_preemptible_over

    @property
    def non_preemptible_over(self) -> bool:
        """A non-preemptible job past the quota: KAI counts the queue's non-preemptible work only against it
        (preemptible work over quota can be reclaimed to make room)."""
        if self.preemptible or self.quota is None:
            return False
        return self.non_preemptible_held + self.requested > self.quota + 1e-9

    @property
    def non_preemptible_held(self) -> float:
        return max(self.allocated - (self.preemptible_held or 0.0), 0.0)

    @property
    def reason(self) -> str:
        if self.within_quota:
            return "within quota"
        if self.over_limit:
            return "over limit"
        if self.non_preemptible_over:
            return "non-preemptible over quota"
        if self.free_for_borrowing < self.requested:
            return "over quota, nothing to borrow"
        return "over quota, borrowing possible"

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "queue": self.queue,
            "quota": self.quota,
            "limit": self.limit,
            "allocated": self.allocated,
            "requested": self.requested,
            "after": self.after,
            "preemptible": self.preemptible,
            "free_for_borrowing": self.free_for_borrowing,
            "within_quota": self.within_quota,
            "over_limit": self.over_limit,
            "over_quota_possible": self.over_quota_possible,
            "blocks": self.blocks,
            "reason": self.reason,
        }


def quota_at(di: DiagnosisInput, job: EntityState, req: Request, free_for_borrowing: int) -> QuotaAt | None:
    policy = policy_of(di, job)
    if policy is None:
        return None
    st = policy.state
    quota = st.get("quota_gpus")
    limit = st.get("limit_gpus")
    project = job.get("project") or st.get("project") or policy.name
    queue = job.get("queue") or (policy.name if policy.kind == "queue" else st.get("queue", ""))
    # the cluster's quota changes read once per indexed block (a pass asks for every waiting job's)
    every = di.memo("quota_changes", lambda: _quota_changes(di))
    changes = [
        c
        for c in (_quota_changes(di) if every is None else every)
        if c.entity is not None and c.entity.name in (project, queue)
    ]
    department = department_at(di, job, req, policy)
    kai = (st.get("scheduler") or di.scheduler) == "kai"
    lends = None if kai else kueue_lends(di, job, queue)
    if (
        lends is not None
    ):  # Kueue: over its nominal quota it borrows what its cohort leaves unused, not free GPUs
        free_for_borrowing = min(free_for_borrowing, int(lends + 1e-9))
    return QuotaAt(
        project=project,
        queue=queue,
        quota=quota_number(quota),
        limit=quota_number(limit),
        allocated=project_allocated(di, project, queue),
        requested=req.units,
        preemptible=req.preemptible,
        free_for_borrowing=free_for_borrowing,
        policy=policy,
        changes=sorted(changes, key=lambda c: c.time),
        department=department,
        preemptible_held=units_held(di, project, queue, preemptible=True)
        if kai and not req.preemptible
        else None,
        resources=resource_quota(di, req, project, queue, policy, department.state if department else None)
        if kai
        else None,
    )


def kueue_lends(di: DiagnosisInput, job: EntityState, queue: str) -> float | None:
    """Kueue: the GPU units the job's ClusterQueue may borrow at t beyond its own unused nominal quota (what its
    cohort leaves unused, within its borrowing limit; 0 outside a cohort); None on another scheduler or for a
    queue that is no ClusterQueue. Read once per indexed block."""
    if di.scheduler != "kueue":
        return None
    quotas = quotas_of(di)
    cq = quotas.cqs.get(queue)
    flavor = quotas.flavor_of(job, queue)
    fq = cq.quota(flavor) if cq is not None and flavor is not None else None
    if cq is None or fq is None:
        return None
    usage = usage_of(di)
    own = max(fq.nominal - usage.get((queue, fq.flavor), 0.0), 0.0)
    return max(quotas.available(cq, fq, usage) - own, 0.0)


def _quota_changes(di: DiagnosisInput) -> list[ChangeRec]:
    """Quota, limit, weight and priority changes of queues and projects up to t."""
    return [
        c
        for c in di.changes
        if c.entity is not None
        and c.entity.kind in ("queue", "project")
        and field_leaf(c.field) in QUOTA_FIELDS
        and c.time <= di.t
    ]
