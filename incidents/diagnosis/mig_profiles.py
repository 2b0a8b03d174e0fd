"""MIG profiles as causes of a wait: no usable node advertises a free instance of the profile a pod asks
for, and which MIG-capable nodes a repartition could give it, with the pods it would evict."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.request import Request
from incidents.diagnosis.types import (
    SUPPORTED,
    Cite,
    DiagnosisInput,
    Finding,
)


# length: one finding read top to bottom (instances per usable node, then the wording of each case)
def mig_finding(
    di: DiagnosisInput,
    ref: Any,
    req: Request,
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
