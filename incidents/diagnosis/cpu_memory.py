"""CPU and memory as causes of a GPU job's wait: GPUs free only on nodes whose unrequested CPU or memory
cannot take the job's pods, or the scheduler reporting it while the pods' requests are not recorded."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.quantities import format_cpu, format_memory
from incidents.diagnosis.request import Request
from incidents.diagnosis.types import (
    SUPPORTED,
    Cite,
    DiagnosisInput,
    Finding,
)


def _missing(r: F.NodeFit, req: Request) -> list[str]:
    """What one more pod of the job lacks on the node: "6 cores (2 of 95 free)", "40 GiB memory (…)"."""
    out = []
    if r.cpu_pods == 0 and req.cpu_per_pod and r.cpu_free is not None:
        out.append(
            f"{format_cpu(req.cpu_per_pod - r.cpu_free)} CPU short "
            f"({format_cpu(r.cpu_free)} of {format_cpu(r.cpu_allocatable or 0)} unrequested)"
        )
    if r.memory_pods == 0 and req.memory_per_pod and r.memory_free is not None:
        out.append(
            f"{format_memory(req.memory_per_pod - r.memory_free)} memory short "
            f"({format_memory(r.memory_free)} of {format_memory(r.memory_allocatable or 0)} unrequested)"
        )
    return out


# length: one finding read top to bottom (the rows, cause or contributing, its wording and facts)
def cpu_memory_finding(
    di: DiagnosisInput,
    ref: Any,
    req: Request,
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
            format_cpu(req.cpu_per_pod) + " CPU" if req.cpu_per_pod else "",
            format_memory(req.memory_per_pod) + " memory" if req.memory_per_pod else "",
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
    req: Request,
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
