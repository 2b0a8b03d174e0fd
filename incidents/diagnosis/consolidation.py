"""KAI's consolidation: running jobs moved, not evicted, so that a waiting job starts.

When no eviction lets a whole-GPU job in (``reclaim.victims``), KAI may move running preemptible jobs instead:
each is evicted and placed again elsewhere, so their queues hold what they held, and the job takes the room
they leave. The lowest-priority jobs are tried first (KAI takes its victims in its job order reversed), then
the smallest, then the newest, until the job and every moved job fit; a
job its own quota holds is not helped, nor a job asking GPU shares or MIG instances.

Pure: reads the ``DiagnosisInput``; no database, no simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

from incidents.diagnosis import fit as F
from incidents.diagnosis.allocation import ACTIVE_POD_PHASES
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.precedence import job_rank
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.reclaim import held_units, preemptible, without
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.scheduling_pass import place
from incidents.diagnosis.types import DiagnosisInput, EntityState


@dataclass
class Consolidation:
    """Running jobs KAI would move, each to its new nodes, and where the waiting job then goes."""

    moves: list[tuple[EntityState, dict[str, int]]]  # (moved job, node -> its pods there)
    nodes: dict[str, int]  # node -> pods of the waiting job


def consolidation(di: DiagnosisInput, job: EntityState) -> Consolidation | None:
    """The running jobs KAI would move so that the waiting whole-GPU ``job`` starts (module doc), or None."""
    req = job_request(di, job)
    if req.pods == 0 or req.share or req.share_memory_mib or req.mig or req.gpus_per_pod <= 0:
        return None
    quota = quota_at(di, job, req, 0)
    if quota is not None and quota.holds:
        return None
    movable = [
        j
        for j in di.jobs
        if j is not job and not is_pending(j) and held_units(di, j) and preemptible(di, j) and _whole(di, j)
    ]
    movable.sort(
        key=lambda j: (
            job_rank(j),
            sum(held_units(di, j).values()),
            tuple(-ord(c) for c in (j.get("submitted") or "")),
        )
    )
    taken: list[EntityState] = []
    for other in movable:
        taken.append(other)
        view = without(di, taken)
        rows = _open_rows(view, req)
        free = {r.node: r.free for r in rows}
        mine = place(rows, req, free, frozenset())
        if not mine:
            continue
        for node, pods in mine.items():
            free[node] -= pods * req.gpus_per_pod
        moves = []
        for moved in taken:
            moved_req = job_request(view, moved)
            there = place(_open_rows(view, moved_req), moved_req, free, frozenset())
            if not there:
                break
            for node, pods in there.items():
                free[node] -= pods * moved_req.gpus_per_pod
            moves.append((moved, there))
        else:
            if all(there != _pods_per_node(di, moved) for moved, there in moves):
                return Consolidation(moves, mine)
    return None


def _whole(di: DiagnosisInput, job: EntityState) -> bool:
    r = job_request(di, job)
    return not (r.share or r.share_memory_mib or r.mig) and r.gpus_per_pod > 0


def _open_rows(di: DiagnosisInput, req: Request) -> list[F.NodeFit]:
    return [r for r in F.node_fits(di, req) if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]


def _pods_per_node(di: DiagnosisInput, job: EntityState) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in di.pods_of_job(job):
        if p.get("node") and p.get("phase") in ACTIVE_POD_PHASES:
            out[p.get("node")] = out.get(p.get("node"), 0) + 1
    return out


__all__ = ["Consolidation", "consolidation"]
