"""The queue replayed forward from t on the room alone: the ETA's engine (``incidents.diagnosis.eta``).

A full scheduling pass per step costs a pass over every node for each request shape (about a second at 1,213
nodes), and an ETA needs a step per group of ends. The replay instead reads the pass at t once: the jobs it
starts run from t; the waiting jobs that matter to the one asked about (ahead of it in the pass's order and able
to use one of its nodes, or charged to the same queue, project or department) keep that order; their fit rows
(static blockers, selectors, taints) are built once per request shape. Each step then frees the GPUs of the jobs
that end, takes them off their queue's (and department's) allocation, and places the waiting jobs in order in
the whole GPUs left (``scheduling_pass.place``), each within its quota and limit; the jobs it starts run from
then on, their own expected end joining the list.

What it leaves out, said where the answer is shown: the order is the pass's at t (KAI's fair share is not
re-weighed as allocations move), CPU and memory are not counted (the GPUs of a node that frees are its room),
and shares and MIG instances take no whole-GPU room (a share or MIG job's start is not replayed).
Pure: no database, no simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from incidents.diagnosis import fit as F
from incidents.diagnosis.quota import QuotaAt, pod_units, quota_at
from incidents.diagnosis.scheduling_pass import (
    BLOCKED_FIFO,
    NO_ROOM,
    QUOTA,
    ClusterPass,
    Considered,
    charge_started,
    place,
)
from incidents.diagnosis.types import DiagnosisInput, EntityState, iso

if TYPE_CHECKING:
    from incidents.diagnosis.eta import End

MAX_STEPS = 48  # groups of ends per replay
BUCKET = timedelta(minutes=10)  # ends this close together are one step
HORIZON = timedelta(days=7)
GPUS_ONLY = frozenset({F.CPU_MEMORY})  # ``place``: count GPUs (and MIG), not CPU and memory


@dataclass
class Waiter:
    """A waiting job the replay places: its request, its fit rows and its quota as the pass at t read them."""

    job: EntityState
    req: F.Request
    rows: list[F.NodeFit]
    quota: QuotaAt | None
    key: tuple[str, str]  # (project, queue) its starts are charged to


@dataclass
class Holder:
    """A running job: the whole GPUs its pods hold per node, and what it is charged."""

    job: EntityState
    gpus: dict[str, int]
    units: float
    key: tuple[str, str]


@dataclass
class Room:
    """What the replay reads of the state at t, built once (``build``)."""

    t: datetime
    me: Waiter
    waiting: list[Waiter]  # ahead of ``me`` in the pass's order, and that matter to it
    free: dict[str, int]  # whole GPUs free per node once the pass at t has served its starts
    holders: dict[str, Holder]  # running jobs by label (those the pass at t starts included)
    usable: frozenset[str]  # the nodes ``me`` could use


@dataclass
class Run:
    at: datetime | None = None
    why: str = ""
    ended: list[End] = field(default_factory=list)  # ends that freed the room it and the jobs before it took,
    # or its quota
    started: list[str] = field(default_factory=list)  # jobs ahead the replay starts before it
    steps: int = 0


def build(di: DiagnosisInput, job: EntityState, base: ClusterPass) -> Room | None:
    """The room at t and the waiting jobs that matter, or None when ``job`` is not a whole-GPU job the pass
    reached. Call inside ``di.indexed()``."""
    me_c = base.find(job.namespace, job.name)
    if me_c is None or not me_c.whole:
        return None
    shapes: dict[tuple[Any, ...], list[F.NodeFit]] = {}

    def waiter(c: Considered) -> Waiter:
        req = F.job_request(di, c.job)
        key = (
            req.gpus_per_pod,
            tuple(sorted(req.node_selector.items())),
            repr(req.tolerations),
            tuple(req.mig),
        )
        if key not in shapes:
            shapes[key] = [
                r for r in F.node_fits(di, req) if not any(b in F.STATIC_BLOCKERS for b in r.blockers)
            ]
        q = quota_at(di, c.job, req, 0)
        return Waiter(c.job, req, shapes[key], q, (c.project, c.queue))

    me = waiter(me_c)
    dept = me.quota.department.projects if me.quota is not None and me.quota.department is not None else {}
    waiting = [
        waiter(c)
        for c in base.considered[: me_c.order - 1]
        if c.whole
        and c.outcome in (NO_ROOM, QUOTA, BLOCKED_FIFO)
        and (
            c.usable & me_c.usable or c.queue == me_c.queue or c.project == me_c.project or c.project in dept
        )
    ]
    started: dict[tuple[str, str], float] = {}
    for c in base.starts:
        started[(c.project, c.queue)] = started.get((c.project, c.queue), 0.0) + c.units
    for w in [me, *waiting]:
        if w.quota is not None:
            charge_started(w.quota, started)  # what the pass at t starts is charged before the replay begins
    free: dict[str, int] = {}
    for rows in shapes.values():
        for r in rows:
            free.setdefault(r.node, r.free)
    holders: dict[str, Holder] = {}
    for p in di.pods:
        if not p.get("node") or p.get("phase") not in ("Running", "Pending") or not p.get("job"):
            continue
        j = di.find("job", p.get("job"), p.namespace)
        if j is None:
            continue
        h = holders.setdefault(
            j.ref.label,
            Holder(j, {}, 0.0, (j.get("project") or "", j.get("queue") or j.get("project") or "")),
        )
        h.gpus[p.get("node")] = h.gpus.get(p.get("node"), 0) + int(p.get("gpus") or 0)
        h.units += pod_units(p)
    for c in base.starts:
        per = int(round(c.units / max(sum(c.nodes.values()), 1))) if c.whole else 0
        taken = {n: pods * per for n, pods in c.nodes.items()}
        for n, g in taken.items():
            free[n] = max(free.get(n, 0) - g, 0)
        holders[c.label] = Holder(_running(c.job, di.t), taken, c.units, (c.project, c.queue))
    return Room(di.t, me, waiting, free, holders, me_c.usable)


def _running(job: EntityState, when: datetime) -> EntityState:
    return replace(job, state={**job.state, "phase": "Running", "started": iso(when)}, valid_from=when)


def replay(
    room: Room, ends: list[End], end_of: Callable[[EntityState, datetime], End | None], *, late: bool
) -> Run:
    """Step through ``ends`` (early or late) until ``room.me`` is placed (module doc)."""
    run = Run()
    at = (lambda e: e.hi) if late else (lambda e: e.lo)
    pending = sorted(ends, key=lambda e: (at(e), e.label))
    free = dict(room.free)
    delta: dict[tuple[str, str], float] = {}
    waiting = list(room.waiting)
    related = quota_keys_projects(room.me)
    freed_by: dict[str, tuple[End, set[str]]] = {}
    used: set[str] = set()
    while pending and run.steps < MAX_STEPS:
        first = at(pending[0])
        if first > room.t + HORIZON:
            break
        step = [e for e in pending if at(e) <= first + BUCKET]
        pending = pending[len(step) :]
        when = max(at(e) for e in step)
        run.steps += 1
        for e in step:
            h = room.holders.pop(e.label, None)
            if h is None:
                continue
            for node, gpus in h.gpus.items():
                free[node] = free.get(node, 0) + gpus
            delta[h.key] = delta.get(h.key, 0.0) - h.units
            if h.key[0] in related or h.key[1] in related:
                run.ended.append(e)
            elif set(h.gpus) & room.usable:
                freed_by.setdefault(e.label, (e, set(h.gpus)))
        for w in [*waiting, room.me]:
            if w.quota is not None and _held(w.quota, delta):
                continue
            taken = place(w.rows, w.req, free, GPUS_ONLY)
            if not taken:
                continue
            used.update(taken)
            if w is room.me:
                run.at = when
                # the ends that made the room taken since t (by it and by the jobs that started before it)
                run.ended += [e for e, nodes in freed_by.values() if nodes & used]
                run.ended.sort(key=lambda e: (at(e), e.label))
                return run
            for node, pods in taken.items():
                free[node] -= pods * w.req.gpus_per_pod
            delta[w.key] = delta.get(w.key, 0.0) + w.req.units
            waiting.remove(w)
            run.started.append(w.job.ref.label)
            started = _running(w.job, when)
            room.holders[started.ref.label] = Holder(
                started, {n: p * w.req.gpus_per_pod for n, p in taken.items()}, w.req.units, w.key
            )
            expected = end_of(started, when)
            if expected is not None:
                pending.append(expected)
        pending.sort(key=lambda e: (at(e), e.label))
    if not pending:
        run.why = "once every running job with an expected end has ended, the replay still does not place it"
    else:
        run.why = f"it does not start within the next {MAX_STEPS} foreseeable groups of ends"
    return run


def quota_keys_projects(w: Waiter) -> set[str]:
    """The projects whose usage counts against ``w``'s quota: its own, and its department's."""
    out = {w.key[0], w.key[1]}
    if w.quota is not None and w.quota.department is not None:
        out.update(w.quota.department.projects)
    return out


def _held(q: QuotaAt, delta: dict[tuple[str, str], float]) -> bool:
    """Whether the quota read at t, moved by the replay's ends and starts, holds the job."""
    moved = replace(q, department=replace(q.department) if q.department is not None else None)
    charge_started(moved, delta)
    return moved.holds


__all__ = ["BUCKET", "HORIZON", "MAX_STEPS", "Room", "Run", "build", "replay"]
