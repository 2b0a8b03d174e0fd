"""A project's quota, limit and allocation at t, and the jobs ahead of a job in its queue.

Allocation is computed from the pods bound at t (what the scheduler charges
against the queue), not read from a status counter, so it is as-of-t exact and
citable as one computed fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from incidents.diagnosis.fit import ACTIVE_POD_PHASES, Request
from incidents.diagnosis.types import ChangeRec, DiagnosisInput, EntityState, parse_ts

QUOTA_FIELDS = ("quota_gpus", "limit_gpus", "over_quota_weight", "priority")


@dataclass
class QuotaAt:
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

    @property
    def holds(self) -> bool:
        """The project's own quota or its department's keeps the job from running, whatever the free capacity."""
        return self.blocks or (self.department is not None and self.department.blocks)

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

    @property
    def display(self) -> dict[str, str]:
        """The numbers as the pages write them: 3.5, 4 (not 4.0), ∞ for no quota or limit."""
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


@dataclass
class DepartmentAt:
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

    @property
    def display(self) -> dict[str, str]:
        """The numbers as the pages write them: 3.5, 16 (not 16.0), ∞ for no quota or limit."""
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


def _num(value: Any) -> float | None:
    try:
        n = float(value)
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def units_held(di: DiagnosisInput, project: str, queue: str = "", *, preemptible: bool = False) -> float:
    """GPU units (fractions and MIG counted as the scheduler charges them) held at t by the project's bound pods
    (``preemptible``: those of its preemptible jobs only)."""
    total = 0.0
    for p in di.pods:
        if not p.get("node") or p.get("phase") not in ACTIVE_POD_PHASES:
            continue
        if (project and p.get("project") == project) or (queue and p.get("queue") == queue):
            if preemptible and not pod_preemptible(di, p):
                continue
            total += pod_units(p)
    return round(total, 4)


def pod_preemptible(di: DiagnosisInput, p: EntityState) -> bool:
    """Whether a pod's job may be evicted: its job's ``preemptible`` when recorded, else its priority class (KAI
    preempts train work, not inference or build)."""
    job = di.find("job", p.get("job") or "", p.namespace) if p.get("job") else None
    if job is not None and job.get("preemptible") is not None:
        return bool(job.get("preemptible"))
    return (p.get("priority_class") or "train") not in ("inference", "build")


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
        quotas[m] = _num(q.get("quota_gpus")) if q is not None else None
    requested = req.units
    changes = [
        c
        for c in di.changes
        if c.entity is not None
        and c.entity.kind == "department"
        and c.entity.name == dept.name
        and _field_leaf(c.field) in QUOTA_FIELDS + ("quota", "limit")
        and c.time <= di.t
    ]
    return DepartmentAt(
        name=dept.name,
        scheduler=dept.get("scheduler") or di.scheduler,
        quota=_num(dept.get("quota_gpus")),
        limit=_num(dept.get("limit_gpus")),
        allocated=round(sum(projects.values()), 4),
        requested=round(requested, 4),
        preemptible=req.preemptible,
        projects=projects,
        project_quotas=quotas,
        state=dept,
        changes=sorted(changes, key=lambda c: c.time),
        preemptible_held=round(preemptible, 4) if (dept.get("scheduler") or di.scheduler) == "kai" else None,
    )


def policy_of(di: DiagnosisInput, job: EntityState) -> EntityState | None:
    """The queue the job is charged to (KAI Queue / Kueue ClusterQueue), else its project."""
    queue = job.get("queue") or ""
    project = job.get("project") or ""
    for name in (queue, project):
        if not name:
            continue
        found = di.find("queue", name) or None
        if found is not None:
            return found
    for q in di.queues:
        if project and q.get("project") == project:
            return q
    return di.find("project", project) if project else None


def project_allocated(di: DiagnosisInput, project: str, queue: str) -> float:
    """GPU units held at t by bound, unfinished pods of the project (or queue): fractions and MIG instances
    as the scheduler charges them (``gpu_units``), whole GPUs for pods recorded without it."""
    held = di.memo("gpus_held_by_project_queue", lambda: _held(di))
    if held is not None:  # indexed (run_checks): sum per (project, queue) once, not a fleet scan per queue
        return round(
            sum(n for (p, q), n in held.items() if (project and p == project) or (queue and q == queue)), 4
        )
    return units_held(di, project, queue)


def pod_units(p: EntityState) -> float:
    units = p.get("gpu_units")
    return float(units) if units is not None else float(p.get("gpus") or 0)


def _held(di: DiagnosisInput) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for p in di.pods:
        if not p.get("node") or p.get("phase") not in ACTIVE_POD_PHASES:
            continue
        key = (p.get("project"), p.get("queue"))
        out[key] = out.get(key, 0.0) + pod_units(p)
    return out


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
    return QuotaAt(
        project=project,
        queue=queue,
        quota=_num(quota),
        limit=_num(limit),
        allocated=project_allocated(di, project, queue),
        requested=req.units,
        preemptible=req.preemptible,
        free_for_borrowing=free_for_borrowing,
        policy=policy,
        changes=sorted(changes, key=lambda c: c.time),
        department=department_at(di, job, req, policy),
        preemptible_held=units_held(di, project, queue, preemptible=True)
        if (st.get("scheduler") or di.scheduler) == "kai" and not req.preemptible
        else None,
    )


def _quota_changes(di: DiagnosisInput) -> list[ChangeRec]:
    """Quota, limit, weight and priority changes of queues and projects up to t."""
    return [
        c
        for c in di.changes
        if c.entity is not None
        and c.entity.kind in ("queue", "project")
        and _field_leaf(c.field) in QUOTA_FIELDS
        and c.time <= di.t
    ]


def _field_leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1]


@dataclass
class QueuedJob:
    """A pending job the scheduler considers before this one."""

    job: EntityState
    queue: str
    queue_priority: int
    priority_class: str
    submitted: str
    gpus: float  # GPU units (a 0.5 share is 0.5)
    why: str  # "higher queue priority" | "same queue, submitted earlier" | "higher priority class"

    @property
    def gpus_words(self) -> str:
        return f"{round(self.gpus, 4):g}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.job.namespace,
            "name": self.job.name,
            "queue": self.queue,
            "queue_priority": self.queue_priority,
            "priority_class": self.priority_class,
            "submitted": self.submitted,
            "gpus": self.gpus,
            "why": self.why,
        }


CLASS_RANK = {"inference": 1, "train": 0}
# The PriorityClass values KAI installs for its classes (a job of another class counts as train).
CLASS_VALUE = {"inference": 125, "build": 100, "interactive-preemptible": 75, "train": 50}


def job_rank(job: EntityState) -> int:
    """A job's priority as the scheduler compares it: its PriorityClass value when the inventory records one
    (``priority_value``), else the value of its class (inference over build over train)."""
    value = job.get("priority_value")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return CLASS_VALUE.get(job.get("priority_class") or "train", CLASS_VALUE["train"])


def job_units(job: EntityState) -> float:
    """A job's GPUs as its queue counts them: shares and MIG in units, whole GPUs for jobs recorded without."""
    units = job.get("gpu_units")
    if units is not None:
        return round(float(units), 4)
    return float(job.get("gpus_total") or job.get("gpus") or 0)


def queue_priority_of(di: DiagnosisInput, name: str) -> int:
    q = di.find("queue", name) or di.find("project", name)
    try:
        return int((q.get("priority") if q else 0) or 0)
    except (TypeError, ValueError):
        return 0


def is_pending(job: EntityState) -> bool:
    return job.get("phase") in ("Pending", "Suspended") or (
        job.get("phase") is None and not job.get("active")
    )


def order_key(di: DiagnosisInput, job: EntityState) -> tuple[int, int, str]:
    """Where a waiting job stands in the cluster's order: queue priority, then priority class, then submission
    (between queues of equal priority the scheduler weighs fair share; submission stands in for it here)."""
    queue = job.get("queue") or job.get("project") or ""
    return (
        -queue_priority_of(di, queue),
        -job_rank(job),
        job.get("submitted") or "",
    )


def jobs_ahead(di: DiagnosisInput, job: EntityState) -> list[QueuedJob]:
    """Pending jobs the scheduler serves first: higher queue priority, then priority class, then FIFO."""
    mine_q = job.get("queue") or job.get("project") or ""
    my_key = (queue_priority_of(di, mine_q), CLASS_RANK.get(job.get("priority_class") or "train", 0))
    my_submit = job.get("submitted") or ""
    out = []
    for other in di.jobs:
        if (
            other is job
            or (other.name == job.name and other.namespace == job.namespace)
            or not is_pending(other)
        ):
            continue
        q = other.get("queue") or other.get("project") or ""
        key = (queue_priority_of(di, q), CLASS_RANK.get(other.get("priority_class") or "train", 0))
        submitted = other.get("submitted") or ""
        if key[0] > my_key[0]:
            why = "higher queue priority"
        elif key[0] == my_key[0] and key[1] > my_key[1]:
            why = "higher priority class"
        elif key == my_key and q == mine_q and submitted and my_submit and submitted < my_submit:
            why = "same queue, submitted earlier"
        else:
            continue
        out.append(
            QueuedJob(
                other,
                q,
                key[0],
                other.get("priority_class") or "",
                submitted,
                job_units(other),
                why,
            )
        )
    out.sort(key=lambda j: (-j.queue_priority, -CLASS_RANK.get(j.priority_class, 0), j.submitted))
    return out


def request_history(di: DiagnosisInput, job: EntityState) -> list[dict[str, Any]]:
    """Each distinct request the job had (pods × GPUs per pod), oldest first, with who changed it."""
    versions = di.history.get(job.ref) or [job]
    out: list[dict[str, Any]] = []
    for v in versions:
        st = v.state
        pods = int(st.get("pods") or 1)
        per = st.get("gpus_per_pod")
        total = int(st.get("gpus_total") or st.get("gpus") or (pods * int(per or 0)))
        per = int(per) if per is not None else (total // pods if pods else total)
        if out and (out[-1]["pods"], out[-1]["gpus_per_pod"]) == (pods, per):
            continue
        actor = ""
        for c in di.changes:
            if c.entity == job.ref and v.valid_from and c.time == v.valid_from and c.actor:
                actor = c.actor
                break
        out.append(
            {
                "from": v.valid_from,
                "pods": pods,
                "gpus_per_pod": per,
                "gpus_total": total,
                "actor": actor,
                "image": st.get("image"),
            }
        )
    return out


def first_pending_since(di: DiagnosisInput, job: EntityState) -> datetime | None:
    """When the job's current pending spell began, from its history."""
    since = None
    for v in reversed(di.history.get(job.ref) or [job]):
        if is_pending(v):
            since = v.valid_from
        else:
            break
    return since


def precedes(di: DiagnosisInput, other: EntityState, job: EntityState) -> bool:
    """Whether the scheduler serves ``other``'s queue/priority class before ``job``'s."""
    return precedence(di, other, job) is not None


def precedence(di: DiagnosisInput, other: EntityState, job: EntityState) -> str | None:
    """By which mechanism the scheduler serves ``other`` before ``job`` (None when it does not).

    Queue priority first (KAI Queue spec.priority), then the priority class (inference before train):
    the wording names the one that applies, never "higher-priority queue" between queues of equal priority.
    """
    mine_q = job.get("queue") or job.get("project") or ""
    their_q = other.get("queue") or other.get("project") or ""
    mine_p, their_p = queue_priority_of(di, mine_q), queue_priority_of(di, their_q)
    if their_p != mine_p:
        return f"queue priority {their_p} > {mine_p}" if their_p > mine_p else None
    mine_c = job.get("priority_class") or "train"
    their_c = other.get("priority_class") or "train"
    if CLASS_RANK.get(their_c, 0) > CLASS_RANK.get(mine_c, 0):
        return f"priority class {their_c} over {mine_c}"
    return None


def overtaking_pods(di: DiagnosisInput, job: EntityState, since: datetime | None) -> list[EntityState]:
    """Pods of jobs with precedence that started after ``job`` began waiting and hold GPUs at t."""
    if since is None:
        return []
    out = []
    for p in di.pods:
        if not p.get("node") or p.get("phase") not in ACTIVE_POD_PHASES or not p.get("gpus"):
            continue
        if p.get("job") == job.name and p.namespace == job.namespace:
            continue
        started = parse_ts(p.get("started")) or parse_ts(p.get("created")) or p.valid_from
        if started is None or started <= since:
            continue
        owner = di.find("job", p.get("job") or "", p.namespace)
        if owner is not None and precedes(di, owner, job):
            out.append(p)
    return out
