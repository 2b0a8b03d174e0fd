"""A fault's fix as a scheduling pass: "if this fault were fixed, which waiting jobs would start, and where?"

A counterfactual weighed for one job alone ("it would fit if h100-03's missing GPU were back") is true of every
job that fits in the room the fault took, and one 8-GPU node starts only one of them. The scheduler serves its
waiting jobs in order (``queue_order.QueueOrder``: KAI's fair share, Kueue's queueing strategies), each gang
all or nothing, a job that does not fit is passed over and the next one tried (KAI and Kueue both go on past a
job that does not fit), but a Kueue StrictFIFO queue stops at a head it cannot admit. This module replays that
pass over the room the diagnosis sees at t, with the ``lifted`` blockers gone, and says whether the job would
start, who would start before it, and its place (``pass_if_fixed``); and which waiting jobs given-back room
would start, for an action's impact (``starts_with_room``).

Pure: it reads the ``DiagnosisInput`` and the fit rows, never the database nor the simulator (the simulator
stands in for the real scheduler; this is the product's own reading of it).

Whole GPUs only: a share or a MIG instance is weighed by the fit rules alone (``fit.placeable``), and such
jobs ahead are not counted against whole-GPU room.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from incidents.diagnosis import fit as F
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.precedence import QueuedJob, queue_priority_of
from incidents.diagnosis.queue_order import QueueOrder, job_queue, strict_fifo
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.scheduling_pass import place, request_shape, whole_gpus
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
    # Kueue StrictFIFO: the head of the job's own queue that would still not be admitted with the fix, and why;
    # every job behind it waits, whatever room the fix gives back.
    blocked_by: QueuedJob | None = None
    blocked_why: str = ""

    @property
    def first(self) -> Start | None:
        return self.before[0] if self.before else None


def room_if(rows: list[F.NodeFit], lifted: frozenset[str]) -> dict[str, int]:
    """Free whole GPUs per node were the ``lifted`` GPU-side blockers (device plugin, missing GPUs) fixed."""
    return {r.node: r.free_if(set(lifted)) for r in rows}


def pass_if_fixed(
    di: DiagnosisInput,
    job: EntityState,
    req: Request,
    rows: list[F.NodeFit],
    lifted: frozenset[str],
    fault_nodes: list[str],
) -> PassResult:
    """Replay the scheduler's pass with ``lifted`` gone: the waiting jobs ahead of ``job`` in the cluster's order
    (:class:`~incidents.diagnosis.queue_order.QueueOrder`) that could use the room on ``fault_nodes`` are served
    first, each taking its room if its whole gang fits and its quota allows it; then ``job`` is tried in what
    is left. A StrictFIFO queue whose head would still not be admitted holds every job behind it (Kueue):
    then ``job`` does not start, and ``blocked_by`` names that head when it is ``job``'s own queue's."""
    if not whole_gpus(req):
        return PassResult(starts=F.fits(rows, req, lifted))
    free = room_if(rows, lifted)
    before: list[Start] = []
    waiting_ahead = 0
    waiting = [j for j in di.jobs if is_pending(j) and not _same(j, job)]
    order = QueueOrder(di, [*waiting, job])
    shapes: dict[
        tuple[Any, ...], list[F.NodeFit]
    ] = {}  # fit rows per request shape (pods included), built once
    heads: dict[str, tuple[EntityState, str]] = {}  # a blocked StrictFIFO queue -> its head and why
    for seen, other in enumerate(order):
        if _same(other, job) or seen >= MAX_AHEAD:
            break  # a job behind more than MAX_AHEAD others is not started by the fix either way
        name = job_queue(other)
        if order.is_blocked(name):
            continue  # behind its StrictFIFO queue's head: it neither starts nor takes room
        taken, fits = _serve_ahead(di, other, free, lifted, fault_nodes, shapes)
        if not taken and strict_fifo(di, name):
            why = _not_admitted(di, other, free, lifted, shapes)
            if why:
                order.block(name)
                heads[name] = (other, why)
        if not fits:
            continue
        waiting_ahead += 1
        if not taken:
            continue
        other_req = job_request(di, other)
        for node, pods in taken.items():
            free[node] -= pods * other_req.gpus_per_pod
        order.charge(other, other_req.units)
        queued = QueuedJob(
            other,
            job_queue(other),
            queue_priority_of(di, job_queue(other)),
            other.get("priority_class") or "",
            other.get("submitted") or "",
            round(other_req.units, 4),
            order.why_before(other, job),
        )
        before.append(Start(queued, taken))
    head = heads.get(job_queue(job))
    if head is not None:
        other, why = head
        return PassResult(
            starts=False,
            before=before,
            position=waiting_ahead + 1,
            blocked_by=_queued(di, order, other, job),
            blocked_why=why,
        )
    mine = place(rows, req, free, lifted)
    return PassResult(starts=bool(mine), nodes=mine, before=before, position=waiting_ahead + 1)


def _queued(di: DiagnosisInput, order: QueueOrder, other: EntityState, job: EntityState) -> QueuedJob:
    q = job_queue(other)
    return QueuedJob(
        other,
        q,
        queue_priority_of(di, q),
        other.get("priority_class") or "",
        other.get("submitted") or "",
        round(job_request(di, other).units, 4),
        order.why_before(other, job),
    )


def _not_admitted(
    di: DiagnosisInput,
    other: EntityState,
    free: dict[str, int],
    lifted: frozenset[str],
    shapes: dict[tuple[Any, ...], list[F.NodeFit]],
) -> str:
    """Why a StrictFIFO queue's head would still not be admitted in this pass ("" when it would be, on room the
    fix does not touch): its own quota, or no room for its whole gang."""
    other_req = job_request(di, other)
    if other_req.pods == 0:
        return ""  # its pods are bound: it waits on its containers, not on admission
    held = quota_at(di, other, other_req, sum(free.values()))
    if held is not None and held.holds:
        return held.reason
    if not whole_gpus(other_req):
        return "" if F.fits(F.node_fits(di, other_req), other_req, lifted) else "no room for it"
    key = request_shape(other_req, whole=False)
    if key not in shapes:
        shapes[key] = F.node_fits(di, other_req)
    return "" if place(shapes[key], other_req, free, lifted) else "no room for it"


def _same(a: EntityState, b: EntityState) -> bool:
    return a is b or (a.name == b.name and a.namespace == b.namespace and a.kind == b.kind)


def _serve_ahead(
    di: DiagnosisInput,
    other: EntityState,
    free: dict[str, int],
    lifted: frozenset[str],
    fault_nodes: list[str],
    shapes: dict[tuple[Any, ...], list[F.NodeFit]],
) -> tuple[dict[str, int], bool]:
    """What a waiting job ahead takes of ``free`` (its placement), and whether it competes for the room at all:
    whole GPUs, able to use the fault's nodes, not held by its own quota, and able to start with the fix."""
    other_req = job_request(di, other)
    if other_req.pods == 0 or not whole_gpus(other_req):
        return {}, False
    if not F.could_gain(di, fault_nodes, other_req):
        return {}, False  # it cannot use the room the fix gives back: not a competitor for it
    held = quota_at(di, other, other_req, sum(free.values()))
    if held is not None and held.holds:
        return {}, False  # its own quota keeps it out whatever the room
    key = request_shape(
        other_req, whole=False
    )  # the rows read the room at t, the same for every job of a shape
    if key not in shapes:
        shapes[key] = F.node_fits(di, other_req)
    other_rows = shapes[key]
    if not F.fits(other_rows, other_req, lifted):
        return {}, False  # it would not start even with the fix: it takes nothing
    return place(other_rows, other_req, free, lifted), True


def starts_with_room(
    di: DiagnosisInput, gained: dict[str, int], freed: bool = False, lifted: frozenset[str] = frozenset()
) -> list[str]:
    """The waiting jobs that would start, in the cluster's order, if ``gained`` GPUs per node became free (a GPU
    repaired: more allocatable; ``freed``: pods released them) or the ``lifted`` static blockers went (an
    uncordon: ``{node: 0}`` with ``CORDONED`` lifted), each taking its room: one 8-GPU node starts one 8-GPU
    job, not every job that would fit there alone. Only jobs that could use those nodes are weighed
    (``fit.could_gain``); a job that fits already, or whose own quota holds it, takes nothing. A StrictFIFO
    queue's head that does not start holds the jobs behind it."""
    if not gained:
        return []
    free: dict[str, int] | None = None
    started: list[str] = []
    order = QueueOrder(di, [j for j in di.jobs if is_pending(j)])
    strict_queues: dict[str, bool] = {}  # queue -> StrictFIFO, read once per queue
    for job in order:
        if free is not None and all(free.get(n, 0) <= 0 for n in gained):
            break  # the room given back is taken: nobody further in line starts because of it
        name = job_queue(job)
        if order.is_blocked(name):
            continue  # behind its StrictFIFO queue's head, which the room does not start
        if name not in strict_queues:
            strict_queues[name] = strict_fifo(di, name)
        strict = strict_queues[name]
        req = job_request(di, job)
        if req.pods == 0 or not whole_gpus(req):
            continue
        if not F.could_gain(di, gained, req, lifted):
            if strict and not F.fits(F.node_fits(di, req), req):
                order.block(name)  # a head the room cannot start holds its queue
            continue
        rows = F.node_fits(di, req)
        if F.fits(rows, req):
            continue  # it fits already: the room changes nothing for it
        if free is None:  # node room is the same whoever asks: read once, with the gain
            free = _room_with(rows, gained, freed)
            for r in rows:  # a blocker is lifted on the nodes named only: another cordoned node stays shut
                if r.node not in gained and any(b in lifted for b in r.blockers):
                    free[r.node] = 0
        held = quota_at(di, job, req, sum(free.values()))
        taken = {} if held is not None and held.holds else place(rows, req, free, lifted)
        if not taken:
            if strict:
                order.block(name)
            continue
        for node, pods in taken.items():
            free[node] -= pods * req.gpus_per_pod
        order.charge(job, req.units)
        started.append(job.ref.label)
    return started


def _room_with(rows: list[F.NodeFit], gained: dict[str, int], freed: bool) -> dict[str, int]:
    free: dict[str, int] = {}
    for r in rows:
        extra = gained.get(r.node, 0)
        if freed:
            free[r.node] = max(r.allocatable - max(r.allocated - extra, 0), 0)
        else:
            top = min(r.allocatable + extra, max(r.capacity, r.nominal))
            free[r.node] = max(top - r.allocated, 0)
    return free


__all__ = [
    "MAX_AHEAD",
    "PassResult",
    "Start",
    "pass_if_fixed",
    "room_if",
    "starts_with_room",
]
