"""Shrink a waiting job's request to what fits: the largest whole-GPU shape, share or MIG profile the room left by
the pass at t takes (``incidents.diagnosis.edits``'s "shrink" answers).

Pure: no database, no simulator.
"""

from __future__ import annotations

import math
from dataclasses import replace

from incidents.diagnosis import fit as F
from incidents.diagnosis.request import Request
from incidents.diagnosis.scheduling_pass import ClusterPass, Considered, place
from incidents.diagnosis.types import DiagnosisInput, EntityState
from incidents.diagnosis.whatif_edits import MAX_GPUS_PER_POD, Edit
from rcaweb.mig import mig_units


def static(r: F.NodeFit) -> set[str]:
    return {b for b in r.blockers if b in F.STATIC_BLOCKERS}


def free_after(base: ClusterPass, rows: list[F.NodeFit], me: Considered) -> dict[str, int]:
    """Free whole GPUs per node once the pass has served the jobs before ``me``."""
    free = {r.node: r.free for r in rows}
    for c in base.starts:
        if c.order >= me.order or not c.whole:
            continue
        per = int(round(c.units / max(sum(c.nodes.values()), 1)))
        for node, pods in c.nodes.items():
            if node in free:
                free[node] = max(free[node] - pods * per, 0)
    return free


def shrink_candidates(
    di: DiagnosisInput,
    job: EntityState,
    req: Request,
    rows: list[F.NodeFit],
    me: Considered,
    base: ClusterPass,
) -> list[tuple[str, list[Edit], str]]:
    pods = req.pods + req.bound_pods
    if req.mig:
        return _shrink_mig(job, req, rows, pods)
    if req.share or req.share_memory_mib:
        return _shrink_share(job, req, rows, pods)
    if req.gpus_per_pod <= 0 or req.bound_pods:
        return []
    free = free_after(base, rows, me)
    open_rows = [r for r in rows if not static(r)]
    best: tuple[int, int] | None = None  # (pods, gpus per pod)
    for per in sorted({g for g in (req.gpus_per_pod, 8, 4, 2, 1) if g <= min(req.gpus_per_pod, MAX_GPUS_PER_POD)},
                      reverse=True):  # fmt: skip
        want = req.pods * req.gpus_per_pod // per
        trial = replace(req, pods=want, gpus_per_pod=per)
        took = place(open_rows, trial, dict(free), frozenset())
        n = sum(took.values()) if took else _most_pods(open_rows, trial, free)
        if n <= 0:
            continue
        if (per, n) == (req.gpus_per_pod, req.pods):
            continue  # that is the request itself
        if best is None or n * per > best[0] * best[1]:
            best = (n, per)
    if best is None:
        return []
    n, per = best
    edit = Edit("request", job.name, job.namespace, number=n, gpus=per)
    return [("shrink", [edit], f"shrink to {n} pod(s) × {per} GPU{'s' if per != 1 else ''} (from "
             f"{req.pods} × {req.gpus_per_pod})")]  # fmt: skip


def _most_pods(rows: list[F.NodeFit], req: Request, free: dict[str, int]) -> int:
    """How many of ``req``'s pods the room takes (a gang smaller than asked)."""
    n = 0
    for r in rows:
        here = free.get(r.node, 0) // max(req.gpus_per_pod, 1)
        res = r.resource_pods()
        n += min(here, res) if res is not None else here
    return min(n, req.pods)


def _shrink_share(
    job: EntityState, req: Request, rows: list[F.NodeFit], pods: int
) -> list[tuple[str, list[Edit], str]]:
    """The largest share, in hundredths, that what is left of the shared GPUs it may use takes, pods × that."""
    if not req.share:
        return []  # a gpu-memory share: the fraction edit would change its kind
    left = sorted((x["free"] for r in rows if not static(r) for x in r.shared if x["free"] > 0), reverse=True)
    if len(left) < 1:
        return []
    share = math.floor(left[min(pods, len(left)) - 1] * 100) / 100 if len(left) >= pods else 0.0
    if not 0 < share < req.share:
        return []
    edit = Edit("request", job.name, job.namespace, number=pods, share=share)
    return [("shrink", [edit], f"shrink its share to {share:g} of a GPU (from {req.share:g})")]


def _shrink_mig(
    job: EntityState, req: Request, rows: list[F.NodeFit], pods: int
) -> list[tuple[str, list[Edit], str]]:
    """The largest MIG profile smaller than the one asked that has a free instance per pod on the nodes it may
    use."""
    asked = max(req.mig, key=mig_units)
    free: dict[str, int] = {}
    for r in rows:
        if static(r):
            continue
        for prof in r.mig_layout:
            n = r.mig_free(prof)
            if n > 0 and mig_units(prof) < mig_units(asked):
                free[prof] = free.get(prof, 0) + n
    fitting = [p for p, n in free.items() if n >= pods]
    if not fitting:
        return []
    prof = max(fitting, key=lambda p: (mig_units(p), p))
    edit = Edit("request", job.name, job.namespace, number=pods, profile=prof)
    return [("shrink", [edit], f"shrink to MIG {prof} (from {asked})")]


__all__ = ["free_after", "shrink_candidates", "static"]
