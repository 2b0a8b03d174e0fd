"""Why a GPU job waits, on the policy side: quota/limit at t, queue order and overtaking, request history.

Split from ``scheduling`` (the per-node fit side); ``scheduling.check_job`` calls these with the fit it
computed, so the quota, queue and request readings share one fit table and one set of citations.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.queue_order import ahead_of, order_words
from incidents.diagnosis.quota import (
    DepartmentAt,
    QueuedJob,
    QuotaAt,
    overtaking_pods,
    precedence,
    quota_at,
    request_history,
)
from incidents.diagnosis.types import (
    REFUTED,
    SUPPORTED,
    Cite,
    Derived,
    DiagnosisInput,
    EntityState,
    Finding,
    Ref,
    cite_change,
    cite_state,
    hhmm,
    iso,
)

logger = logging.getLogger(__name__)


#
# Quota
#
def quota_findings(
    di: DiagnosisInput,
    job: EntityState,
    req: F.Request,
    tot: F.Totals,
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
    return [*_project_quota_findings(di, job, req, q, base, said_cite, since), *dept]


def _project_quota_findings(
    di: DiagnosisInput,
    job: EntityState,
    req: F.Request,
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
    req: F.Request,
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
    req: F.Request,
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


#
# Queue order
#
def queue_findings(
    di: DiagnosisInput,
    job: EntityState,
    req: F.Request,
    rows: list[F.NodeFit],
    tot: F.Totals,
    base: list[Cite],
    fits_now: bool,
    since: Any,
) -> list[Finding]:
    ahead = ahead_of(di, job)
    ref = job.ref
    ahead_cite = Derived(
        kind="queue_order",
        locator=f"inventory pending jobs ordered before {ref.label} ({order_words(di.scheduler)}) "
        f"as of {iso(di.t)}",
        content={"job": ref.label, "ahead": [a.to_dict() for a in ahead]},
        summary=f"{len(ahead)} pending job(s) ahead of {ref.label} at {hhmm(di.t)}",
        observed_at=di.t,
        entity=ref,
    )
    if not fits_now:
        overtaken = overtaking_findings(di, job, req, rows, base, since)
        if overtaken:
            return overtaken
    return ahead_findings(di, job, req, tot, base, fits_now, since, ahead, ahead_cite)


def overtaking_findings(
    di: DiagnosisInput, job: EntityState, req: F.Request, rows: list[F.NodeFit], base: list[Cite], since: Any
) -> list[Finding]:
    """Later jobs served first (by precedence) hold the GPUs the waiting job would fit on without them."""
    ref = job.ref
    overtook = overtaking_pods(di, job, since)
    if not overtook:
        return []
    freed: dict[str, int] = {}
    for p in overtook:
        freed[p.get("node")] = freed.get(p.get("node"), 0) + int(p.get("gpus") or 0)
    without = [replace(r, allocated=max(r.allocated - freed.get(r.node, 0), 0)) for r in rows]
    if not F.fits(without, req):
        return []
    held = sum(freed.values())
    owners = sorted({f"{p.namespace}/{p.get('job')}" for p in overtook})
    queues = sorted({p.get("queue") or p.get("project") or "?" for p in overtook})
    mechanisms = sorted(
        {
            m
            for p in overtook
            if (owner := di.find("job", p.get("job") or "", p.namespace)) is not None
            and (m := precedence(di, owner, job))
        }
    )
    by = "; ".join(mechanisms) or "scheduler precedence"
    overtake_cite = Derived(
        kind="queue_overtaking",
        locator=f"inventory pods with precedence over {ref.label} started after {iso(since)}, as of {iso(di.t)}",
        content={
            "job": ref.label,
            "pending_since": iso(since),
            "freed_per_node": freed,
            "pods": [
                {
                    "pod": p.ref.label,
                    "job": p.get("job"),
                    "queue": p.get("queue"),
                    "gpus": p.get("gpus"),
                    "node": p.get("node"),
                    "started": p.get("started"),
                }
                for p in overtook
            ],
        },
        summary=f"{len(overtook)} pod(s) served first ({by}) in queue(s) {', '.join(queues)} started "
        f"after {ref.label} began waiting, holding {held} GPUs",
        observed_at=di.t,
        entity=ref,
    )
    return [
        Finding(
            C.QUEUE_PRIORITY,
            f"{ref.label} has waited since {hhmm(since)} while {len(owners)} later job(s) in queue(s) "
            f"{', '.join(queues)} got GPUs first by {by} ({', '.join(owners[:4])}"
            f"{' …' if len(owners) > 4 else ''}, {held} GPUs at {hhmm(di.t)}); without them it would fit.",
            SUPPORTED,
            0.85,
            supports=[base[0], overtake_cite, base[1]],
            subject=ref,
            sources=("k8s",),
            since=since,
            explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION),
            facts={
                "ahead": [Ref("job", p.get("job"), p.namespace) for p in overtook],
                "demand": held,
                "job": ref,
                "queues": queues,
                "mechanisms": mechanisms,
            },
            next_questions=[
                f"Should {ref.label}'s queue get a higher priority or a larger deserved quota?",
                "Are the jobs served first within their own queue's quota, or borrowing (reclaimable)?",
            ],
        )
    ]


def ahead_findings(
    di: DiagnosisInput,
    job: EntityState,
    req: F.Request,
    tot: F.Totals,
    base: list[Cite],
    fits_now: bool,
    since: Any,
    ahead: list[QueuedJob],
    ahead_cite: Derived,
) -> list[Finding]:
    """Pending jobs ordered before this one: the reason when they want the free GPUs it would otherwise get."""
    ref = job.ref
    if not ahead:
        return [
            Finding(
                C.QUEUE_PRIORITY,
                f"No pending job is ordered before {ref.label} at {hhmm(di.t)}.",
                REFUTED,
                0.8,
                refutes=[base[0], ahead_cite],
                subject=ref,
                sources=("k8s",),
                why="nothing ahead in the queue order",
            )
        ]
    demand = round(sum(a.gpus for a in ahead), 4)
    names = ", ".join(f"{a.job.ref.label} ({_n(a.gpus)} GPUs, {a.why})" for a in ahead[:4])
    # Jobs ahead that wait hold nothing: only a job that fits now is kept out by them (they are served the
    # room first). Free GPUs in total say nothing when no node has a block for one pod (fragmentation, or a
    # pod larger than any node), nor of a share or a MIG instance.
    if fits_now:
        conf = 0.7 if tot.eligible_free < req.total + demand else 0.45
        return [
            Finding(
                C.QUEUE_PRIORITY,
                f"{len(ahead)} pending job(s) are served before {ref.label}: {names}; together they want {_n(demand)} "
                f"of the {tot.eligible_free} free GPUs.",
                SUPPORTED,
                conf,
                supports=[base[0], ahead_cite, base[1]],
                subject=ref,
                sources=("k8s",),
                since=since,
                facts={"ahead": [a.job.ref for a in ahead], "demand": demand, "job": ref},
                next_questions=[
                    "Should this job's queue or priority class be raised, or the jobs ahead be held?"
                ],
            )
        ]
    return [
        Finding(
            C.QUEUE_PRIORITY,
            f"{len(ahead)} pending job(s) are ordered before {ref.label} ({names}), but it would not fit even "
            "if they were gone.",
            "unverified",
            0.3,
            supports=[ahead_cite],
            refutes=[base[1]],
            subject=ref,
            sources=("k8s",),
            why="the job does not fit on free capacity by itself, so order is not the binding reason",
            facts={"ahead": [a.job.ref for a in ahead], "demand": demand, "job": ref},
        )
    ]


#
# Request history
#
def request_findings(
    di: DiagnosisInput, job: EntityState, req: F.Request, rows: list[F.NodeFit], since: Any
) -> list[Finding]:
    hist = request_history(di, job)
    if len(hist) < 2:
        return []
    prev, cur = hist[-2], hist[-1]
    if cur["gpus_total"] <= prev["gpus_total"] and cur["gpus_per_pod"] <= prev["gpus_per_pod"]:
        return []
    ref = job.ref
    old_req = F.Request(
        pods=prev["pods"],
        gpus_per_pod=prev["gpus_per_pod"],
        node_selector=req.node_selector,
        tolerations=req.tolerations,
        preemptible=req.preemptible,
    )
    old_fits = F.fits(rows, old_req)
    q_old = quota_at(di, job, old_req, F.totals(rows).eligible_free)
    old_ok = old_fits and (q_old is None or not q_old.holds)
    who = f" by {cur['actor']}" if cur["actor"] else ""
    cites: list[Cite] = [cite_state(job, di.t)]
    for c in di.changes:
        if (
            c.entity == ref
            and cur["from"]
            and c.time == cur["from"]
            and c.field.rsplit(".", 1)[-1] in ("gpus_per_pod", "pods", "gpus_total", "gpus")
        ):
            cites.append(cite_change(c))
    hist_cite = Derived(
        kind="request_history",
        locator=f"inventory versions of job {ref.label} up to {iso(di.t)}",
        content={"history": [{**h, "from": iso(h["from"])} for h in hist]},
        summary=f"request history of {ref.label}: "
        + " -> ".join(f"{h['pods']}×{h['gpus_per_pod']}" for h in hist),
        observed_at=cur["from"] or di.t,
        entity=ref,
    )
    cites.append(hist_cite)
    statement = (
        f"{ref.label}'s request grew from {prev['pods']}×{prev['gpus_per_pod']} to "
        f"{cur['pods']}×{cur['gpus_per_pod']} GPUs at {hhmm(cur['from'])}{who}; "
        + (
            "with the old size it would be placed now."
            if old_ok
            else "the old size would not be placed now either."
        )
    )
    return [
        Finding(
            C.REQUEST_SIZE_CHANGED,
            statement,
            SUPPORTED,
            0.8 if old_ok else 0.45,
            supports=cites,
            subject=ref,
            sources=("k8s",),
            since=cur["from"],
            facts={"job": ref, "old": prev, "new": cur, "old_fits": old_ok},
            explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION, C.PROJECT_QUOTA_EXHAUSTED)
            if old_ok
            else (),
            next_questions=[f"Does {ref.label} need {cur['gpus_total']} GPUs, or was the resize a mistake?"],
        )
    ]
