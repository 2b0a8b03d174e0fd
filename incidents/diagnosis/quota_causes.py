"""Quota as a cause of a wait: the job's project (or queue) quota and limit at t, and its department's, with the
change that cut them when one did. A quota that holds the job on its own stays its cause whatever the queue;
what would still hold the job once the limit is lifted (capacity, its turn) stays in the answer as a caveat
(``scheduling.policy_findings``).

``scheduling.check_job`` calls these with the fit it computed, so the quota, queue and request readings share
one fit table and one set of citations.
"""

from __future__ import annotations

from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis.citations import cite_change, cite_state
from incidents.diagnosis.department import DepartmentAt
from incidents.diagnosis.quota import QuotaAt, quota_at
from incidents.diagnosis.quota_resource_causes import resource_quota_findings
from incidents.diagnosis.request import Request
from incidents.diagnosis.totals import Totals
from incidents.diagnosis.types import (
    REFUTED,
    SUPPORTED,
    Cite,
    Derived,
    DiagnosisInput,
    EntityState,
    Finding,
    Ref,
    hhmm,
    iso,
)


#
# Quota
#
def quota_findings(
    di: DiagnosisInput,
    job: EntityState,
    req: Request,
    tot: Totals,
    base: list[Cite],
    said_cite: Cite | None,
    since: Any,
    dept_said_cite: Cite | None = None,
) -> list[Finding]:
    q = quota_at(di, job, req, tot.eligible_free)
    if q is None:
        return []
    if q.department is not None and q.department.blocks and not q.blocks and said_cite is not None:
        # Kueue's "insufficient unused quota" names no cohort: with the project within its quota and the
        # department at its limit, the scheduler's quota words are about the department.
        dept_said_cite, said_cite = dept_said_cite or said_cite, None
    dept = department_findings(di, job, req, q, base, dept_said_cite, since)
    out = [*_project_quota_findings(di, job, req, q, base, said_cite, since), *dept]
    if not any(f.supported for f in out):  # its GPUs pass every quota: its CPU or memory bound may not
        out += resource_quota_findings(di, job, q, base, said_cite or dept_said_cite, since)
    return out


def _project_quota_findings(
    di: DiagnosisInput,
    job: EntityState,
    req: Request,
    q: QuotaAt,
    base: list[Cite],
    said_cite: Cite | None,
    since: Any,
) -> list[Finding]:
    fact = quota_fact(di, q)
    cites: list[Cite] = [base[0], fact, cite_state(q.policy, di.t)] if q.policy else [base[0], fact]
    cut = _last_cut(q)
    cut_words = ""
    if cut is not None:
        who = f"{cut.actor} " if cut.actor else ""
        cut_words = f" since {hhmm(cut.time)}, when {who}changed {cut.field.rsplit('.', 1)[-1]} from {cut.old} to {cut.new}"
        cites.append(cite_change(cut))
    limit_words = f", limit {_n(q.limit)}" if q.limit is not None else ", no limit"
    head = (
        f"project {q.project} uses {_n(q.allocated)} of {_n(q.quota)} GPUs of quota{limit_words}{cut_words}"
    )
    ref = job.ref
    if q.blocks:
        return _project_quota_holds(di, job, req, q, cites, head, cut, said_cite, since)
    if q.resources is not None and q.resources.blocks:
        return []  # its GPUs are within quota, but its CPU or memory is not (``quota_resource_causes``)
    if said_cite is not None:
        # The scheduler says quota, the inventory says fine: say both, claim nothing.
        return [
            Finding(
                C.PROJECT_QUOTA_EXHAUSTED,
                f"The scheduler reports a quota problem, but at {hhmm(di.t)} {head} and {ref.label}'s {_n(q.requested)} "
                f"more GPUs are {q.reason}.",
                "unverified",
                0.4,
                supports=[said_cite],
                refutes=cites,
                subject=ref,
                sources=("k8s", di.scheduler),
                why="scheduler message and computed quota usage disagree",
                next_questions=[
                    "Does the scheduler count allocations rcaweb does not see (other node pools, reservations)?"
                ],
            )
        ]
    dept_words = ""
    if q.department is not None and q.department.blocks:
        dept_words = f"; its department {q.department.name} is what is at its limit"
    return [
        Finding(
            C.PROJECT_QUOTA_EXHAUSTED,
            f"Quota is not what holds {ref.label}: {head}, and its {_n(q.requested)} more GPUs are {q.reason}"
            f"{dept_words}.",
            REFUTED,
            0.85,
            refutes=cites,
            subject=ref,
            sources=("k8s", di.scheduler),
            why=f"{_n(q.after)} ≤ quota {_n(q.quota)}"
            if q.within_quota
            else f"over-quota is possible ({q.reason})",
        )
    ]


def _project_quota_holds(
    di: DiagnosisInput,
    job: EntityState,
    req: Request,
    q: QuotaAt,
    cites: list[Cite],
    head: str,
    cut: Any,
    said_cite: Cite | None,
    since: Any,
) -> list[Finding]:
    """The project's quota (or limit) refuses the job: the cause, with the quota cut that made it so."""
    ref = job.ref
    if q.over_limit:
        why = (
            f"{ref.label} needs {_n(q.requested)} more, {_n(q.after)} would exceed the limit of {_n(q.limit)}"
        )
    elif not q.preemptible:
        why = f"{ref.label} is non-preemptible and needs {_n(q.requested)} more, {_n(q.after)} would exceed the quota"
    else:  # pragma: no cover - QuotaAt.blocks implies one of the two above
        why = f"{ref.label} needs {_n(q.requested)} more, {_n(q.after)} would exceed the quota"
    conf = 0.9
    if said_cite is not None:
        cites.append(said_cite)
        conf = min(conf + 0.05, 0.95)
    return [
        Finding(
            C.PROJECT_QUOTA_EXHAUSTED,
            f"{head}; {why}.",
            SUPPORTED,
            conf,
            supports=cites,
            subject=ref,
            sources=("k8s", di.scheduler),
            since=cut.time if cut else since,
            facts={
                "project": q.project,
                "queue": q.queue,
                "quota": q.quota,
                "limit": q.limit,
                "allocated": q.allocated,
                "requested": q.requested,
                "per_pod": req.gpus_per_pod,
                "job": ref,
                "cut": {"old": cut.old, "new": cut.new, "actor": cut.actor, "field": cut.field}
                if cut
                else None,
                # what reverting the cut sets back: every quota field changed at the cut's moment (None: unlimited)
                "reverted": {
                    c.field.rsplit(".", 1)[-1]: c.old
                    for c in q.changes
                    if cut
                    and c.time == cut.time
                    and c.field.rsplit(".", 1)[-1] in ("quota_gpus", "limit_gpus")
                },
                "preemptible": q.preemptible,
            },
            next_questions=[
                f"Can project {q.project} borrow unused quota, or should its quota be raised?",
                *([f"Was the quota change by {cut.actor} at {hhmm(cut.time)} intended?"] if cut else []),
            ],
        )
    ]


def _n(x: float | None) -> str:
    return "∞" if x is None else f"{x:g}"


def department_findings(
    di: DiagnosisInput,
    job: EntityState,
    req: Request,
    q: QuotaAt,
    base: list[Cite],
    said_cite: Cite | None,
    since: Any,
) -> list[Finding]:
    """The project is within its own quota, but its department (KAI parent queue, Kueue cohort) is at its limit."""
    d = q.department
    if d is None:
        return []
    ref = job.ref
    fact = Derived(
        kind="department_usage",
        locator=f"inventory department {d.name} quota and its projects' GPU use as of {iso(di.t)}",
        content=d.to_dict(),
        summary=f"department {d.name}: {_n(d.allocated)} of quota {_n(d.quota)}, limit {_n(d.limit)} GPUs in use",
        observed_at=di.t,
        entity=Ref("department", d.name),
    )
    cites: list[Cite] = [base[0], fact]
    if d.state is not None:
        cites.append(cite_state(d.state, di.t))
    siblings = sorted(
        ((p, u) for p, u in d.projects.items() if p != q.project), key=lambda pu: (-pu[1], pu[0])
    )
    sib_words = ", ".join(
        f"{p} {u:g} GPU(s)"
        + (f" (quota {_n(d.project_quotas.get(p))})" if d.project_quotas.get(p) is not None else "")
        for p, u in siblings
    )
    mine = d.projects.get(q.project, q.allocated)
    head = (
        f"department {d.name} uses {_n(d.allocated)} of its {_n(d.quota)} GPUs of quota, limit {_n(d.limit)}: "
        f"{q.project} {mine:g}" + (f", {sib_words}" if sib_words else "")
    )
    if not d.blocks:
        if q.resources is not None and q.resources.blocks:
            return []  # its CPU or memory bound holds the job: the GPUs' standing proves nothing about it
        return [
            Finding(
                C.DEPARTMENT_QUOTA_EXHAUSTED,
                f"Department {d.name} is not what holds {ref.label}: {head}; {_n(d.requested)} more stay within "
                f"{'its limit' if d.limit is not None else 'it (no limit)'}.",
                REFUTED,
                0.8,
                refutes=cites,
                subject=ref,
                sources=("k8s", di.scheduler),
                why=f"{_n(d.after)} ≤ the department's limit {_n(d.limit)}",
            )
        ]
    return [_department_holds(di, job, q, d, cites, head, siblings, said_cite, since)]


# length: one finding read top to bottom (what exceeds what, the project's own standing, the cut, facts)
def _department_holds(
    di: DiagnosisInput,
    job: EntityState,
    q: QuotaAt,
    d: DepartmentAt,
    cites: list[Cite],
    head: str,
    siblings: list[tuple[str, float]],
    said_cite: Cite | None,
    since: Any,
) -> Finding:
    """The department's quota or limit refuses the job: a cause when the project itself may have the GPUs."""
    ref = job.ref
    cut = d.changes[-1] if d.changes else None
    if d.over_limit:
        what = f"{_n(d.after)} would exceed the department's limit of {_n(d.limit)}"
    else:
        what = f"{ref.label} is non-preemptible and {_n(d.after)} would exceed the department's quota of {_n(d.quota)}"
    within = q.within_quota or (not q.blocks)
    conf = 0.9 if within else 0.5
    if said_cite is not None:
        cites.append(said_cite)
        conf = min(conf + 0.05, 0.95)
    if cut is not None:
        cites.append(cite_change(cut))
    cut_words = ""
    if cut is not None:
        cut_words = (
            f" (since {hhmm(cut.time)}, when {cut.actor or 'someone'} changed it from {cut.old} to {cut.new})"
        )
    if q.within_quota:
        own = f"project {q.project} is within its own quota ({_n(q.allocated)} of {_n(q.quota)})"
    elif within:
        own = (
            f"project {q.project} may borrow past its own quota of {_n(q.quota)} (it holds {_n(q.allocated)}, "
            f"limit {q.limit if q.limit is not None else 'none'})"
        )
    else:
        own = f"project {q.project} is over its own quota as well"
    borrowing: list[dict[str, Any]] = [
        {"project": p, "allocated": u, "quota": d.project_quotas.get(p)}
        for p, u in siblings
        if d.project_quotas.get(p) is not None and u > (d.project_quotas.get(p) or 0) + 1e-9
    ]
    return Finding(
        C.DEPARTMENT_QUOTA_EXHAUSTED,
        f"{own}, but {head}{cut_words}; {ref.label} needs {_n(d.requested)} more and {what}.",
        SUPPORTED,
        conf,
        supports=cites,
        subject=ref,
        sources=("k8s", di.scheduler),
        since=cut.time if cut else since,
        explains=(
            C.PROJECT_QUOTA_EXHAUSTED,
            C.GPU_CAPACITY_SHORTAGE,
            C.GPU_FRAGMENTATION,
            C.QUEUE_PRIORITY,
        )
        if within
        else (),
        facts={
            "job": ref,
            "department": d.name,
            "scheduler": d.scheduler,
            "quota": d.quota,
            "limit": d.limit,
            "allocated": d.allocated,
            "requested": d.requested,
            "project": q.project,
            "projects": dict(d.projects),
            "project_quotas": dict(d.project_quotas),
            "borrowing": borrowing,
        },
        next_questions=[
            f"Should department {d.name}'s limit be raised, or its projects' use rebalanced?",
            *(
                [
                    f"Can {', '.join(b['project'] for b in borrowing)} give back what they use over their quota?"
                ]
                if borrowing
                else []
            ),
        ],
    )


def quota_fact(di: DiagnosisInput, q: QuotaAt) -> Derived:
    return Derived(
        kind="quota_usage",
        locator=f"inventory quota of project {q.project} (queue {q.queue}) and GPUs of its bound pods as of {iso(di.t)}",
        content=q.to_dict(),
        summary=f"project {q.project}: {_n(q.allocated)} allocated of quota {_n(q.quota)}, "
        f"{f'limit {_n(q.limit)}' if q.limit is not None else 'no limit'}; "
        f"job needs {_n(q.requested)} ({q.reason})",
        observed_at=di.t,
    )


def _last_cut(q: QuotaAt) -> Any:
    """The latest change that lowered the quota or limit before t."""
    for c in reversed(q.changes):
        try:
            if (
                c.field.rsplit(".", 1)[-1] in ("quota_gpus", "limit_gpus")
                and c.old is not None
                and (c.new is None or float(c.new) < float(c.old) or float(c.new) < 0 <= float(c.old))
            ):
                return c
        except (TypeError, ValueError):
            continue
    return None
