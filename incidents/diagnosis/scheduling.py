"""Why a GPU job waits: per-node fit, totals and fragmentation, quota/queue, request history.

Every hypothesis here is a counterfactual on the inventory at t: a blocker is
the cause when removing it alone would let the job's pods be placed, and a
contributing factor when it blocks nodes that would otherwise have room. The
scheduler's own message is parsed and cited next to the computation, never
instead of it.

This module runs the rules for one waiting job in order (``check_job``) and
weighs capacity against fragmentation; each other family of rules lives with
its noun: the job's fit at t (``job_fit``), the scheduler's words
(``scheduler_words``), node blockers and the fault pass (``blockers``), CPU and
memory (``cpu_memory``), MIG profiles (``mig_profiles``), GPU shares
(``shares``), quota (``quota_causes``), queue order (``queue_causes``) and the
request (``request_causes``).
"""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.blockers import BLOCKER_GROUPS, blocker_findings
from incidents.diagnosis.citations import cite_state
from incidents.diagnosis.cpu_memory import cpu_memory_finding, cpu_memory_unrecorded
from incidents.diagnosis.job_fit import Causes, JobFit, job_fit
from incidents.diagnosis.mig_profiles import mig_finding
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.queue_causes import queue_findings
from incidents.diagnosis.quota_causes import quota_findings
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.request_causes import request_findings
from incidents.diagnosis.shares import share_capacity_findings
from incidents.diagnosis.types import (
    REFUTED,
    SUPPORTED,
    UNVERIFIED,
    Cite,
    DiagnosisInput,
    EntityState,
    Finding,
    hhmm,
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


def check_job(di: DiagnosisInput, job: EntityState) -> list[Finding]:
    """Every rule about one waiting job: node blockers, MIG, CPU/memory, capacity or fragmentation, then policy."""
    req = job_request(di, job)
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
    cause_words = f" (reduced by {', '.join(C.name(c) for c in causes.all)})" if causes.all else ""
    if causes.served_first:
        cause_words += "; " + "; ".join(causes.served_first)
    # the usable nodes' own figures: a cordoned or NotReady node's GPUs are no capacity for the job
    usable = [r for r in jf.rows if not set(r.blockers) & set(F.STATIC_BLOCKERS)]
    allocated, allocatable = sum(r.allocated for r in usable), sum(r.allocatable for r in usable)
    out = [
        Finding(
            C.GPU_CAPACITY_SHORTAGE,
            f"{ref.label} needs {free_needed} GPUs ({jf.need}); only {tot.eligible_free} are free on the "
            f"{tot.eligible_nodes} usable node(s) ({allocated} of their {allocatable} allocatable GPUs allocated "
            f"at {hhmm(di.t)}){cause_words}.",
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


def placed_findings(di: DiagnosisInput, job: EntityState, req: Request) -> list[Finding]:
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
