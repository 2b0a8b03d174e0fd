"""Queue order as a cause of a wait: jobs ahead in the cluster's order (``ahead.jobs_ahead``: the scheduling pass
the job page, the lists and the why-pending panel read) that take the room the job could use, and jobs of higher precedence that started after it began to wait (passed over)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.ahead import Ahead, jobs_ahead, the_pass
from incidents.diagnosis.precedence import overtaking_pods, precedence
from incidents.diagnosis.queue_order import order_words
from incidents.diagnosis.request import Request
from incidents.diagnosis.scheduling_pass import STARTS
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
# Queue order
#
def queue_findings(
    di: DiagnosisInput,
    job: EntityState,
    req: Request,
    rows: list[F.NodeFit],
    tot: Totals,
    base: list[Cite],
    fits_now: bool,
    since: Any,
) -> list[Finding]:
    ahead = jobs_ahead(di, job)
    ref = job.ref
    ahead_cite = Derived(
        kind="queue_order",
        locator=f"inventory pending jobs ordered before {ref.label} ({order_words(di.scheduler)}) "
        f"as of {iso(di.t)}",
        content={"job": ref.label, "count": ahead.count, "ahead": [a.to_dict() for a in ahead.jobs]},
        summary=f"{ahead.count} pending job(s) ahead of {ref.label} at {hhmm(di.t)}",
        observed_at=di.t,
        entity=ref,
    )
    if not fits_now:
        overtaken = overtaking_findings(di, job, req, rows, base, since)
        if overtaken:
            return overtaken
    return ahead_findings(di, job, req, tot, base, fits_now, since, ahead, ahead_cite)


def overtaking_findings(
    di: DiagnosisInput, job: EntityState, req: Request, rows: list[F.NodeFit], base: list[Cite], since: Any
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
    req: Request,
    tot: Totals,
    base: list[Cite],
    fits_now: bool,
    since: Any,
    ahead: Ahead,
    ahead_cite: Derived,
) -> list[Finding]:
    """Pending jobs ordered before this one: the reason when they want the free GPUs it would otherwise get."""
    ref = job.ref
    if not ahead.count:
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
    demand = round(sum(a.gpus for a in ahead.jobs), 4)
    names = ", ".join(f"{a.job.ref.label} ({a.gpus_words} GPUs, {a.why})" for a in ahead.jobs[:4])
    # Jobs ahead that wait hold nothing: only a job that fits now is kept out by them (they are served the
    # room first). Free GPUs in total say nothing when no node has a block for one pod (fragmentation, or a
    # pod larger than any node), nor of a share or a MIG instance.
    if fits_now:
        mine = the_pass(di).find(job.namespace, job.name)
        if mine is not None and mine.outcome == STARTS:
            return [_room_left(di, ref, ahead, names, mine.nodes_words, demand, [ahead_cite, base[1]])]
        conf = 0.7 if tot.eligible_free < req.total + demand else 0.45
        return [
            Finding(
                C.QUEUE_PRIORITY,
                f"{ahead.count} pending job(s) are served before {ref.label}: {names}; together they want {demand:g} "
                f"of the {tot.eligible_free} free GPUs.",
                SUPPORTED,
                conf,
                supports=[base[0], ahead_cite, base[1]],
                subject=ref,
                sources=("k8s",),
                since=since,
                facts={"ahead": [a.job.ref for a in ahead.jobs], "demand": demand, "job": ref},
                next_questions=[
                    "Should this job's queue or priority class be raised, or the jobs ahead be held?"
                ],
            )
        ]
    return [
        Finding(
            C.QUEUE_PRIORITY,
            f"{ahead.count} pending job(s) are ordered before {ref.label} ({names}), but it would not fit even "
            "if they were gone.",
            "unverified",
            0.3,
            supports=[ahead_cite],
            refutes=[base[1]],
            subject=ref,
            sources=("k8s",),
            why="the job does not fit on free capacity by itself, so order is not the binding reason",
            facts={"ahead": [a.job.ref for a in ahead.jobs], "demand": demand, "job": ref},
        )
    ]


def _room_left(
    di: DiagnosisInput, ref: Ref, ahead: Ahead, names: str, where: str, demand: float, refutes: list[Cite]
) -> Finding:
    """The pass serves the jobs ahead first and still starts the job: they do not take the room it fits in."""
    return Finding(
        C.QUEUE_PRIORITY,
        f"{ahead.count} pending job(s) are served before {ref.label} ({names}), but the cluster's pass at "
        f"{hhmm(di.t)} still starts it on {where}: they leave it the room it fits.",
        REFUTED,
        0.7,
        refutes=refutes,
        subject=ref,
        sources=("k8s",),
        why="the jobs ahead do not take the room it fits in",
        facts={"ahead": [a.job.ref for a in ahead.jobs], "demand": demand, "job": ref},
    )
