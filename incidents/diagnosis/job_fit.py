"""One waiting job's fit at t: its fit table over every GPU node, the totals, what the scheduler said of it
and whether its quota holds it; what every scheduling rule reads (``JobFit``), and the causes found so far
(``Causes``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.citations import cite_state
from incidents.diagnosis.pending import first_pending_since
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.request import Request
from incidents.diagnosis.scheduler_words import said_codes, scheduler_said
from incidents.diagnosis.totals import Totals, totals
from incidents.diagnosis.types import Cite, Derived, DiagnosisInput, EntityState, Finding, Ref, hhmm, iso


@dataclass
class JobFit:
    """One waiting job's fit at t and what the scheduler said of it: what every rule of ``check_job`` reads."""

    job: EntityState
    req: Request
    rows: list[F.NodeFit]
    tot: Totals
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


def job_fit(di: DiagnosisInput, job: EntityState, req: Request) -> JobFit:
    """The fit table of the job at t, its totals, the scheduler's words and whether the quota holds it."""
    rows = F.node_fits(di, req)
    tot = totals(rows)
    parsed, said_cite = scheduler_said(di, job)
    said = said_codes(parsed)
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


def fit_table_fact(
    di: DiagnosisInput, job: EntityState, req: Request, rows: list[F.NodeFit], tot: Totals
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
