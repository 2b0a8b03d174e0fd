"""One scheduling pass in queue order: "if this fault were fixed, which waiting jobs would start, and where?"

A counterfactual weighed for one job alone ("it would fit if h100-03's missing GPU were back") is true of every
job that fits in the room the fault took, and one 8-GPU node starts only one of them. The scheduler serves its
waiting jobs in order (queue priority, then priority class, then submission: ``quota.jobs_ahead``), each gang
all or nothing, a job that does not fit is passed over and the next one tried (KAI and Kueue both go on past a
job that does not fit). This module replays that pass over the room the diagnosis sees at t, with the
``lifted`` blockers gone, and says whether the job would start, who would start before it, and its place.

Pure: it reads the ``DiagnosisInput`` and the fit rows, never the database nor the simulator (the simulator
stands in for the real scheduler; this is the product's own reading of it).

Whole GPUs only: a share or a MIG instance is weighed by the fit rules alone (``fit.placeable``), and such
jobs ahead are not counted against whole-GPU room.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from incidents.diagnosis import fit as F
from incidents.diagnosis.quota import QueuedJob, is_pending, jobs_ahead, order_key, quota_at
from incidents.diagnosis.types import DiagnosisInput, EntityState

# Jobs ahead weighed in one pass: the first in order that could use the lifted room. A job behind more than
# this many competitors is not started by the fix either way.
MAX_AHEAD = 64


@dataclass
class Start:
    """A job the pass starts: pods placed per node."""

    job: QueuedJob
    nodes: dict[str, int]

    @property
    def label(self) -> str:
        return self.job.job.ref.label


@dataclass
class PassResult:
    """The outcome for one job of a pass with ``lifted`` blockers gone."""

    starts: bool  # the job itself would start
    nodes: dict[str, int] = field(default_factory=dict)  # where its pods would go, when it starts
    before: list[Start] = field(default_factory=list)  # jobs ahead that would start first, in queue order
    position: int = 1  # the job's place among the waiters that would start with the fix (1 = first)

    @property
    def first(self) -> Start | None:
        return self.before[0] if self.before else None


def whole_gpus(req: F.Request) -> bool:
    return not (req.share or req.share_memory_mib or req.mig) and req.gpus_per_pod > 0


def place(
    rows: list[F.NodeFit], req: F.Request, free: dict[str, int], lifted: frozenset[str]
) -> dict[str, int]:
    """A gang's pods greedily over ``rows`` using the room in ``free`` (all or nothing: {} when they do not all
    fit). Rows with a static blocker that is not lifted take nothing; CPU, memory and MIG limits still apply."""
    placed: dict[str, int] = {}
    want = req.pods
    for row in rows:
        if any(b in F.STATIC_BLOCKERS and b not in lifted for b in row.blockers):
            continue
        here = min(free.get(row.node, 0) // req.gpus_per_pod, want)
        res = row.resource_pods(lifted)
        if res is not None:
            here = min(here, res)
        if here > 0:
            placed[row.node] = here
            want -= here
        if want <= 0:
            return placed
    return {}


def room_if(rows: list[F.NodeFit], lifted: frozenset[str]) -> dict[str, int]:
    """Free whole GPUs per node were the ``lifted`` GPU-side blockers (device plugin, missing GPUs) fixed."""
    return {r.node: r.free_if(set(lifted)) for r in rows}


def pass_if_fixed(
    di: DiagnosisInput,
    job: EntityState,
    req: F.Request,
    rows: list[F.NodeFit],
    lifted: frozenset[str],
    fault_nodes: list[str],
) -> PassResult:
    """Replay the scheduler's pass with ``lifted`` gone: the waiting jobs ahead of ``job`` that could use the
    room on ``fault_nodes`` are served first, in order, each taking its room if its whole gang fits and its
    quota allows it; then ``job`` is tried in what is left."""
    if not whole_gpus(req):
        return PassResult(starts=F.fits(rows, req, lifted))
    free = room_if(rows, lifted)
    before: list[Start] = []
    waiting_ahead = 0
    for queued in jobs_ahead(di, job)[:MAX_AHEAD]:
        other = queued.job
        other_req = F.job_request(di, other)
        if other_req.pods == 0 or not whole_gpus(other_req):
            continue
        if not F.could_gain(di, fault_nodes, other_req):
            continue  # it cannot use the room the fix gives back: not a competitor for it
        held = quota_at(di, other, other_req, sum(free.values()))
        if held is not None and held.holds:
            continue  # its own quota keeps it out whatever the room
        other_rows = F.node_fits(di, other_req)
        if not F.fits(other_rows, other_req, lifted):
            continue  # it would not start even with the fix: it takes nothing
        waiting_ahead += 1
        taken = place(other_rows, other_req, free, lifted)
        if not taken:
            continue
        for node, pods in taken.items():
            free[node] -= pods * other_req.gpus_per_pod
        before.append(Start(queued, taken))
    mine = place(rows, req, free, lifted)
    return PassResult(
        starts=bool(mine),
        nodes=mine,
        before=before,
        position=waiting_ahead + 1,
    )


def starts_with_room(di: DiagnosisInput, gained: dict[str, int], freed: bool = False) -> list[str]:
    """The waiting jobs that would start, in the cluster's order, if ``gained`` GPUs per node became free (a GPU
    repaired: more allocatable; ``freed``: pods released them), each taking its room: one 8-GPU node starts one
    8-GPU job, not every job that would fit there alone. Only jobs that could use those nodes are weighed
    (``fit.could_gain``); a job that fits already, or whose own quota holds it, takes nothing."""
    if not gained:
        return []
    waiting = [j for j in di.jobs if is_pending(j)]
    free: dict[str, int] | None = None
    started: list[str] = []
    for job in sorted(waiting, key=lambda j: order_key(di, j)):
        req = F.job_request(di, job)
        if req.pods == 0 or not whole_gpus(req) or not F.could_gain(di, gained, req):
            continue
        rows = F.node_fits(di, req)
        if F.fits(rows, req):
            continue  # it fits already: the room changes nothing for it
        if free is None:  # node room is the same whoever asks: read once, with the gain
            free = {}
            for r in rows:
                extra = gained.get(r.node, 0)
                if freed:
                    free[r.node] = max(r.allocatable - max(r.allocated - extra, 0), 0)
                else:
                    top = min(r.allocatable + extra, max(r.capacity, r.nominal))
                    free[r.node] = max(top - r.allocated, 0)
        held = quota_at(di, job, req, sum(free.values()))
        if held is not None and held.holds:
            continue
        taken = place(rows, req, free, frozenset())
        if not taken:
            continue
        for node, pods in taken.items():
            free[node] -= pods * req.gpus_per_pod
        started.append(job.ref.label)
    return started


__all__ = [
    "MAX_AHEAD",
    "PassResult",
    "Start",
    "pass_if_fixed",
    "place",
    "room_if",
    "starts_with_room",
    "whole_gpus",
]
