"""Why a GPU job waits: per-node fit, totals and fragmentation, quota/queue, request history.

Every hypothesis here is a counterfactual on the inventory at t: a blocker is
the cause when removing it alone would let the job's pods be placed, and a
contributing factor when it blocks nodes that would otherwise have room. The
scheduler's own message is parsed and cited next to the computation, never
instead of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.messages import parse_message
from incidents.diagnosis.nodes import condemned_gpus
from incidents.diagnosis.policy import queue_findings, quota_findings, request_findings
from incidents.diagnosis.quota import (
    first_pending_since,
    is_pending,
    quota_at,
)
from incidents.diagnosis.scheduling_pass import PassResult, pass_if_fixed
from incidents.diagnosis.types import (
    REFUTED,
    SUPPORTED,
    UNVERIFIED,
    Cite,
    Derived,
    DiagnosisInput,
    EntityState,
    Finding,
    Ref,
    cite_event,
    cite_state,
    hhmm,
    iso,
)

logger = logging.getLogger(__name__)

SCHEDULING_EVENT_REASONS = (
    "FailedScheduling",
    "Unschedulable",
    "NotReady",
    "PodGroupUnschedulable",
    "NotTriggerScaleUp",  # cluster-autoscaler: why adding a node would not help either
)


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
        texts = " ".join(r.text or "" for r in getattr(parsed, "reasons", []) or [])
        # KAI's "didn't have enough of mig profile: nvidia.com/mig-<p>" is about the layout, not GPU capacity.
        out.add(C.MIG_PROFILE_UNAVAILABLE if F.MIG_PREFIX in texts else C.GPU_CAPACITY_SHORTAGE)
    for r in getattr(parsed, "reasons", []) or []:
        if r.code == "insufficient_gpu" and str(r.resource or "").startswith(F.MIG_PREFIX):
            out.add(C.MIG_PROFILE_UNAVAILABLE)  # "didn't have enough of mig profile: nvidia.com/mig-3g.40gb"
            continue
        code = _REASON_HYPOTHESIS.get(r.code)
        if code:
            out.add(code)
    return out


# Parsed reason code -> the hypothesis it corroborates. A pressure node
# (pre-1.13 "had disk pressure") is what the *-pressure taint says today, which
# the fit table counts as a taint; a node group at its maximum size or a cluster
# at its resource limit means the autoscaler cannot add the GPUs. Volume attach
# limits (volume_node_limit), HAMi device mismatches and the autoscaler's backoff
# point at no hypothesis here, so they corroborate none.
_REASON_HYPOTHESIS = {
    "insufficient_gpu": C.GPU_CAPACITY_SHORTAGE,
    "untolerated_taint": C.UNTOLERATED_TAINT,
    "node_pressure": C.UNTOLERATED_TAINT,
    "node_selector_mismatch": C.NODE_SELECTOR_MISMATCH,
    "affinity_mismatch": C.NODE_SELECTOR_MISMATCH,
    "unschedulable_node": C.GPU_NODE_UNAVAILABLE,
    "node_not_ready": C.GPU_NODE_UNAVAILABLE,
    "max_node_group_size": C.GPU_CAPACITY_SHORTAGE,
    "max_cluster_resources": C.GPU_CAPACITY_SHORTAGE,
    "insufficient_cpu": C.CPU_MEMORY_SHORTAGE,
    "insufficient_memory": C.CPU_MEMORY_SHORTAGE,
}


#
# One job
#
@dataclass
class JobFit:
    """One waiting job's fit at t and what the scheduler said of it: what every rule of ``check_job`` reads."""

    job: EntityState
    req: F.Request
    rows: list[F.NodeFit]
    tot: F.Totals
    fits_now: bool
    base: list[Cite]  # the job's state and the fit table
    said: set[str]  # the hypothesis codes the scheduler's message points at
    said_cite: Cite | None
    since: Any
    quota_holds: bool  # no node is considered while the quota refuses the job

    @property
    def ref(self) -> Ref:
        return self.job.ref

    @property
    def need(self) -> str:
        return f"{self.req.pods} pod(s) × {self.req.gpus_per_pod} GPU"

    def said_support(self, code: str) -> list[Cite]:
        return [self.said_cite] if self.said_cite is not None and code in self.said else []


@dataclass
class Causes:
    """The causes found so far: every one, and those whose removal alone lets the job fit."""

    all: list[str] = field(default_factory=list)
    alone: list[str] = field(default_factory=list)
    # Faults whose fix would start jobs ahead instead: context for the capacity answer, never a cause
    served_first: list[str] = field(default_factory=list)

    def add(self, f: Finding, alone: bool) -> None:
        self.all.append(f.code)
        if alone:
            self.alone.append(f.code)


# Faults that take capacity away: a cause of a job's wait only if their fix would start that job.
FAULT_CODES = frozenset({C.DEVICE_PLUGIN_UNHEALTHY, C.GPU_MISSING, C.GPU_NODE_UNAVAILABLE})

# Blockers whose removal alone lets the job fit are causes (in the order they are reported).
BLOCKER_GROUPS: tuple[tuple[str, set[str]], ...] = (
    (C.DEVICE_PLUGIN_UNHEALTHY, {F.DEVICE_PLUGIN}),
    (C.GPU_MISSING, {F.MISSING_GPU}),
    (C.GPU_NODE_UNAVAILABLE, {F.NOT_READY, F.CORDONED}),
    (C.UNTOLERATED_TAINT, {F.TAINT}),
    (C.NODE_SELECTOR_MISMATCH, {F.SELECTOR}),
)


def check_job(di: DiagnosisInput, job: EntityState) -> list[Finding]:
    """Every rule about one waiting job: node blockers, MIG, CPU/memory, capacity or fragmentation, then policy."""
    req = F.job_request(di, job)
    if req.pods == 0:
        return placed_findings(di, job, req)
    jf = job_fit(di, job, req)
    causes = Causes()
    out: list[Finding] = []
    for code, blockers in BLOCKER_GROUPS:
        out.extend(blocker_findings(di, jf, code, blockers, causes))
    if not jf.quota_holds and not jf.fits_now:
        out.extend(mig_cpu_findings(di, jf, causes))
    elif not jf.quota_holds and jf.fits_now and jf.said_cite is not None and C.CPU_MEMORY_SHORTAGE in jf.said:
        unrecorded = cpu_memory_unrecorded(di, jf.ref, req, jf.rows, jf.base, jf.said_cite, jf.since)
        if unrecorded is not None:
            return [*out, unrecorded, *quota_findings(di, job, req, jf.tot, jf.base, None, jf.since)]
    out.extend(capacity_findings(di, jf, causes))
    return policy_findings(di, jf, out)


def job_fit(di: DiagnosisInput, job: EntityState, req: F.Request) -> JobFit:
    """The fit table of the job at t, its totals, the scheduler's words and whether the quota holds it."""
    rows = F.node_fits(di, req)
    tot = F.totals(rows)
    parsed, said_cite = scheduler_said(di, job)
    said = _said_codes(parsed)
    named = getattr(parsed, "queue", None)
    if named and C.PROJECT_QUOTA_EXHAUSTED in said and any(d.name == named for d in di.departments):
        # The message names the department.
        said = (said - {C.PROJECT_QUOTA_EXHAUSTED}) | {C.DEPARTMENT_QUOTA_EXHAUSTED}
    held = quota_at(di, job, req, tot.eligible_free)
    return JobFit(
        job=job,
        req=req,
        rows=rows,
        tot=tot,
        fits_now=F.fits(rows, req),
        base=[cite_state(job, di.t), fit_table_fact(di, job, req, rows, tot)],
        said=said,
        said_cite=said_cite,
        since=first_pending_since(di, job),
        quota_holds=held is not None and held.holds,
    )


def blocker_findings(
    di: DiagnosisInput, jf: JobFit, code: str, blockers: set[str], causes: Causes
) -> list[Finding]:
    """One family of node blockers: a cause when removing it alone lets the job fit, a contributing factor when
    it keeps the job off nodes that would otherwise have room, refuted (taints, selectors) when no node has it."""
    rows, req, ref = jf.rows, jf.req, jf.ref
    out: list[Finding] = []
    hit = [r for r in rows if set(r.blockers) & blockers]
    if code == C.DEVICE_PLUGIN_UNHEALTHY:
        # A plugin that withdrew faulty GPUs is healthy: those nodes' GPU faults are the causes.
        withdrawn = [r for r in hit if len(condemned_gpus(di, r.node)) >= r.capacity - r.allocatable]
        hit = [r for r in hit if r not in withdrawn]
        if withdrawn and not hit and not jf.quota_holds and not jf.fits_now and F.fits(rows, req, blockers):
            fault = _withdrawn_gpu_finding(di, ref, jf.need, jf.base, withdrawn, jf.since)
            causes.add(fault, alone=True)
            out.append(fault)
    if not hit:
        if code in (C.UNTOLERATED_TAINT, C.NODE_SELECTOR_MISMATCH) and not jf.fits_now:
            out.append(
                Finding(
                    code,
                    f"No GPU node blocks {ref.label} by {_blocker_words(code)}: "
                    f"{len(rows)} node(s) checked at {hhmm(di.t)}.",
                    REFUTED,
                    0.8,
                    refutes=jf.base,
                    subject=ref,
                    sources=("k8s",),
                    why=f"the fit table at {hhmm(di.t)} shows no node with this blocker",
                )
            )
        return out
    if jf.quota_holds:
        return out
    alone = not jf.fits_now and F.fits(rows, req, blockers)
    if alone and code == C.NODE_SELECTOR_MISMATCH and selector_satisfiable(rows, req):
        alone = False  # the nodes it selects could hold it: what keeps it off them is the cause
    if alone and code == C.UNTOLERATED_TAINT and jf.tot.eligible_nodes > 0:
        standing = standing_taints(di, hit, jf.since)
        if standing is not None:
            # A pool dedicated to other work since long before the job waited, while the job has nodes of its
            # own: the pool's purpose, not a fault. Context; never "remove the taint".
            out.append(pool_purpose_finding(di, jf, hit, standing))
            return out
    if alone and code in FAULT_CODES:
        # The room the fix gives back goes to the waiting jobs ahead first, in queue order.
        queued = pass_if_fixed(di, jf.job, req, rows, frozenset(blockers), [r.node for r in hit])
        if not queued.starts and (queued.before or queued.blocked_by is not None):
            served = served_first_finding(di, jf, code, hit, queued)
            causes.served_first.append(served.facts["words"])
            out.append(served)
            return out
    # Nodes the job could use but for this blocker: another static blocker (a taint it does not
    # tolerate, a selector it does not match) keeps it off them anyway, so this one costs it nothing.
    others = set(F.STATIC_BLOCKERS) - blockers
    if not alone:
        hit = [r for r in hit if not set(r.blockers) & others]
    nodes = node_list(hit)
    detail = _detail(code, hit, req) if hit else ""
    if alone:
        statement = f"{ref.label} ({jf.need}) would fit if {detail} on {nodes} were fixed; it does not fit without them."
        conf = 0.85
    elif (
        not jf.fits_now
        and hit
        and code not in (C.UNTOLERATED_TAINT, C.NODE_SELECTOR_MISMATCH)  # constraints, not faults: alone only
        and _blocks_room(hit, req, blockers)
    ):
        statement = (
            f"{detail} on {nodes} keep(s) {ref.label} ({jf.need}) off nodes that would otherwise have room."
        )
        conf = 0.55
    else:
        return out  # the blocker exists but costs this job nothing; health checks report it on its own
    found = Finding(
        code,
        statement,
        SUPPORTED,
        conf,
        supports=[*jf.base, *jf.said_support(code)],
        subject=ref,
        sources=("k8s",),
        since=jf.since,
        explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION) if alone else (),
        facts={
            "nodes": [r.node for r in hit],
            "job": ref,
            "taints": _taints(hit),
            "blockers": sorted(blockers),
        },
        next_questions=_questions(code, hit),
    )
    causes.add(found, alone=alone)
    out.append(found)
    return out


def served_first_finding(
    di: DiagnosisInput, jf: JobFit, code: str, hit: list[F.NodeFit], queued: PassResult
) -> Finding:
    """The fault hides room the job could use, but its fix would start the jobs ahead first, or its StrictFIFO
    queue's head would still hold it: not its cause."""
    ref, req = jf.ref, jf.req
    nodes = node_list(hit)
    detail = _detail(code, hit, req)
    head = queued.blocked_by
    if head is not None:
        words = (
            f"fixing {detail} on {nodes} would not start it: its queue {head.queue} is StrictFIFO and its head "
            f"{head.job.ref.label} would still not be admitted ({queued.blocked_why}), which holds every job "
            "behind it"
        )
    else:
        first = queued.before[0]
        more = f" and {len(queued.before) - 1} more job(s)" if len(queued.before) > 1 else ""
        where = ", ".join(sorted(first.nodes))
        words = (
            f"fixing {detail} on {nodes} would start {first.label} first ({first.job.why}, on {where}){more}; "
            f"{ref.label} is {ordinal(queued.position)} in line for that room"
        )
    ahead = [*([head.job.ref] if head is not None else []), *(s.job.job.ref for s in queued.before)]
    return Finding(
        code,
        f"{detail} on {nodes} hide(s) room {ref.label} ({jf.need}) could use, but {words}, so it is not what "
        f"keeps {ref.label} waiting.",
        REFUTED,
        0.7,
        refutes=jf.base,
        subject=ref,
        sources=("k8s",),
        why="in queue order, the room the fix gives back goes to the jobs ahead"
        if head is None
        else "a StrictFIFO queue's head that cannot be admitted holds the jobs behind it",
        facts={
            "nodes": [r.node for r in hit],
            "job": ref,
            "words": words,
            "position": queued.position,
            "served_first": ahead,
        },
    )


# A taint that was there this long before a job began to wait is the pool's standing purpose, not news.
STANDING = timedelta(hours=1)


def standing_taints(di: DiagnosisInput, hit: list[F.NodeFit], since: Any) -> datetime | None:
    """When the untolerated taints on ``hit`` were last put in place (the latest node's), if every one has been
    there since at least ``STANDING`` before the job began to wait; None when one is recent (a cause)."""
    began = since if isinstance(since, datetime) else di.t
    latest: datetime | None = None
    for row in hit:
        for taint in row.untolerated:
            placed = taint_since(di, row.node, taint)
            if placed is None or placed > began - STANDING:
                return None
            latest = placed if latest is None or placed > latest else latest
    return latest


def taint_since(di: DiagnosisInput, node: str, taint: dict[str, Any]) -> datetime | None:
    """The start of the node's latest unbroken run of versions carrying ``taint`` (the oldest version loaded, if
    it carried it already: "at least since"); None when the node's history is not loaded."""
    history = di.history.get(Ref("node", node)) or []
    if not history:
        return None
    key = (taint.get("key"), taint.get("value") or "", taint.get("effect"))
    placed: datetime | None = None
    for version in reversed(history):
        carried = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in version.get("taints") or []}
        if key not in carried:
            break
        placed = version.valid_from
    return placed


def pool_purpose_finding(di: DiagnosisInput, jf: JobFit, hit: list[F.NodeFit], placed: datetime) -> Finding:
    """Nodes kept for other work by a standing taint: context for the job's wait, never its cause."""
    ref = jf.ref
    pools = sorted({r.pool for r in hit if r.pool})
    nodes = node_list(hit)
    taints = ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in _taints(hit))
    what = f"Pool {', '.join(pools)}" if pools else nodes
    return Finding(
        C.UNTOLERATED_TAINT,
        f"{what} is dedicated to other work (taint {taints} on {nodes}, in place since {hhmm(placed)} or "
        f"earlier, before {ref.label} waited): a standing purpose, not a fault. {ref.label} waits for the "
        f"{jf.tot.eligible_nodes} node(s) it may use.",
        REFUTED,
        0.75,
        refutes=jf.base,
        subject=ref,
        sources=("k8s",),
        why="the taint was in place long before the job waited, and the job has nodes of its own",
        facts={"nodes": [r.node for r in hit], "job": ref, "taints": _taints(hit), "standing_since": placed},
    )


def node_list(rows: list[F.NodeFit], shown: int = 6) -> str:
    """"h100-01, h100-02 and 3 more": the first ``shown`` nodes of the rows, then how many more."""
    more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
    return ", ".join(r.node for r in rows[:shown]) + more


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def mig_cpu_findings(di: DiagnosisInput, jf: JobFit, causes: Causes) -> list[Finding]:
    """The job does not fit and the quota does not hold it: a MIG layout or CPU/memory that keeps it off."""
    out: list[Finding] = []
    if jf.req.mig:
        mig = mig_finding(
            di, jf.ref, jf.req, jf.rows, jf.base, jf.said_support(C.MIG_PROFILE_UNAVAILABLE), jf.since
        )
        if mig is not None:
            out.append(mig)
            causes.add(mig, alone=bool(mig.explains))
    cpu_mem = cpu_memory_finding(
        di, jf.ref, jf.req, jf.rows, jf.base, jf.said_support(C.CPU_MEMORY_SHORTAGE), jf.since
    )
    if cpu_mem is not None:
        out.append(cpu_mem)
        causes.add(cpu_mem, alone=bool(cpu_mem.explains))
    return out


def capacity_findings(di: DiagnosisInput, jf: JobFit, causes: Causes) -> list[Finding]:
    """Capacity vs fragmentation, on the nodes the job may use."""
    ref, tot, need = jf.ref, jf.tot, jf.need
    if causes.alone and not jf.fits_now:
        # The GPUs exist: a blocker hides them. "Insufficient GPUs" is its symptom, not a shortage.
        return [
            Finding(
                code,
                f"Not a {'capacity shortage' if code == C.GPU_CAPACITY_SHORTAGE else 'fragmentation'}: "
                f"{ref.label} ({need}) would fit without what hides the GPUs "
                f"({', '.join(C.name(c) for c in causes.alone)}); the GPUs exist "
                f"({tot.capacity} on {tot.nodes} node(s)), they are hidden from it.",
                REFUTED,
                0.75,
                refutes=jf.base,
                subject=ref,
                sources=("k8s",),
                why=f"removing {', '.join(C.name(c) for c in causes.alone)} alone makes the pods fit",
            )
            for code in (C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION)
        ]
    if jf.fits_now:
        where = [r.node for r in jf.rows if r.fits][:6]
        return [
            Finding(
                C.GPU_CAPACITY_SHORTAGE,
                f"Capacity is not what holds {ref.label}: {need} fit now on {', '.join(where)} "
                f"({tot.eligible_free} GPUs free on {tot.eligible_nodes} usable node(s) at {hhmm(di.t)}).",
                REFUTED,
                0.85,
                refutes=jf.base,
                subject=ref,
                sources=("k8s",),
                why=f"the pods fit on {len(where)} node(s) at {hhmm(di.t)}",
            )
        ]
    if jf.req.share or jf.req.share_memory_mib:
        return share_capacity_findings(
            di, ref, jf.req, jf.rows, jf.base, jf.said_support, jf.since, causes.all
        )
    if tot.eligible_free >= jf.req.total and jf.req.pods > 0:
        return fragmentation_findings(di, jf, causes)
    return shortage_findings(di, jf, causes)


def fragmentation_findings(di: DiagnosisInput, jf: JobFit, causes: Causes) -> list[Finding]:
    """Enough GPUs are free on usable nodes, but no node has a block as large as one pod needs."""
    ref, tot, free_needed = jf.ref, jf.tot, jf.req.total
    return [
        Finding(
            C.GPU_FRAGMENTATION,
            f"{tot.eligible_free} GPUs are free across {tot.eligible_nodes} usable node(s), enough for the "
            f"{free_needed} {ref.label} needs, but the largest free block on one node is "
            f"{tot.largest_eligible_block} and each pod needs {jf.req.gpus_per_pod}.",
            SUPPORTED,
            0.55 if causes.all else 0.8,
            supports=[*jf.base, *jf.said_support(C.GPU_CAPACITY_SHORTAGE)],
            subject=ref,
            sources=("k8s",),
            since=jf.since,
            facts={
                "job": ref,
                "largest": tot.largest_eligible_block,
                "free": tot.eligible_free,
                "per_pod": jf.req.gpus_per_pod,
                # usable nodes only: a cordoned, NotReady or tainted node's free GPUs are no room for it
                "nodes": [r.node for r in jf.rows if r.free and not set(r.blockers) & set(F.STATIC_BLOCKERS)],
            },
            next_questions=["Which small jobs could be packed together to free one whole node?"],
        ),
        Finding(
            C.GPU_CAPACITY_SHORTAGE,
            f"The total is not short: {tot.eligible_free} free GPUs on usable nodes ≥ {free_needed} needed; "
            "the free GPUs are scattered.",
            REFUTED,
            0.7,
            refutes=jf.base,
            subject=ref,
            sources=("k8s",),
            why="total free GPUs suffice; placement fails per node (fragmentation)",
        ),
    ]


def shortage_findings(di: DiagnosisInput, jf: JobFit, causes: Causes) -> list[Finding]:
    """Fewer GPUs are free on the usable nodes than the job needs (reduced by the causes found, if any)."""
    ref, tot, free_needed = jf.ref, jf.tot, jf.req.total
    cause_words = f" (reduced by {', '.join(causes.all)})" if causes.all else ""
    if causes.served_first:
        cause_words += "; " + "; ".join(causes.served_first)
    out = [
        Finding(
            C.GPU_CAPACITY_SHORTAGE,
            f"{ref.label} needs {free_needed} GPUs ({jf.need}); only {tot.eligible_free} are free on the "
            f"{tot.eligible_nodes} usable node(s) ({tot.allocated} of {tot.allocatable} allocatable GPUs allocated at "
            f"{hhmm(di.t)}){cause_words}.",
            SUPPORTED,
            0.45 if causes.all else 0.8,
            supports=[*jf.base, *jf.said_support(C.GPU_CAPACITY_SHORTAGE)],
            subject=ref,
            sources=("k8s",),
            since=jf.since,
            facts={"job": ref, "free": tot.eligible_free, "needed": free_needed, "caused_by": causes.all},
            next_questions=["Which running jobs hold the GPUs, and are any of them idle or over quota?"],
        )
    ]
    if tot.eligible_free < free_needed:
        out.append(
            Finding(
                C.GPU_FRAGMENTATION,
                f"Not fragmentation: only {tot.eligible_free} GPUs free in total on usable nodes, fewer than the "
                f"{free_needed} needed.",
                REFUTED,
                0.7,
                refutes=jf.base,
                subject=ref,
                sources=("k8s",),
                why="total free GPUs are short, not scattered",
            )
        )
    return out


def policy_findings(di: DiagnosisInput, jf: JobFit, out: list[Finding]) -> list[Finding]:
    """Quota, queue order and request history after the fit findings ``out``; a quota that holds the job makes
    queue order and capacity moot (caveats, never causes beside it)."""
    job, req, tot = jf.job, jf.req, jf.tot
    dept_said = jf.said_cite if C.DEPARTMENT_QUOTA_EXHAUSTED in jf.said else None
    project_said = jf.said_cite if C.PROJECT_QUOTA_EXHAUSTED in jf.said else None
    quota = quota_findings(di, job, req, tot, jf.base, project_said, jf.since, dept_said)
    out = [*out, *quota]
    queue = queue_findings(di, job, req, jf.rows, tot, jf.base, jf.fits_now, jf.since)
    holding = [
        f.code
        for f in quota
        if f.code in (C.PROJECT_QUOTA_EXHAUSTED, C.DEPARTMENT_QUOTA_EXHAUSTED) and f.supported
    ]
    if holding:
        who = "the project's quota" if C.PROJECT_QUOTA_EXHAUSTED in holding else "the department's quota"
        queue = [_moot_order(f, who) for f in queue]
        out = [_moot_capacity(f, who) for f in out]
    return [*out, *queue, *request_findings(di, job, req, jf.rows, jf.since)]


def _withdrawn_gpu_finding(
    di: DiagnosisInput, ref: Any, need: str, base: list[Cite], rows: list[F.NodeFit], since: Any
) -> Finding:
    """The job would fit but for GPUs the device plugin rightly withdrew (their own fault): that fault is why."""
    faults = [(r.node, g, why) for r in rows for g, why in condemned_gpus(di, r.node)]
    code = C.GPU_ECC_ERRORS if any("ECC" in why for _, _, why in faults) else C.GPU_XID_FAULT
    words = ", ".join(f"GPU {g.get('index', '?')} on {node} ({why})" for node, g, why in faults[:4])
    node, gpu, _ = faults[0]
    return Finding(
        code,
        f"{ref.label} ({need}) would fit if {words} were repaired or replaced: the device plugin withdrew "
        "it, and without it the nodes are one GPU short.",
        SUPPORTED,
        0.85,
        supports=[*base, *[cite_state(g, di.t) for _, g, _ in faults[:2]]],
        subject=ref,
        sources=("k8s", "prometheus"),
        since=since,
        explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION, C.DEVICE_PLUGIN_UNHEALTHY),
        facts={
            "nodes": [r.node for r in rows],
            "job": ref,
            "node": node,
            "gpu": gpu.name,
            "index": gpu.get("index"),
        },
        next_questions=[f"Can GPU {gpu.get('index', '?')} on {node} be reset, or must it be replaced (RMA)?"],
    )


def _moot_order(f: Finding, who: str = "the project's quota") -> Finding:
    """The quota holds the job whatever its turn: queue order is not what keeps it waiting now."""
    if f.code != C.QUEUE_PRIORITY or not f.supported:
        return f
    f.status, f.confidence = UNVERIFIED, min(f.confidence, 0.3)
    f.why = f"{who} holds the job whatever its turn; order matters once the quota allows it"
    f.explains = ()
    return f


def _moot_capacity(f: Finding, who: str = "the project's quota") -> Finding:
    """The quota refuses the job before any node is considered: free GPUs are not what it waits for now.
    Kept as a caveat (raising the quota alone would not be enough), never a cause beside the quota."""
    if f.code not in (C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION) or not f.supported:
        return f
    f.status, f.confidence = UNVERIFIED, min(f.confidence, 0.35)
    f.why = (
        f"{who} refuses the job before any node is considered; once the quota allows it, this is "
        "what it would wait for next"
    )
    f.explains = ()
    return f


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
            f"{tot.eligible_free} free on {tot.eligible_nodes} usable node(s), largest usable block "
            f"{tot.largest_eligible_block}"
        ),
        observed_at=di.t,
        entity=job.ref,
    )


def selector_satisfiable(rows: list[F.NodeFit], req: F.Request) -> bool:
    """Whether the nodes the job's selector (and tolerations) admit could hold all its pods, empty and healthy.

    Then the selector does not mismatch the cluster: a 2 x 8 H100 gang whose H100 nodes are busy or faulty
    waits for them, and "it would fit on the A100s without its selector" is not why it waits.
    """
    per_pod = max(req.gpus_per_pod, 1)
    slots = sum(
        max(r.nominal, r.capacity) // per_pod
        for r in rows
        if F.SELECTOR not in r.blockers and F.TAINT not in r.blockers
    )
    return slots >= req.pods


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
# CPU and memory
#
def _missing(r: F.NodeFit, req: F.Request) -> list[str]:
    """What one more pod of the job lacks on the node: "6 cores (2 of 95 free)", "40 GiB memory (…)"."""
    out = []
    if r.cpu_pods == 0 and req.cpu_per_pod and r.cpu_free is not None:
        out.append(
            f"{F.format_cpu(req.cpu_per_pod - r.cpu_free)} CPU short "
            f"({F.format_cpu(r.cpu_free)} of {F.format_cpu(r.cpu_allocatable or 0)} unrequested)"
        )
    if r.memory_pods == 0 and req.memory_per_pod and r.memory_free is not None:
        out.append(
            f"{F.format_memory(req.memory_per_pod - r.memory_free)} memory short "
            f"({F.format_memory(r.memory_free)} of {F.format_memory(r.memory_allocatable or 0)} unrequested)"
        )
    return out


def cpu_memory_finding(
    di: DiagnosisInput,
    ref: Any,
    req: F.Request,
    rows: list[F.NodeFit],
    base: list[Cite],
    said: list[Cite],
    since: Any,
) -> Finding | None:
    """GPUs free only on nodes whose remaining CPU or memory cannot take the job's pods.

    The cause when counting GPUs alone would place every pod (``explains`` the capacity/fragmentation
    symptom); contributing when such nodes hold free GPUs the job could use but other GPUs are short too.
    """
    usable = [r for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
    short = [
        r
        for r in usable
        if r.gpu_pods_fit > 0 and (F.INSUFFICIENT_CPU in r.blockers or F.INSUFFICIENT_MEMORY in r.blockers)
    ]
    if not short:
        return None
    alone = F.fits(rows, req, {F.CPU_MEMORY})
    gained = F.placeable(rows, req, {F.CPU_MEMORY}) - F.placeable(rows, req)
    if not alone and gained <= 0:
        return None
    per_node: list[dict[str, Any]] = [
        {
            "node": r.node,
            "free_gpus": r.free,
            "cpu_free": r.cpu_free,
            "memory_free": r.memory_free,
            "missing": _missing(r, req),
        }
        for r in short
    ]
    words = "; ".join(
        f"{n['node']}: {n['free_gpus']} GPU(s) free, {', '.join(n['missing'])}" for n in per_node[:5]
    )
    more = f" and {len(per_node) - 5} more node(s)" if len(per_node) > 5 else ""
    asks = ", ".join(
        x
        for x in (
            F.format_cpu(req.cpu_per_pod) + " CPU" if req.cpu_per_pod else "",
            F.format_memory(req.memory_per_pod) + " memory" if req.memory_per_pod else "",
        )
        if x
    )
    need = f"{req.pods} pod(s) × {req.gpus_per_pod} GPU, {asks} each"
    if alone:
        statement = (
            f"{ref.label} ({need}) would fit on GPUs alone, but the nodes with free GPUs cannot take its pods' CPU "
            f"or memory: {words}{more}."
        )
        conf = 0.85
    else:
        statement = (
            f"CPU or memory keeps {ref.label} ({need}) off {gained} pod slot(s) with free GPUs: {words}{more}; "
            "the GPUs are short as well."
        )
        conf = 0.5
    return Finding(
        C.CPU_MEMORY_SHORTAGE,
        statement,
        SUPPORTED,
        conf,
        supports=[*base, *said],
        subject=ref,
        sources=("k8s",),
        since=since,
        explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION) if alone else (),
        facts={
            "job": ref,
            "nodes": [r.node for r in short],
            "per_node": per_node,
            "cpu_per_pod": req.cpu_per_pod,
            "memory_per_pod": req.memory_per_pod,
            "pods": req.pods,
        },
        next_questions=[
            f"Which pods hold the CPU and memory on {short[0].node}, and do they need that much?",
            "Does the job really need the CPU and memory it requests per pod?",
        ],
    )


def cpu_memory_unrecorded(
    di: DiagnosisInput,
    ref: Any,
    req: F.Request,
    rows: list[F.NodeFit],
    base: list[Cite],
    said_cite: Cite,
    since: Any,
) -> Finding | None:
    """The scheduler reports CPU/memory short while GPUs are free, and the inventory lacks the pods' requests.

    Then the per-node fit cannot count CPU or memory; the scheduler's message is the evidence, and the
    statement says that the missing amount is not known.
    """
    if req.cpu_per_pod is not None or req.memory_per_pod is not None:
        return None  # the requests are known and the fit says the pods fit: the message is stale
    free = [r for r in rows if r.fits]
    if not free:
        return None
    names = ", ".join(f"{r.node} ({r.free} GPU(s) free)" for r in free[:5])
    return Finding(
        C.CPU_MEMORY_SHORTAGE,
        f"The scheduler reports not enough CPU or memory for {ref.label}, while GPUs for it are free on {names}; "
        "the pods' CPU/memory requests are not in the inventory, so what is missing per node cannot be computed.",
        SUPPORTED,
        0.6,
        supports=[*base, said_cite],
        subject=ref,
        sources=("k8s",),
        since=since,
        explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION),
        facts={"job": ref, "nodes": [r.node for r in free], "per_node": [], "pods": req.pods},
        next_questions=[f"What CPU and memory do the pods on {free[0].node} request?"],
    )


#
# MIG
#
def mig_finding(
    di: DiagnosisInput,
    ref: Any,
    req: F.Request,
    rows: list[F.NodeFit],
    base: list[Cite],
    said: list[Cite],
    since: Any,
) -> Finding | None:
    """No usable node advertises the MIG profile the job asks for, or every instance of it is in use.

    Names each node's layout and who holds the instances, and the MIG-capable nodes a repartition could give the
    profile, with the pods that repartitioning would evict (mig-manager evicts every pod using the node's GPUs).
    """
    usable = [r for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
    if F.placeable(rows, req, {F.MIG}) <= F.placeable(rows, req):
        return None  # MIG is not what is short (CPU, memory or node faults are)
    alone = F.fits(rows, req, {F.MIG})
    wanted = ", ".join(f"{n} × {p}" for p, n in sorted(req.mig.items()))
    layouts: list[dict[str, Any]] = []
    holders: dict[str, list[str]] = {}
    for r in usable:
        if not r.mig_layout and not r.mig_config:
            continue
        layout = ", ".join(f"{n} × {p}" for p, n in sorted(r.mig_layout.items()) if n) or "no instances"
        layouts.append(
            {"node": r.node, "config": r.mig_config, "layout": dict(r.mig_layout), "used": dict(r.mig_used)}
        )
        for prof in req.mig:
            if r.mig_layout.get(prof):
                pods = [p for p in di.pods_on_node(r.node) if (p.get("mig") or {}).get(prof)]
                holders.setdefault(prof, []).extend(f"{p.ref.label} on {r.node}" for p in pods)
        layouts[-1]["words"] = f"{r.node} ({r.mig_config or 'no mig.config'}: {layout})"
    advertised = {p: sum(r.mig_layout.get(p, 0) for r in usable) for p in req.mig}
    missing = [p for p, n in advertised.items() if n == 0]
    candidates = repartition_candidates(di, usable)
    where = "; ".join(x["words"] for x in layouts[:5]) or "no usable node has MIG enabled"
    if missing:
        what = (
            f"no usable node advertises nvidia.com/mig-{', nvidia.com/mig-'.join(missing)} (layouts: {where})"
        )
    else:
        used = "; ".join(
            f"{p}: {advertised[p]} instance(s), held by {', '.join(holders.get(p, [])[:6]) or 'pods'}"
            for p in req.mig
        )
        what = f"every instance of the profile is in use ({used}; layouts: {where})"
    repart = ", ".join(
        f"{c['node']} ({c['config'] or 'no config'}, evicts {len(c['evicts'])} pod(s))"
        for c in candidates[:4]
    )
    statement = f"{ref.label} asks for {wanted} per pod ({req.pods} pod(s)) and {what}." + (
        f" Nodes that could be repartitioned: {repart}." if repart else " No usable node is MIG-capable."
    )
    return Finding(
        C.MIG_PROFILE_UNAVAILABLE,
        statement,
        SUPPORTED,
        0.85 if alone else 0.5,
        supports=[*base, *said],
        subject=ref,
        sources=("k8s",),
        since=since,
        explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION) if alone else (),
        facts={
            "job": ref,
            "mig": dict(req.mig),
            "pods": req.pods,
            "missing": missing,
            "advertised": advertised,
            "layouts": [{k: v for k, v in x.items() if k != "words"} for x in layouts],
            "candidates": candidates,
            "nodes": [x["node"] for x in layouts],
        },
        next_questions=[
            "Is the profile in the mig-parted config the GPU Operator applies, and which nodes should carry it?",
            *(
                [f"Can the pods on {candidates[0]['node']} be moved so it can be repartitioned?"]
                if candidates
                else []
            ),
        ],
    )


def repartition_candidates(di: DiagnosisInput, usable: list[F.NodeFit]) -> list[dict[str, Any]]:
    """The MIG-capable usable nodes a repartition could give a profile, fewest evictions first: mig-manager
    evicts every pod using the node's GPUs (MIG instances or whole GPUs) before it applies a layout."""
    candidates = []
    for r in usable:
        if _labels(di, r.node).get("nvidia.com/mig.capable") != "true":
            continue
        evicted = [p for p in di.pods_on_node(r.node) if p.get("mig") or int(p.get("gpus") or 0) > 0]
        candidates.append({"node": r.node, "config": r.mig_config, "evicts": [p.ref for p in evicted]})
    candidates.sort(key=lambda c: (len(c["evicts"]), c["node"]))
    return candidates


def _labels(di: DiagnosisInput, node: str) -> dict[str, str]:
    n = di.find("node", node)
    return (n.get("labels") if n is not None else None) or {}


#
# GPU shares (KAI gpu-fraction / gpu-memory)
#
def share_words(req: F.Request) -> str:
    if req.share:
        return f"{req.share:g} of a GPU"
    return f"{(req.share_memory_mib or 0) / 1024:g} GiB of GPU memory"


def share_capacity_findings(
    di: DiagnosisInput,
    ref: Any,
    req: F.Request,
    rows: list[F.NodeFit],
    base: list[Cite],
    said_support: Any,
    since: Any,
    causes: list[str],
) -> list[Finding]:
    """A share waits: enough left in total but on no single GPU (fragmentation), or too little left (capacity)."""
    usable = [r for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
    by_memory = not req.share
    gpus = [{**x, "node": r.node} for r in usable for x in r.shared]
    whole = sum(r.free for r in usable)
    if by_memory:
        per_gpu_mib: float = max((x["free_mib"] or 0) for x in gpus) if gpus else 0
        total: float = sum(x["free_mib"] or 0 for x in gpus)
        needed: float = req.pods * (req.share_memory_mib or 0)
        largest = per_gpu_mib
        unit = "MiB of GPU memory"
    else:
        total = round(sum(x["free"] for x in gpus) + whole, 4)
        needed = round(req.pods * (req.share or 0), 4)
        largest = max([x["free"] for x in gpus] + ([1.0] if whole else []), default=0.0)
        unit = "of a GPU"
    need = f"{req.pods} pod(s) × {share_words(req)}"
    held = sorted(gpus, key=lambda x: -(x["free_mib"] or 0) if by_memory else -x["free"])
    named = "; ".join(_shared_gpu_words(x, by_memory) for x in held[:5])
    facts = {
        "job": ref,
        "share": req.share,
        "share_memory_mib": req.share_memory_mib,
        "free_total": total,
        "needed": needed,
        "largest": largest,
        "gpus": [{k: x[k] for k in ("gpu", "node", "index", "free", "free_mib", "holders")} for x in held],
        "nodes": sorted({x["node"] for x in gpus}),
        "per_pod": 1,
    }
    if total >= needed and needed > 0:
        return [
            Finding(
                C.GPU_FRAGMENTATION,
                f"{total:g} {unit} is free in total on usable nodes, enough for {ref.label} ({need}), but no single "
                f"GPU has {share_words(req)} free and no whole GPU is free: {named}.",
                SUPPORTED,
                0.55 if causes else 0.8,
                supports=[*base, *said_support(C.GPU_CAPACITY_SHORTAGE)],
                subject=ref,
                sources=("k8s",),
                since=since,
                facts=facts,
                next_questions=["Which shares could be moved so that one GPU has room for this one?"],
            ),
            Finding(
                C.GPU_CAPACITY_SHORTAGE,
                f"The total is not short: {total:g} {unit} free ≥ {needed:g} needed; it is split across GPUs.",
                REFUTED,
                0.7,
                refutes=base,
                subject=ref,
                sources=("k8s",),
                why="the free share capacity suffices in total; no single GPU holds the share",
            ),
        ]
    return [
        Finding(
            C.GPU_CAPACITY_SHORTAGE,
            f"{ref.label} needs {need}; only {total:g} {unit} is free on the usable nodes"
            + (f" ({named})" if named else "")
            + ".",
            SUPPORTED,
            0.45 if causes else 0.8,
            supports=[*base, *said_support(C.GPU_CAPACITY_SHORTAGE)],
            subject=ref,
            sources=("k8s",),
            since=since,
            facts={**facts, "free": total, "caused_by": causes},
            next_questions=["Which running jobs hold the GPUs, and are any of them idle or over quota?"],
        ),
        Finding(
            C.GPU_FRAGMENTATION,
            f"Not fragmentation: only {total:g} {unit} is free in total, less than the {needed:g} needed.",
            REFUTED,
            0.7,
            refutes=base,
            subject=ref,
            sources=("k8s",),
            why="the free share capacity is short, not scattered",
        ),
    ]


def _shared_gpu_words(x: dict[str, Any], by_memory: bool) -> str:
    left = f"{x['free_mib'] or 0} MiB" if by_memory else f"{x['free']:g}"
    holders = ", ".join(
        f"{h['pod']} ({h['fraction']:g})" for h in x["holders"][:4] if h.get("fraction") is not None
    )
    return f"GPU {x['index']} on {x['node']} ({left} free" + (f", held by {holders}" if holders else "") + ")"
