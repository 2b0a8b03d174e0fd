"""Why a GPU job waits: per-node fit, totals and fragmentation, quota/queue, request history.

Every hypothesis here is a counterfactual on the inventory at t: a blocker is
the cause when removing it alone would let the job's pods be placed, and a
contributing factor when it blocks nodes that would otherwise have room. The
scheduler's own message is parsed and cited next to the computation, never
instead of it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.quota import (
    QuotaAt,
    first_pending_since,
    is_pending,
    jobs_ahead,
    overtaking_pods,
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
    cite_event,
    cite_state,
    hhmm,
    iso,
)

logger = logging.getLogger(__name__)

SCHEDULING_EVENT_REASONS = ("FailedScheduling", "Unschedulable", "NotReady", "PodGroupUnschedulable")


def pending_jobs(di: DiagnosisInput) -> list[EntityState]:
    """The subject jobs (or jobs of subject pods) that are waiting at t."""
    out: list[EntityState] = []
    for ref in di.subjects:
        job = None
        if ref.kind == "job":
            job = di.find("job", ref.name, ref.namespace)
        elif ref.kind == "pod":
            pod = di.find("pod", ref.name, ref.namespace)
            if pod is not None and pod.get("job"):
                job = di.find("job", pod.get("job"), pod.namespace)
        if job is not None and is_pending(job) and job not in out:
            out.append(job)
    return out


def check_scheduling(di: DiagnosisInput) -> list[Finding]:
    findings: list[Finding] = []
    for job in pending_jobs(di):
        findings.extend(check_job(di, job))
    return findings


#
# The scheduler's own words
#
def scheduler_said(di: DiagnosisInput, job: EntityState) -> tuple[Any | None, Cite | None]:
    """Parse the newest scheduler message about the job (condition, pod condition, or event) and cite it."""
    try:
        from incidents.diagnosis.messages import parse_message
    except ImportError:  # the parsers land separately; diagnosis still works from inventory alone
        return None, None
    sched = job.get("scheduling") or {}
    if sched.get("message"):
        return parse_message(sched["message"]), cite_state(job, di.t)
    for pod in di.pods_of_job(job):
        cond = (pod.get("conditions") or {}).get("PodScheduled") or {}
        if cond.get("status") == "False" and cond.get("message"):
            return parse_message(cond["message"]), cite_state(pod, di.t)
    names = {job.name} | {p.name for p in di.pods_of_job(job)}
    events = [
        e
        for e in di.events
        if e.involved
        and e.involved.name.startswith(tuple(names))
        and e.time <= di.t
        and (e.reason in SCHEDULING_EVENT_REASONS or "schedul" in e.reason.lower())
    ]
    if events:
        ev = max(events, key=lambda e: e.time)
        return parse_message(ev.message), cite_event(ev)
    return None, None


def _said_codes(parsed: Any) -> set[str]:
    """Which hypothesis codes the scheduler's message itself points at."""
    if parsed is None or getattr(parsed, "source", "unknown") == "unknown":
        return set()
    out: set[str] = set()
    cause = getattr(parsed, "cause", None)
    if cause in ("quota_exhausted", "exceeds_max_capacity"):
        out.add(C.PROJECT_QUOTA_EXHAUSTED)
    if cause in ("insufficient_capacity",):
        out.add(C.GPU_CAPACITY_SHORTAGE)
    for r in getattr(parsed, "reasons", []) or []:
        code = {
            "insufficient_gpu": C.GPU_CAPACITY_SHORTAGE,
            "untolerated_taint": C.UNTOLERATED_TAINT,
            "node_selector_mismatch": C.NODE_SELECTOR_MISMATCH,
            "affinity_mismatch": C.NODE_SELECTOR_MISMATCH,
            "unschedulable_node": C.GPU_NODE_UNAVAILABLE,
            "node_not_ready": C.GPU_NODE_UNAVAILABLE,
        }.get(r.code)
        if code:
            out.add(code)
    return out


#
# One job
#
def check_job(di: DiagnosisInput, job: EntityState) -> list[Finding]:
    req = F.job_request(di, job)
    if req.pods == 0:
        return placed_findings(di, job, req)
    rows = F.node_fits(di, req)
    tot = F.totals(rows)
    fits_now = F.fits(rows, req)
    job_cite = cite_state(job, di.t)
    fit_cite = fit_table_fact(di, job, req, rows, tot)
    parsed, said_cite = scheduler_said(di, job)
    said = _said_codes(parsed)
    since = first_pending_since(di, job)
    ref = job.ref
    base = [job_cite, fit_cite]
    need = f"{req.pods} pod(s) × {req.gpus_per_pod} GPU"
    out: list[Finding] = []

    def said_support(code: str) -> list[Cite]:
        return [said_cite] if said_cite is not None and code in said else []

    # Blockers whose removal alone lets the job fit are causes.
    groups = [
        (C.DEVICE_PLUGIN_UNHEALTHY, {F.DEVICE_PLUGIN}),
        (C.GPU_MISSING, {F.MISSING_GPU}),
        (C.GPU_NODE_UNAVAILABLE, {F.NOT_READY, F.CORDONED}),
        (C.UNTOLERATED_TAINT, {F.TAINT}),
        (C.NODE_SELECTOR_MISMATCH, {F.SELECTOR}),
    ]
    causes: list[str] = []
    alone_causes: list[str] = []
    for code, blockers in groups:
        hit = [r for r in rows if set(r.blockers) & blockers]
        if not hit:
            if code in (C.UNTOLERATED_TAINT, C.NODE_SELECTOR_MISMATCH) and not fits_now:
                out.append(
                    Finding(
                        code,
                        f"No GPU node blocks {ref.label} by {_blocker_words(code)}: "
                        f"{len(rows)} node(s) checked at {hhmm(di.t)}.",
                        REFUTED,
                        0.8,
                        refutes=base,
                        subject=ref,
                        sources=("k8s",),
                        why=f"the fit table at {hhmm(di.t)} shows no node with this blocker",
                    )
                )
            continue
        alone = not fits_now and F.fits(rows, req, blockers)
        nodes = ", ".join(r.node for r in hit[:6]) + (f" and {len(hit) - 6} more" if len(hit) > 6 else "")
        detail = _detail(code, hit, req)
        if alone:
            alone_causes.append(code)
            statement = f"{ref.label} ({need}) would fit if {detail} on {nodes} were fixed; it does not fit without them."
            conf = 0.85
        elif not fits_now and _blocks_room(hit, req, blockers):
            statement = (
                f"{detail} on {nodes} keep(s) {ref.label} ({need}) off nodes that would otherwise have room."
            )
            conf = 0.55
        else:
            continue  # the blocker exists but costs this job nothing; health checks report it on its own
        causes.append(code)
        out.append(
            Finding(
                code,
                statement,
                SUPPORTED,
                conf,
                supports=[*base, *said_support(code)],
                subject=ref,
                sources=("k8s",),
                since=since,
                explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION) if alone else (),
                facts={
                    "nodes": [r.node for r in hit],
                    "job": ref,
                    "taints": _taints(hit),
                    "blockers": sorted(blockers),
                },
                next_questions=_questions(code, hit),
            )
        )

    # Capacity vs fragmentation, on the nodes the job may use.
    free_needed = req.total
    if alone_causes and not fits_now:
        # The GPUs exist: a blocker hides them. "Insufficient GPUs" is its symptom, not a shortage.
        for code in (C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION):
            out.append(
                Finding(
                    code,
                    f"Not a {'capacity shortage' if code == C.GPU_CAPACITY_SHORTAGE else 'fragmentation'}: "
                    f"{ref.label} ({need}) would fit if {', '.join(alone_causes)} were fixed; the GPUs exist "
                    f"({tot.capacity} on {tot.nodes} node(s)), they are hidden from it.",
                    REFUTED,
                    0.75,
                    refutes=base,
                    subject=ref,
                    sources=("k8s",),
                    why=f"removing {', '.join(alone_causes)} alone makes the pods fit",
                )
            )
    elif fits_now:
        where = [r.node for r in rows if r.fits][:6]
        out.append(
            Finding(
                C.GPU_CAPACITY_SHORTAGE,
                f"Capacity is not what holds {ref.label}: {need} fit now on {', '.join(where)} "
                f"({tot.free} of {tot.allocatable} allocatable GPUs free at {hhmm(di.t)}).",
                REFUTED,
                0.85,
                refutes=base,
                subject=ref,
                sources=("k8s",),
                why=f"the pods fit on {len(where)} node(s) at {hhmm(di.t)}",
            )
        )
    elif tot.eligible_free >= free_needed and req.pods > 0:
        out.append(
            Finding(
                C.GPU_FRAGMENTATION,
                f"{tot.eligible_free} GPUs are free across {tot.eligible_nodes} usable node(s), enough for the "
                f"{free_needed} {ref.label} needs, but the largest free block on one node is "
                f"{tot.largest_eligible_block} and each pod needs {req.gpus_per_pod}.",
                SUPPORTED,
                0.55 if causes else 0.8,
                supports=[*base, *said_support(C.GPU_CAPACITY_SHORTAGE)],
                subject=ref,
                sources=("k8s",),
                since=since,
                facts={
                    "job": ref,
                    "largest": tot.largest_eligible_block,
                    "free": tot.eligible_free,
                    "per_pod": req.gpus_per_pod,
                    "nodes": [r.node for r in rows if r.free],
                },
                next_questions=["Which small jobs could be packed together to free one whole node?"],
            )
        )
        out.append(
            Finding(
                C.GPU_CAPACITY_SHORTAGE,
                f"The total is not short: {tot.eligible_free} free GPUs on usable nodes ≥ {free_needed} needed; "
                "the free GPUs are scattered.",
                REFUTED,
                0.7,
                refutes=base,
                subject=ref,
                sources=("k8s",),
                why="total free GPUs suffice; placement fails per node (fragmentation)",
            )
        )
    else:
        conf = 0.45 if causes else 0.8
        cause_words = f" (reduced by {', '.join(causes)})" if causes else ""
        out.append(
            Finding(
                C.GPU_CAPACITY_SHORTAGE,
                f"{ref.label} needs {free_needed} GPUs ({need}); only {tot.eligible_free} are free on the "
                f"{tot.eligible_nodes} usable node(s) ({tot.allocated} of {tot.allocatable} allocatable GPUs allocated at "
                f"{hhmm(di.t)}){cause_words}.",
                SUPPORTED,
                conf,
                supports=[*base, *said_support(C.GPU_CAPACITY_SHORTAGE)],
                subject=ref,
                sources=("k8s",),
                since=since,
                facts={"job": ref, "free": tot.eligible_free, "needed": free_needed, "caused_by": causes},
                next_questions=["Which running jobs hold the GPUs, and are any of them idle or over quota?"],
            )
        )
        if tot.eligible_free < free_needed:
            out.append(
                Finding(
                    C.GPU_FRAGMENTATION,
                    f"Not fragmentation: only {tot.eligible_free} GPUs free in total on usable nodes, fewer than the "
                    f"{free_needed} needed.",
                    REFUTED,
                    0.7,
                    refutes=base,
                    subject=ref,
                    sources=("k8s",),
                    why="total free GPUs are short, not scattered",
                )
            )

    out.extend(
        quota_findings(
            di, job, req, tot, base, said_cite if C.PROJECT_QUOTA_EXHAUSTED in said else None, since
        )
    )
    out.extend(queue_findings(di, job, req, rows, tot, base, fits_now, since))
    out.extend(request_findings(di, job, req, rows, since))
    return out


def placed_findings(di: DiagnosisInput, job: EntityState, req: F.Request) -> list[Finding]:
    """Every pod is bound to a node: the job waits on something else (image, container start), not on GPUs."""
    pods = [p for p in di.pods_of_job(job) if p.get("node")]
    cites: list[Cite] = [cite_state(job, di.t), *[cite_state(p, di.t) for p in pods[:4]]]
    where = ", ".join(sorted({p.get("node") for p in pods}))
    return [
        Finding(
            code,
            f"Not a scheduling problem: all {req.bound_pods} pod(s) of {job.ref.label} are bound to {where} at "
            f"{hhmm(di.t)}; the job waits on its containers, not on GPUs or quota.",
            REFUTED,
            0.85,
            refutes=cites,
            subject=job.ref,
            sources=("k8s",),
            why="every pod of the job has a node",
        )
        for code in (C.GPU_CAPACITY_SHORTAGE, C.PROJECT_QUOTA_EXHAUSTED)
    ]


def fit_table_fact(
    di: DiagnosisInput, job: EntityState, req: F.Request, rows: list[F.NodeFit], tot: F.Totals
) -> Derived:
    return Derived(
        kind="fit_table",
        locator=f"inventory fit of job {job.ref.label} on every GPU node as of {iso(di.t)}",
        content={
            "request": {
                "pods": req.pods,
                "gpus_per_pod": req.gpus_per_pod,
                "total": req.total,
                "node_selector": req.node_selector,
                "tolerations": req.tolerations,
                "preemptible": req.preemptible,
            },
            "nodes": [r.to_dict() for r in rows],
            "totals": tot.to_dict(),
        },
        summary=(
            f"fit of {job.ref.label} at {hhmm(di.t)}: {sum(1 for r in rows if r.fits)}/{len(rows)} nodes fit; "
            f"{tot.free} free of {tot.allocatable}, largest block {tot.largest_free_block}"
        ),
        observed_at=di.t,
        entity=job.ref,
    )


def _blocks_room(hit: list[F.NodeFit], req: F.Request, blockers: set[str]) -> bool:
    return any(r.free_if(blockers) >= max(req.gpus_per_pod, 1) for r in hit)


def _blocker_words(code: str) -> str:
    return {C.UNTOLERATED_TAINT: "an untolerated taint", C.NODE_SELECTOR_MISMATCH: "a selector mismatch"}.get(
        code, code
    )


def _taints(hit: list[F.NodeFit]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for r in hit:
        for t in r.untolerated:
            if t not in seen:
                seen.append(t)
    return seen


def _detail(code: str, hit: list[F.NodeFit], req: F.Request) -> str:
    if code == C.UNTOLERATED_TAINT:
        taints = ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in _taints(hit))
        return f"the taint {taints} the job does not tolerate"
    if code == C.NODE_SELECTOR_MISMATCH:
        return (
            "the job's node selector ("
            + "; ".join(sorted({m for r in hit for m in r.selector_mismatch}))
            + ")"
        )
    if code == C.DEVICE_PLUGIN_UNHEALTHY:
        return "the device plugin advertising " + ", ".join(
            f"{r.allocatable} of {r.capacity} GPUs" for r in hit[:3]
        )
    if code == C.GPU_MISSING:
        return "missing GPUs (" + ", ".join(f"{r.capacity} of {r.nominal} present" for r in hit[:3]) + ")"
    states = sorted({("NotReady" if F.NOT_READY in r.blockers else "cordoned") for r in hit})
    return "node(s) " + "/".join(states)


def _questions(code: str, hit: list[F.NodeFit]) -> list[str]:
    node = hit[0].node
    return {
        C.UNTOLERATED_TAINT: [f"Who added the taint on {node}, and is it still needed?"],
        C.NODE_SELECTOR_MISMATCH: [
            "Does any node carry the label the job selects, or was the selector mistyped?"
        ],
        C.DEVICE_PLUGIN_UNHEALTHY: [
            f"Is the nvidia-device-plugin pod on {node} running, and what do its logs say?"
        ],
        C.GPU_MISSING: [f"Did {node} log an Xid 79 (GPU fell off the bus) before the GPU vanished?"],
        C.GPU_NODE_UNAVAILABLE: [f"Why is {node} NotReady or cordoned, and when will it be back?"],
    }.get(code, [])


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
) -> list[Finding]:
    q = quota_at(di, job, req, tot.eligible_free)
    if q is None:
        return []
    fact = quota_fact(di, q)
    cites: list[Cite] = [base[0], fact, cite_state(q.policy, di.t)] if q.policy else [base[0], fact]
    cut = _last_cut(q)
    cut_words = ""
    if cut is not None:
        who = f"{cut.actor} " if cut.actor else ""
        cut_words = f" since {hhmm(cut.time)}, when {who}changed {cut.field.rsplit('.', 1)[-1]} from {cut.old} to {cut.new}"
        cites.append(cite_change(cut))
    limit_words = f", limit {q.limit}" if q.limit is not None else ", no limit"
    head = (
        f"project {q.project} uses {q.allocated} of {q.quota if q.quota is not None else '∞'} GPUs of quota"
        f"{limit_words}{cut_words}"
    )
    ref = job.ref
    if q.blocks:
        if q.over_limit:
            why = f"{ref.label} needs {q.requested} more, {q.after} would exceed the limit of {q.limit}"
        elif not q.preemptible:
            why = f"{ref.label} is non-preemptible and needs {q.requested} more, {q.after} would exceed the quota"
        else:  # pragma: no cover - QuotaAt.blocks implies one of the two above
            why = f"{ref.label} needs {q.requested} more, {q.after} would exceed the quota"
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
                    "job": ref,
                    "cut": {"old": cut.old, "new": cut.new, "actor": cut.actor, "field": cut.field}
                    if cut
                    else None,
                },
                next_questions=[
                    f"Can project {q.project} borrow unused quota, or should its quota be raised?",
                    *([f"Was the quota change by {cut.actor} at {hhmm(cut.time)} intended?"] if cut else []),
                ],
            )
        ]
    if said_cite is not None:
        # The scheduler says quota, the inventory says fine: say both, claim nothing.
        return [
            Finding(
                C.PROJECT_QUOTA_EXHAUSTED,
                f"The scheduler reports a quota problem, but at {hhmm(di.t)} {head} and {ref.label}'s {q.requested} "
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
    return [
        Finding(
            C.PROJECT_QUOTA_EXHAUSTED,
            f"Quota is not what holds {ref.label}: {head}, and its {q.requested} more GPUs are {q.reason}.",
            REFUTED,
            0.85,
            refutes=cites,
            subject=ref,
            sources=("k8s", di.scheduler),
            why=f"{q.after} ≤ quota {q.quota}" if q.within_quota else f"over-quota is possible ({q.reason})",
        )
    ]


def quota_fact(di: DiagnosisInput, q: QuotaAt) -> Derived:
    return Derived(
        kind="quota_usage",
        locator=f"inventory quota of project {q.project} (queue {q.queue}) and GPUs of its bound pods as of {iso(di.t)}",
        content=q.to_dict(),
        summary=f"project {q.project}: {q.allocated} allocated of quota {q.quota}, limit {q.limit}; "
        f"job needs {q.requested} ({q.reason})",
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
    ahead = jobs_ahead(di, job)
    ref = job.ref
    ahead_cite = Derived(
        kind="queue_order",
        locator=f"inventory pending jobs ordered before {ref.label} (queue priority, priority class, submission) "
        f"as of {iso(di.t)}",
        content={"job": ref.label, "ahead": [a.to_dict() for a in ahead]},
        summary=f"{len(ahead)} pending job(s) ahead of {ref.label} at {hhmm(di.t)}",
        observed_at=di.t,
        entity=ref,
    )
    overtook = overtaking_pods(di, job, since)
    if overtook and not fits_now:
        freed: dict[str, int] = {}
        for p in overtook:
            freed[p.get("node")] = freed.get(p.get("node"), 0) + int(p.get("gpus") or 0)
        without = [replace(r, allocated=max(r.allocated - freed.get(r.node, 0), 0)) for r in rows]
        if F.fits(without, req):
            held = sum(freed.values())
            owners = sorted({f"{p.namespace}/{p.get('job')}" for p in overtook})
            queues = sorted({p.get("queue") or p.get("project") or "?" for p in overtook})
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
                summary=f"{len(overtook)} pod(s) of higher-priority queue(s) {', '.join(queues)} started after "
                f"{ref.label} began waiting, holding {held} GPUs",
                observed_at=di.t,
                entity=ref,
            )
            return [
                Finding(
                    C.QUEUE_PRIORITY,
                    f"{ref.label} has waited since {hhmm(since)} while {len(owners)} later job(s) of higher-priority "
                    f"queue(s) {', '.join(queues)} got GPUs first ({', '.join(owners[:4])}"
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
                    },
                    next_questions=[
                        f"Should {ref.label}'s queue get a higher priority or a larger deserved quota?",
                        "Is the higher-priority queue within its own quota, or borrowing?",
                    ],
                )
            ]
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
    demand = sum(a.gpus for a in ahead)
    names = ", ".join(f"{a.job.ref.label} ({a.gpus} GPUs, {a.why})" for a in ahead[:4])
    if fits_now or tot.eligible_free >= req.total:
        conf = 0.7 if tot.eligible_free < req.total + demand else 0.45
        return [
            Finding(
                C.QUEUE_PRIORITY,
                f"{len(ahead)} pending job(s) are served before {ref.label}: {names}; together they want {demand} "
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
    old_ok = old_fits and (q_old is None or not q_old.blocks)
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
