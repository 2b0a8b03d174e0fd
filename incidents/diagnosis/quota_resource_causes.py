"""A KAI queue's (or department's) CPU or memory quota or limit as the cause of a wait: the job's GPUs are within
quota, but its cores or memory would take the queue past its CPU or memory limit (or, non-preemptible, past its
deserved CPU or memory quota). Said with the existing quota codes (project for the queue, department for the
parent queue), naming the resource, with the numbers the resource-aware action patches
(``actions_quota_resources``).

Pure: reads the ``DiagnosisInput`` only.
"""

from __future__ import annotations

import copy
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis.citations import cite_state
from incidents.diagnosis.quota import QuotaAt
from incidents.diagnosis.resource_quota import LIMIT, Breach, ResourceQuota, show
from incidents.diagnosis.resources import DIMS, WORDS
from incidents.diagnosis.types import (
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


def _lifted(rq: ResourceQuota, lifted: list[Breach]) -> Breach | None:
    """The next bound the job would meet once each of ``lifted`` is raised to exactly what the job needs."""
    trial = copy.deepcopy(rq)
    for b in lifted:
        for bound in trial.bounds:
            if bound.level == b.bound.level and bound.name == b.bound.name:
                d = bound.dims[b.dim]
                if b.kind == LIMIT:
                    d.limit = b.after
                else:
                    d.deserved = b.after
                    if d.limit is not None and d.limit < b.after:
                        d.limit = b.after
    return trial.breach()


def _same(a: Breach, b: Breach) -> bool:
    return (a.bound.level, a.bound.name, a.dim) == (b.bound.level, b.bound.name, b.dim)


def _usage_fact(di: DiagnosisInput, b: Breach, ask: float, ref: Ref) -> Derived:
    """The computed fact the finding cites: the bound, what its members' bound pods request, what the job asks."""
    fmt, held = show(b.dim), b.after - ask
    return Derived(
        kind="resource_quota_usage",
        locator=f"inventory {b.bound.level} {b.bound.name} {WORDS[b.dim]} {b.kind} and its bound pods' requests "
        f"as of {iso(di.t)}",
        content={
            "level": b.bound.level,
            "name": b.bound.name,
            "resource": b.dim,
            "bound": b.kind,
            "held": held,
            "asks": ask,
            "after": b.after,
            "cap": b.cap,
            "members": list(b.bound.members),
        },
        summary=f"{b.words}: its pods hold {fmt(held)}, {ref.label} asks {fmt(ask)}",
        observed_at=di.t,
        entity=Ref(b.bound.level, b.bound.name),
    )


def _what(b: Breach, ask: float, label: str) -> str:
    """What passes what: "queue vision's bound pods request 32 cores of its CPU limit of 40 cores, and …"."""
    fmt, held = show(b.dim), b.after - ask
    bound_words = f"{WORDS[b.dim]} {'limit' if b.kind == LIMIT else 'deserved quota'} of {fmt(b.cap)}"
    if b.kind == LIMIT:
        return (
            f"{b.bound.level} {b.bound.name}'s bound pods request {fmt(held)} of its {bound_words}, and "
            f"{label} asks {fmt(ask)} more: {fmt(b.after)} would pass the limit"
        )
    return (
        f"{label} is non-preemptible; the non-preemptible pods of {b.bound.level} {b.bound.name} request "
        f"{fmt(held)} of its {bound_words}, and the job asks {fmt(ask)} more: {fmt(b.after)} would pass it"
    )


def resource_quota_findings(
    di: DiagnosisInput,
    job: EntityState,
    q: QuotaAt,
    base: list[Cite],
    said_cite: Cite | None,
    since: Any,
) -> list[Finding]:
    """The CPU or memory bound that holds the job (none when no CPU or memory bound does)."""
    rq = q.resources
    b = rq.breach() if rq is not None else None
    if rq is None or b is None:
        return []
    ref, fmt, word = job.ref, show(b.dim), WORDS[b.dim]
    ask = rq.asks[DIMS.index(b.dim)]
    state = di.find("queue", b.bound.name) or (
        di.find("department", b.bound.name) if b.bound.level == "department" else None
    )
    cites: list[Cite] = [base[0], _usage_fact(di, b, ask, ref)]
    if state is not None:
        cites.append(cite_state(state, di.t))
    if said_cite is not None:
        cites.append(said_cite)
    gpu_words = (
        f"Its GPUs are within quota ({q.after:g} of {q.quota:g})"
        if q.quota is not None and q.within_quota
        else "Its GPUs are not what holds it"
    )
    what = _what(b, ask, ref.label)
    then = _lifted(rq, [b])
    also = then if then is not None and _same(then, b) and then.kind != b.kind else None  # its quota too
    if also is not None:
        what += (
            f"; and, {ref.label} being non-preemptible, {fmt(also.after)} of non-preemptible work would pass its "
            f"{word} deserved quota of {fmt(also.cap)} too"
        )
        then = _lifted(rq, [b, also])
    then_words = f"; once raised, {then.words} would hold it next" if then is not None else ""
    scope, named = f"{b.bound.level} {b.bound.name}", f"{word} {'limit' if b.kind == LIMIT else 'quota'}"
    return [
        Finding(
            C.PROJECT_QUOTA_EXHAUSTED if b.bound.level == "queue" else C.DEPARTMENT_QUOTA_EXHAUSTED,
            f"The {named} of {scope} holds {ref.label} at {hhmm(di.t)}: {what}. {gpu_words}{then_words}.",
            SUPPORTED,
            0.9 if said_cite is None else 0.95,
            supports=cites,
            subject=ref,
            sources=("k8s", di.scheduler),
            since=since,
            facts={
                "job": ref,
                "project": q.project,
                "queue": q.queue,
                "department": b.bound.name if b.bound.level == "department" else None,
                "resource": b.dim,
                "bound": b.kind,
                "level": b.bound.level,
                "target": b.bound.name,  # the KAI Queue to patch (a department is its parent queue)
                "members": list(b.bound.members),
                "held": b.after - ask,
                "asks": ask,
                "after": b.after,
                "cap": b.cap,
                "quota_now": b.bound.dims[b.dim].deserved,
                "limit_now": b.bound.dims[b.dim].limit,
                "then": then.words if then is not None else None,
                # the same resource's deserved quota the job passes too (a non-preemptible job past both): raised
                # with the limit, to what the non-preemptible work and the job need
                "also_quota": None if also is None else {"after": also.after, "cap": also.cap},
                "preemptible": q.preemptible,
            },
            next_questions=[
                f"Is {scope}'s {named} of {fmt(b.cap)} still what its workloads need, or should it be raised?"
            ],
        )
    ]


__all__ = ["resource_quota_findings"]
