""" "Why is this job not running at t": the job page's panel, computed from inventory as of t.

``explain_job(di, job)`` is pure (a DiagnosisInput in, a JobExplanation out). The job page
calls ``incidents.job_explanation.explain_job_at(entity, t)``, which loads the input from the
database and calls it. Its GPU tables (shares, MIG) are ``gpu_panels``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from incidents.diagnosis import fit as F
from incidents.diagnosis.ahead import jobs_ahead, the_pass
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.durations import Basis
from incidents.diagnosis.edits import Unblock, smallest_edits
from incidents.diagnosis.eta import Eta, eta
from incidents.diagnosis.gpu_panels import BLOCKER_WORDS, mig_panel, mig_verdict, share_panel, share_verdict
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.precedence import QueuedJob
from incidents.diagnosis.quota import QuotaAt, quota_at
from incidents.diagnosis.relevance import CAUSE
from incidents.diagnosis.request import Request, job_request, request_history
from incidents.diagnosis.scheduler_words import scheduler_said
from incidents.diagnosis.scheduling_pass import STARTS, ClusterPass, Position, position
from incidents.diagnosis.shares import share_words
from incidents.diagnosis.totals import Totals, totals
from incidents.diagnosis.types import DiagnosisInput, EntityState, hhmm, iso
from incidents.diagnosis.whatif import Edit, suggest_edit, would_start

logger = logging.getLogger(__name__)


@dataclass
class JobExplanation:
    """Everything the "why not running" panel shows, as of ``t``."""

    job: str  # "ns/name"
    t: datetime
    exists: bool
    phase: str = ""
    pending: bool = False
    request: Request | None = None
    nodes: list[F.NodeFit] = field(default_factory=list)
    totals: Totals | None = None
    pools: dict[str, Totals] = field(default_factory=dict)
    quota: QuotaAt | None = None
    # The waiting jobs served before it (ahead.jobs_ahead: its position in the cluster's pass less one), the first
    # MAX_CONSIDERED of them named
    ahead: list[QueuedJob] = field(default_factory=list)
    ahead_count: int = 0
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
    # A KAI share: per candidate node, what is left of each shared GPU against the share asked (share_panel).
    shares: dict[str, Any] | None = None
    # A MIG request: per node, the profile's instances advertised and free, and the repartition candidates.
    mig: dict[str, Any] | None = None
    # A waiting job's place in its queue and in the cluster's order, with the jobs ahead competing for its GPUs
    # (scheduling_pass.position), and the edit the what-if link is prefilled with (whatif.suggest_edit).
    position: Position | None = None
    whatif_edit: Edit | None = None
    whatif_starts: bool | None = None  # whether one pass with that edit starts the job (None: no edit)
    # The smallest edits that start it, each checked by one pass (edits.smallest_edits), and when it is likely to
    # start (eta.eta: None without the finished jobs' durations, explain_job's ``basis``).
    unblock: Unblock | None = None
    eta: Eta | None = None
    base_pass: ClusterPass | None = field(default=None, repr=False)  # the pass at t they all read

    @property
    def also_supported(self) -> list[str]:
        """The supported causes after the first (the lead): what the panel lists as "also supported"."""
        return [c["code"] for c in self.causes if c["status"] == "supported"][1:]

    @property
    def request_words(self) -> str:
        """'2 pod(s) × 8 GPUs', '1 pod(s) × 0.5 of a GPU', '1 pod(s) × 1 MIG 3g.40gb'."""
        r = self.request
        if r is None:
            return ""
        if r.share or r.share_memory_mib:
            what = share_words(r)
        elif r.mig:
            what = " + ".join(f"{n} MIG {p}" for p, n in sorted(r.mig.items()))
        else:
            what = f"{r.gpus_per_pod} GPU{'s' if r.gpus_per_pod != 1 else ''}"
        return f"{r.pods} pod(s) × {what}"

    @property
    def whatif_query(self) -> str:
        """The query string of the what-if page prefilled with ``whatif_edit`` ("" without one)."""
        e = self.whatif_edit
        return urlencode({e.kind: e.value}) if e is not None else ""

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
            "ahead_count": self.ahead_count,
            "history": [{**h, "from": iso(h["from"])} for h in self.history],
            "message": self.message,
            "verdict": self.verdict,
            "placed": self.placed,
            "containers": self.containers,
            "shares": self.shares,
            "mig": self.mig,
            "position": None
            if self.position is None
            else {
                "queue": self.position.queue,
                "in_queue": self.position.in_queue,
                "queue_size": self.position.queue_size,
                "in_cluster": self.position.in_cluster,
                "waiting": self.position.waiting,
                "rule": self.position.rule,
                "competitors": [
                    {"job": c.label, "order": c.order, "outcome": c.outcome, "nodes": c.nodes}
                    for c in self.position.competitors
                ],
            },
            "whatif_edit": None
            if self.whatif_edit is None
            else [self.whatif_edit.kind, self.whatif_edit.value],
            "unblock": None
            if self.unblock is None
            else {
                "answers": [
                    {"edits": [[e.kind, e.value] for e in a.edits], "nodes": a.nodes, "sentence": a.sentence}
                    for a in self.unblock.answers
                ],
                "refusals": self.unblock.refusals,
            },
            "eta": None
            if self.eta is None
            else {"lo": iso(self.eta.lo), "hi": iso(self.eta.hi), "words": self.eta.words},
            "causes": self.causes,
            "ruled_out": self.ruled_out,
        }


def explain_job(
    di: DiagnosisInput, job: EntityState | None, label: str = "", basis: Basis | None = None
) -> JobExplanation:
    if job is None:
        return JobExplanation(
            job=label, t=di.t, exists=False, verdict=[f"The job did not exist at {iso(di.t)}."]
        )
    # Read-only from here: per-node lookups use indexes built once (1,000 nodes x 20,000 pods scanned per
    # node took seconds).
    with di.indexed():
        ex = _explain(di, job)
        if basis is not None and ex.base_pass is not None:
            # in the same index: the replay reads the nodes the pass read (it writes copies, never ``di``)
            ex.eta = eta(di, job, ex.base_pass, basis)
    return ex


def _explain(di: DiagnosisInput, job: EntityState) -> JobExplanation:
    req = job_request(di, job)
    rows = F.node_fits(di, req)
    tot = totals(rows)
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
        pools={k: totals(v) for k, v in pools.items()},
        quota=quota_at(di, job, req, tot.eligible_free),
        history=request_history(di, job),
    )
    ex.cluster = di.cluster
    ex.placed = req.pods == 0 and req.bound_pods > 0
    if req.share or req.share_memory_mib:
        ex.shares = share_panel(req, rows)
    if req.mig:
        ex.mig = mig_panel(di, req, rows)
    ex.containers = waiting_containers(di, job)
    if ex.pending:
        ahead = jobs_ahead(di, job, the_pass(di))
        ex.ahead, ex.ahead_count = ahead.jobs, ahead.count
    if ex.pending and not ex.placed:
        base = ex.base_pass = the_pass(di)
        ex.position = position(di, job, base)
        ex.unblock = smallest_edits(di, job, base)
        ex.whatif_edit = suggest_edit(di, job, ex.position)
        if ex.whatif_edit is not None:
            after = would_start(di, job, ex.whatif_edit)
            ex.whatif_starts = after is not None and after.outcome == STARTS
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
    elif ex.shares is not None:
        out.append(share_verdict(ex.shares))
    elif ex.mig is not None:
        out.append(mig_verdict(ex.mig))
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
        d = q.display
        limit = f"limit {d['limit']}" if q.limit is not None else "no limit"
        out.append(
            f"Project {q.project}: {d['allocated']} allocated of quota {d['quota']}, {limit}; "
            f"the job needs {d['requested']} more ({q.reason}; {over})."
        )
    if ex.position is not None:
        out.append(position_words(ex.position))
    elif ex.ahead_count:
        out.append(f"{ex.ahead_count} pending job(s) ahead in the scheduler's order, across queues.")
    if len(ex.history) > 1:
        before, after = ex.history[-2], ex.history[-1]
        out.append(
            f"The request changed from {before['pods']}×{before['gpus_per_pod']} to "
            f"{after['pods']}×{after['gpus_per_pod']} at {hhmm(after['from'])}."
        )
    return out


def _nth(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def position_words(pos: Position) -> str:
    """ "2nd of 3 waiting in queue vision, 3rd of 5 in the cluster's order; ahead for the same GPUs: vision/v1
    (starts on h100-03), nlp/n1 (quota); in one pass at t it would not start (no room)." """
    where = (
        f"{_nth(pos.in_cluster)} of {pos.waiting} in the cluster's order"
        if pos.in_cluster is not None
        else f"beyond the first {pos.ahead} of {pos.waiting} in the cluster's order"
    )
    words = f"{_nth(pos.in_queue)} of {pos.queue_size} waiting in queue {pos.queue}, {where}"
    if pos.competitors:
        named = ", ".join(
            f"{c.label} ({'starts on ' + c.nodes_words if c.outcome == STARTS else c.outcome})"
            for c in pos.competitors[:5]
        )
        more = f" and {len(pos.competitors) - 5} more" if len(pos.competitors) > 5 else ""
        words += f"; ahead of it for the same GPUs: {named}{more}"
    else:
        words += "; no job ahead competes for the GPUs it could use"
    me = pos.me
    if me is not None:
        words += (
            f"; one pass at t would start it on {me.nodes_words}"
            if me.outcome == STARTS
            else f"; one pass at t would not start it ({me.outcome}{': ' + me.why if me.why else ''})"
        )
    return words + "."


def _lead(ex: JobExplanation) -> list[str]:
    """The diagnosis' answer first: the best supported cause, or "no cause found" with what was checked."""
    supported = [c for c in ex.causes if c["status"] == "supported"]
    if supported:
        return [f"Cause: {supported[0]['statement']}"]
    if ex.pending or ex.containers:
        checked = sorted({c["code"] for c in [*ex.causes, *ex.ruled_out]})
        return [f"No cause found at {hhmm(ex.t)}" + (f" (checked {', '.join(checked)})." if checked else ".")]
    return []
