""" "Why is this job not running at t": the job page's panel, computed from inventory as of t.

``explain_job(di, job)`` is pure (a DiagnosisInput in, a JobExplanation out).
``explain_job_at(entity, t)`` is the convenience the job page calls: it asks
``incidents.diagnose`` (the loader, which reads the database) for the input and
then calls the pure function; the import is inside the function so that this
package stays free of database imports at module level.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from incidents.diagnosis import fit as F
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.quota import QueuedJob, QuotaAt, is_pending, jobs_ahead, quota_at, request_history
from incidents.diagnosis.relevance import CAUSE
from incidents.diagnosis.scheduling import scheduler_said
from incidents.diagnosis.types import DiagnosisInput, EntityState, hhmm, iso

logger = logging.getLogger(__name__)


@dataclass
class JobExplanation:
    """Everything the "why not running" panel shows, as of ``t``."""

    job: str  # "ns/name"
    t: datetime
    exists: bool
    phase: str = ""
    pending: bool = False
    request: F.Request | None = None
    nodes: list[F.NodeFit] = field(default_factory=list)
    totals: F.Totals | None = None
    pools: dict[str, F.Totals] = field(default_factory=dict)
    quota: QuotaAt | None = None
    ahead: list[QueuedJob] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    message: dict[str, Any] | None = None
    verdict: list[str] = field(default_factory=list)
    cluster: str = ""
    # The same engine as the incident's diagnosis (run_checks), as of the same t: supported causes first.
    causes: list[dict[str, Any]] = field(default_factory=list)
    ruled_out: list[dict[str, Any]] = field(default_factory=list)
    # Every pod bound to a node while the job is not running: it waits on its containers, not on placement.
    placed: bool = False
    containers: list[dict[str, Any]] = field(
        default_factory=list
    )  # pod, container, reason, exit code, restarts

    @property
    def nodes_that_fit(self) -> list[str]:
        return [r.node for r in self.nodes if r.fits]

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "t": iso(self.t),
            "exists": self.exists,
            "phase": self.phase,
            "pending": self.pending,
            "request": None
            if self.request is None
            else {
                "pods": self.request.pods,
                "gpus_per_pod": self.request.gpus_per_pod,
                "total": self.request.total,
            },
            "nodes": [r.to_dict() for r in self.nodes],
            "totals": self.totals.to_dict() if self.totals else None,
            "pools": {k: v.to_dict() for k, v in self.pools.items()},
            "quota": self.quota.to_dict() if self.quota else None,
            "ahead": [a.to_dict() for a in self.ahead],
            "history": [{**h, "from": iso(h["from"])} for h in self.history],
            "message": self.message,
            "verdict": self.verdict,
            "placed": self.placed,
            "containers": self.containers,
            "causes": self.causes,
            "ruled_out": self.ruled_out,
        }


BLOCKER_WORDS = {
    F.NOT_READY: "NotReady",
    F.CORDONED: "cordoned",
    F.TAINT: "untolerated taint",
    F.SELECTOR: "selector mismatch",
    F.DEVICE_PLUGIN: "device plugin unhealthy",
    F.MISSING_GPU: "GPU missing",
    F.INSUFFICIENT: "not enough free GPUs",
}


def explain_job(di: DiagnosisInput, job: EntityState | None, label: str = "") -> JobExplanation:
    if job is None:
        return JobExplanation(
            job=label, t=di.t, exists=False, verdict=[f"The job did not exist at {iso(di.t)}."]
        )
    # Read-only from here: per-node lookups use indexes built once (1,000 nodes x 20,000 pods scanned per
    # node took seconds).
    with di.indexed():
        return _explain(di, job)


def _explain(di: DiagnosisInput, job: EntityState) -> JobExplanation:
    req = F.job_request(di, job)
    rows = F.node_fits(di, req)
    tot = F.totals(rows)
    pools: dict[str, list[F.NodeFit]] = {}
    for r in rows:
        pools.setdefault(r.pool or "-", []).append(r)
    ex = JobExplanation(
        job=job.ref.label,
        t=di.t,
        exists=True,
        phase=job.get("phase") or "",
        pending=is_pending(job),
        request=req,
        nodes=rows,
        totals=tot,
        pools={k: F.totals(v) for k, v in pools.items()},
        quota=quota_at(di, job, req, tot.eligible_free),
        ahead=jobs_ahead(di, job) if is_pending(job) else [],
        history=request_history(di, job),
    )
    ex.cluster = di.cluster
    ex.placed = req.pods == 0 and req.bound_pods > 0
    ex.containers = waiting_containers(di, job)
    parsed, _cite = scheduler_said(di, job)
    if parsed is not None and not ex.placed:
        ex.message = parsed.to_dict()
    for f in run_checks(di).findings:
        if f.scope != CAUSE:
            continue
        row = {"code": f.code, "status": f.status, "statement": f.statement}
        (ex.causes if f.supported else ex.ruled_out if f.status == "refuted" else ex.causes).append(row)
    ex.verdict = _verdict(ex)
    return ex


def waiting_containers(di: DiagnosisInput, job: EntityState) -> list[dict[str, Any]]:
    """Containers of the job's pods that are not running and ready: why each waits or ended, with its numbers."""
    out = []
    for pod in di.pods_of_job(job):
        for c in pod.get("containers") or []:
            state = c.get("state") or {}
            waiting = state.get("waiting") or {}
            terminated = state.get("terminated") or (c.get("last_state") or {}).get("terminated") or {}
            reason = waiting.get("reason") or (terminated.get("reason") if not c.get("ready") else "")
            if not reason or c.get("ready"):
                continue
            out.append(
                {
                    "pod": pod.name,
                    "node": pod.get("node") or "",
                    "container": c.get("name") or "",
                    "reason": reason,
                    "message": (waiting.get("message") or terminated.get("message") or "")[:300],
                    "exit_code": terminated.get("exitCode", terminated.get("exit_code")),
                    "restarts": c.get("restart_count", c.get("restartCount", 0)),
                }
            )
    return out


def _verdict(ex: JobExplanation) -> list[str]:
    lead = _lead(ex)
    if ex.placed:
        where = ", ".join(sorted({c["node"] for c in ex.containers if c["node"]})) or "their nodes"
        words = "; ".join(
            f"{c['pod']}/{c['container']}: {c['reason']}"
            + (f" (exit code {c['exit_code']})" if c["exit_code"] not in (None, "") else "")
            + (f", {c['restarts']} restarts" if c["restarts"] else "")
            for c in ex.containers[:4]
        )
        assert ex.request is not None
        return [
            *lead,
            f"Not a placement problem: all {ex.request.bound_pods} pod(s) are scheduled on {where} at "
            f"{hhmm(ex.t)}; "
            + (f"their containers wait: {words}." if words else "their containers have not started."),
        ]
    if not ex.pending:
        return [*lead, f"{ex.job} is {ex.phase or 'not pending'} at {hhmm(ex.t)}."]
    assert ex.request is not None and ex.totals is not None
    req, tot = ex.request, ex.totals
    out = list(lead)
    if F.fits(ex.nodes, req):
        out.append(
            f"The pods fit now on {', '.join(ex.nodes_that_fit[:5])}: nodes are not what blocks the job."
        )
    elif tot.eligible_free >= req.total:
        out.append(
            f"Fragmented: {tot.eligible_free} GPUs free on usable nodes, but the largest block is "
            f"{tot.largest_eligible_block} and each pod needs {req.gpus_per_pod}."
        )
    else:
        out.append(f"Not enough GPUs: {tot.eligible_free} free on usable nodes, {req.total} needed.")
    counts: dict[str, int] = {}
    for r in ex.nodes:
        for b in r.blockers:
            counts[b] = counts.get(b, 0) + 1
    if counts:
        out.append(
            "Per node: "
            + ", ".join(f"{n} {BLOCKER_WORDS.get(b, b)}" for b, n in sorted(counts.items()))
            + "."
        )
    q = ex.quota
    if q is not None:
        over = "over-quota is possible" if q.over_quota_possible else "over-quota is not possible"
        out.append(
            f"Project {q.project}: {q.allocated} allocated of quota {q.quota if q.quota is not None else '∞'}, "
            f"{f'limit {q.limit}' if q.limit is not None else 'no limit'}; the job needs {q.requested} more ({q.reason}; "
            f"{over})."
        )
    if ex.ahead:
        out.append(f"{len(ex.ahead)} pending job(s) ahead in the scheduler's order, across queues.")
    if len(ex.history) > 1:
        before, after = ex.history[-2], ex.history[-1]
        out.append(
            f"The request changed from {before['pods']}×{before['gpus_per_pod']} to "
            f"{after['pods']}×{after['gpus_per_pod']} at {hhmm(after['from'])}."
        )
    return out


def _lead(ex: JobExplanation) -> list[str]:
    """The diagnosis' answer first: the best supported cause, or "no cause found" with what was checked."""
    supported = [c for c in ex.causes if c["status"] == "supported"]
    if supported:
        return [f"Cause: {supported[0]['statement']}"]
    if ex.pending or ex.containers:
        checked = sorted({c["code"] for c in [*ex.causes, *ex.ruled_out]})
        return [f"No cause found at {hhmm(ex.t)}" + (f" (checked {', '.join(checked)})." if checked else ".")]
    return []


def explain_job_at(entity: Any, t: datetime) -> JobExplanation:
    """The panel for a job Entity at t (loads inventory as of t through incidents.diagnose)."""
    from incidents.diagnose import load_job_input  # database access lives outside the pure package

    di, job = load_job_input(entity, t)
    return explain_job(di, job, label=f"{entity.namespace}/{entity.name}")
