"""The queue replayed forward from t on the room alone: which waiting jobs start, when and where, as the running
jobs end. The engine of the ETA (``incidents.diagnosis.eta``) and of "which jobs start within the hour".

The pass at t (``scheduling_pass.cluster_pass``) answers what the free room starts now. A scheduler runs its own
pass every few seconds, so by the time the inventory is read it has usually taken that room: what starts next
is what the running jobs' ends give back. One replay serves every waiting job at once: it reads the pass at t
once (the jobs it starts run from t; the others wait in its order, with their fit rows, built once per request
shape, and their quota as read at t), then steps through the running jobs' expected ends in time order. Each step
frees the GPUs of the jobs that end, takes them off their queue's (and department's) allocation, and serves the
waiting jobs in order in the whole GPUs left (``scheduling_pass.place``), each within its quota and limit, a
StrictFIFO queue's head blocking the jobs behind it; the jobs it starts run from then on, their own expected end
joining the list.

What it leaves out, said where the answer is shown: the order is the pass's at t (KAI's fair share is not
re-weighed as allocations move), CPU and memory are not counted (the GPUs of a node that frees are its room),
shares and MIG instances take no whole-GPU room (a share or MIG job's start is not replayed), and no job is
reclaimed or preempted. Pure: no database, no simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from incidents.diagnosis import fit as F
from incidents.diagnosis.allocation import pod_units
from incidents.diagnosis.node_resources import allocated_on
from incidents.diagnosis.queue_order import strict_fifo
from incidents.diagnosis.quota import QuotaAt, quota_at
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.scheduling_pass import (
    BLOCKED_FIFO,
    NO_ROOM,
    QUOTA,
    ClusterPass,
    Considered,
    charge_started,
    place,
)
from incidents.diagnosis.types import DiagnosisInput, EntityState, gpus_of, iso

if TYPE_CHECKING:
    from incidents.diagnosis.durations import End

MAX_STEPS = 96  # groups of ends per replay
BUCKET = timedelta(minutes=2)  # ends this close together are one step
HORIZON = timedelta(days=7)
GPUS_ONLY = frozenset({F.CPU_MEMORY})  # ``place``: count GPUs (and MIG), not CPU and memory
WAITING = (NO_ROOM, QUOTA, BLOCKED_FIFO)  # the pass's outcomes the replay may still start


@dataclass
class Waiter:
    """A waiting job the replay places: its request, the nodes it could use and its quota as the pass at t read
    them."""

    c: Considered
    req: Request
    shape: tuple[object, ...]  # what its fit rows depend on (``Room.row``)
    quota: QuotaAt | None
    key: tuple[str, str]  # (project, queue) its starts are charged to
    fifo: bool  # its queue is StrictFIFO: a head that does not start holds the jobs behind it

    @property
    def job(self) -> EntityState:
        return self.c.job

    @property
    def label(self) -> str:
        return self.c.label

    @property
    def usable(self) -> frozenset[str]:
        """The nodes with no static blocker for it (the pass at t's reading)."""
        return self.c.usable


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

    di: DiagnosisInput
    waiting: list[Waiter]  # in the pass's order
    free: dict[str, int]  # whole GPUs free per node once the pass at t has served its starts
    holders: dict[str, Holder]  # running jobs by label (those the pass at t starts included)
    rows: dict[tuple[tuple[object, ...], str], F.NodeFit] = field(
        default_factory=dict
    )  # built when first read

    @property
    def t(self) -> datetime:
        return self.di.t

    def row(self, w: Waiter, node: str) -> F.NodeFit | None:
        """The job's fit row on ``node`` as at t (its CPU, memory and MIG per pod; the GPUs come from ``free``),
        built the first time a job of its shape could take room there. Call inside ``di.indexed()``."""
        key = (w.shape, node)
        if key not in self.rows:
            state = self.di.find("node", node)
            if state is None:
                return None
            self.rows[key] = F.node_fit(self.di, state, w.req)
        return self.rows[key]


@dataclass
class Started:
    """A waiting job the replay starts: when, where, and what made it possible."""

    at: datetime
    nodes: dict[str, int]  # node -> pods
    ended: list[End]  # ends that freed the nodes it takes, or its quota, up to its start
    before: list[str]  # waiting jobs the replay started before it on nodes it could use, or in its quota


@dataclass
class Run:
    """One replay over every waiting job: who starts, when and where."""

    starts: dict[str, Started] = field(default_factory=dict)  # by job label
    steps: int = 0
    exhausted: bool = False  # every foreseeable end was replayed
    until: datetime | None = None  # the last moment replayed


def build(di: DiagnosisInput, base: ClusterPass) -> Room:
    """The room at t and the whole-GPU jobs the pass at t leaves waiting. Call inside ``di.indexed()``.

    Cheap on a large cluster: the free GPUs of a node are its allocatable GPUs less its pods' requests, and a
    job's fit row on a node is only built when the replay frees room there that it could use."""
    fifo: dict[str, bool] = {}

    def waiter(c: Considered) -> Waiter:
        req = job_request(di, c.job)
        shape = (
            req.gpus_per_pod,
            req.cpu_per_pod,
            req.memory_per_pod,
            tuple(sorted(req.node_selector.items())),
            repr(req.tolerations),
            tuple(sorted(req.mig.items())),
        )
        if c.queue not in fifo:
            fifo[c.queue] = strict_fifo(di, c.queue)
        q = quota_at(di, c.job, req, 0)
        return Waiter(c, req, shape, q, (c.project, c.queue), fifo[c.queue])

    waiting = [waiter(c) for c in base.considered if c.whole and c.outcome in WAITING]
    started: dict[tuple[str, str], float] = {}
    for c in base.starts:
        started[(c.project, c.queue)] = started.get((c.project, c.queue), 0.0) + c.units
    for w in waiting:
        if w.quota is not None:
            charge_started(w.quota, started)  # what the pass at t starts is charged before the replay begins
    free: dict[str, int] = {}
    for nd in di.nodes:
        st = nd.state
        allocatable = (
            gpus_of(st.get("allocatable") or {}) if "allocatable" in st else gpus_of(st.get("capacity") or {})
        )
        free[nd.name] = max(allocatable - allocated_on(di, nd.name), 0)
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
        holders[c.label] = Holder(running(c.job, di.t), taken, c.units, (c.project, c.queue))
    return Room(di, waiting, free, holders)


def running(job: EntityState, when: datetime) -> EntityState:
    """The job as it runs from ``when`` (a started job's expected end reads its start)."""
    return replace(job, state={**job.state, "phase": "Running", "started": iso(when)}, valid_from=when)


def replay(
    room: Room,
    ends: list[End],
    end_of: Callable[[EntityState, datetime], End | None],
    at: Callable[[End], datetime],
    until: datetime | None = None,
) -> Run:
    """Step through ``ends`` in the order ``at`` dates them (the early, likely or late end) and serve the waiting
    jobs after each group, until every waiting job has started, the ends run out, ``until`` or ``MAX_STEPS``
    (module doc). ``room`` is left as it was."""
    run = Run()
    limit = min(until or room.t + HORIZON, room.t + HORIZON)
    pending = sorted(ends, key=lambda e: (at(e), e.label))
    free = dict(room.free)
    holders = dict(room.holders)
    delta: dict[tuple[str, str], float] = {}
    waiting = list(room.waiting)
    ended: list[tuple[End, Holder]] = []
    starts: list[tuple[Waiter, Started]] = []
    while pending and waiting and run.steps < MAX_STEPS:
        first = at(pending[0])
        if first > limit:
            break
        step = [e for e in pending if at(e) <= first + BUCKET]
        pending = pending[len(step) :]
        when = max(at(e) for e in step)
        run.steps += 1
        run.until = when
        for e in step:
            h = holders.pop(e.label, None)
            if h is None:
                continue
            for node, g in h.gpus.items():
                free[node] = free.get(node, 0) + g
            delta[h.key] = delta.get(h.key, 0.0) - h.units
            ended.append((e, h))
        for w, taken in _serve(room, waiting, free, delta):
            waiting.remove(w)
            s = Started(when, taken, *_why(w, ended, starts))
            starts.append((w, s))
            run.starts[w.label] = s
            gpus = {n: p * w.req.gpus_per_pod for n, p in taken.items()}
            started = running(w.job, when)
            holders[w.label] = Holder(started, gpus, w.req.units, w.key)
            expected = end_of(started, when)
            if expected is not None:
                pending.append(expected)
        pending.sort(key=lambda e: (at(e), e.label))
    run.exhausted = not pending
    return run


def _serve(
    room: Room, waiting: list[Waiter], free: dict[str, int], delta: dict[tuple[str, str], float]
) -> list[tuple[Waiter, dict[str, int]]]:
    """One pass over ``waiting`` in order in the room ``free`` (changed in place) with the allocations moved by
    ``delta`` (likewise): the jobs that start, each with its pods per node."""
    out: list[tuple[Waiter, dict[str, int]]] = []
    blocked: set[str] = set()
    open_nodes = {n for n, g in free.items() if g > 0}
    for w in waiting:
        if w.fifo and w.key[1] in blocked:
            continue
        per = max(w.req.gpus_per_pod, 1)
        taken: dict[str, int] = {}
        nodes = sorted(n for n in open_nodes if free[n] >= per and n in w.usable)
        if sum(free[n] for n in nodes) >= w.req.total and not (w.quota is not None and _held(w.quota, delta)):
            rows = [r for r in (room.row(w, n) for n in nodes) if r is not None]
            taken = place(rows, w.req, free, GPUS_ONLY)
        if not taken:
            if w.fifo:
                blocked.add(w.key[1])
            continue
        for node, pods in taken.items():
            free[node] -= pods * w.req.gpus_per_pod
        open_nodes = {n for n in open_nodes if free[n] > 0}
        delta[w.key] = delta.get(w.key, 0.0) + w.req.units
        out.append((w, taken))
    return out


def _why(
    w: Waiter, ended: list[tuple[End, Holder]], starts: list[tuple[Waiter, Started]]
) -> tuple[list[End], list[str]]:
    """The ends up to a start that freed GPUs it could use or moved its quota, and the jobs started before it
    that took room it could use or counted against its quota."""
    usable = w.usable
    related = quota_keys_projects(w)
    mine = [e for e, h in ended if set(h.gpus) & usable or h.key[0] in related or h.key[1] in related]
    before = [
        o.label for o, s in starts if set(s.nodes) & usable or o.key[0] in related or o.key[1] in related
    ]
    return mine, before


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


__all__ = ["BUCKET", "HORIZON", "MAX_STEPS", "Room", "Run", "Started", "build", "replay", "running"]
