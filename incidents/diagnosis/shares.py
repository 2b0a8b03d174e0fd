"""GPU shares (KAI fractions or GPU memory) as causes of a wait: no shared GPU has the share free and no
whole GPU is free for a new one, in the words the pages use for a share."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.request import Request
from incidents.diagnosis.types import (
    REFUTED,
    SUPPORTED,
    Cite,
    DiagnosisInput,
    Finding,
)


#
# GPU shares (KAI gpu-fraction / gpu-memory)
#
def share_words(req: Request) -> str:
    if req.share:
        return f"{req.share:g} of a GPU"
    return f"{(req.share_memory_mib or 0) / 1024:g} GiB of GPU memory"


# length: two findings read top to bottom (fragmentation or capacity, and the other refuted), their wording
def share_capacity_findings(
    di: DiagnosisInput,
    ref: Any,
    req: Request,
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
