"""The job's own request as a cause of its wait: a request that grew past what fits, from its history."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.citations import cite_change, cite_state
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.request import Request, request_history
from incidents.diagnosis.totals import totals
from incidents.diagnosis.types import (
    SUPPORTED,
    Cite,
    Derived,
    DiagnosisInput,
    EntityState,
    Finding,
    hhmm,
    iso,
)


#
# Request history
#
def request_findings(
    di: DiagnosisInput, job: EntityState, req: Request, rows: list[F.NodeFit], since: Any
) -> list[Finding]:
    hist = request_history(di, job)
    if len(hist) < 2:
        return []
    prev, cur = hist[-2], hist[-1]
    if cur["gpus_total"] <= prev["gpus_total"] and cur["gpus_per_pod"] <= prev["gpus_per_pod"]:
        return []
    ref = job.ref
    old_req = Request(
        pods=prev["pods"],
        gpus_per_pod=prev["gpus_per_pod"],
        node_selector=req.node_selector,
        tolerations=req.tolerations,
        preemptible=req.preemptible,
    )
    old_fits = F.fits(rows, old_req)
    q_old = quota_at(di, job, old_req, totals(rows).eligible_free)
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
