"""What the queue replayed forward (``incidents.diagnosis.replay``) reads of the state at t and keeps as it
steps: the waiting jobs (``Waiter``) and the scheduler's order over them as the pass at t leaves it
(``order_at``), the running ones (``Holder``), the free whole GPUs per node (``Room``, built once by ``build``),
what each Kueue ClusterQueue holds in which flavor (``Room.usage``), and what one replay answers
(``Run``, ``Started``); and a waiting job's quota moved by the replay's ends and starts (``quota_holds``,
``below_deserved``).

Pure: no database, no simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from incidents.diagnosis import fit as F
from incidents.diagnosis.allocation import pod_units
from incidents.diagnosis.kueue_quota import Quotas, Usage, quotas_of
from incidents.diagnosis.node_resources import allocated_on
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.queue_order import QueueOrder, job_queue, strict_fifo
from incidents.diagnosis.quota import QuotaAt, quota_at
from incidents.diagnosis.replay_resources import Held, Left, held_by, room_at
from incidents.diagnosis.request import Request, job_request, pod_requests
from incidents.diagnosis.scheduling_pass import (
    BLOCKED_FIFO,
    NO_ROOM,
    QUOTA,
    ClusterPass,
    Considered,
    charge_started,
    request_shape,
)
from incidents.diagnosis.types import DiagnosisInput, EntityState, gpus_of, iso

if TYPE_CHECKING:
    from incidents.diagnosis.durations import End

WAITING = (NO_ROOM, QUOTA, BLOCKED_FIFO)  # the pass's outcomes the replay may still start


@dataclass(eq=False)  # one waiting job: compared by identity (the replay removes it from its list)
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

    @cached_property
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
    since: datetime | None = None  # when the replay started it (None: running at t)
    flavor: str | None = None  # Kueue: the flavor its ClusterQueue holds its quota in
    held: Held = field(default_factory=dict)  # the CPU and memory its pods ask, per node


@dataclass
class Room:
    """What the replay reads of the state at t, built once (``build``)."""

    di: DiagnosisInput
    waiting: list[Waiter]  # in the pass's order at t
    free: dict[str, int]  # whole GPUs free per node once the pass at t has served its starts
    holders: dict[str, Holder]  # running jobs by label (those the pass at t starts included)
    # the scheduler's order over ``waiting`` with the pass at t's starts charged (``order_at``)
    order: QueueOrder
    started: dict[tuple[str, str], float] = field(default_factory=dict)  # what the pass at t starts, per key
    fifo: dict[str, bool] = field(default_factory=dict)  # StrictFIFO, per queue
    # per request (``request_key``): the nodes with no static blocker for it
    usable: dict[tuple[object, ...], frozenset[str]] = field(default_factory=dict)
    # per queue: its deserved quota (``replay_evictions.over_deserved``)
    deserved: dict[str, float] = field(default_factory=dict)
    # per running job: what ``replay_moves`` reads of it
    movers: dict[str, tuple[bool, int, int, tuple[int, ...]]] = field(default_factory=dict)
    rows: dict[tuple[tuple[object, ...], str], F.NodeFit] = field(
        default_factory=dict
    )  # built when first read
    # Kueue: the ClusterQueues' quota arithmetic, and what each holds per flavor at t (the pass at t's starts
    # included): the replay moves a copy as jobs end and start (``cohort_usage``)
    cohorts: Quotas | None = None
    usage: Usage = field(default_factory=dict)
    left: Left = field(default_factory=dict)  # CPU and memory left per node (``replay_resources``)

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
    """A waiting job the replay starts: when, where, and what made it possible. Why it could start (``ended``,
    ``before``) is read only for the job an answer is about: ``why`` works it out when first asked (a replay
    starts hundreds of jobs; weighing every start's reasons against every earlier end was most of its cost)."""

    at: datetime
    nodes: dict[str, int]  # node -> pods
    evicted: list[str] = field(default_factory=list)  # running jobs it evicts to start (reclaim, preempt)
    why: Callable[[], tuple[list[End], list[str]]] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def _reasons(self) -> tuple[list[End], list[str]]:
        return self.why() if self.why is not None else ([], [])

    @property
    def ended(self) -> list[End]:
        """The ends that freed the nodes it takes, or its quota, up to its start."""
        return self._reasons[0]

    @property
    def before(self) -> list[str]:
        """The waiting jobs the replay started before it on nodes it could use, or in its quota."""
        return self._reasons[1]


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
    waiting = [c for c in base.considered if c.whole and c.outcome in WAITING]
    room = Room(di, [], {}, {}, order_at(di, base, [c.job for c in waiting]))
    for c in base.starts:
        room.started[(c.project, c.queue)] = room.started.get((c.project, c.queue), 0.0) + c.units
    room.waiting = [waiter(room, c) for c in waiting]
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
        cpu, mem = pod_requests(p.get("requests") or {})
        mine = h.held.setdefault(p.get("node"), [0.0, 0.0])
        mine[0] += cpu or 0.0
        mine[1] += float(mem or 0)
    for c in base.starts:
        per = int(round(c.units / max(sum(c.nodes.values()), 1))) if c.whole else 0
        taken = {n: pods * per for n, pods in c.nodes.items()}
        for n, g in taken.items():
            free[n] = max(free.get(n, 0) - g, 0)
        held = held_by(job_request(di, c.job), c.nodes) if c.whole else {}
        holders[c.label] = Holder(running(c.job, di.t), taken, c.units, (c.project, c.queue), di.t, held=held)
    room.free, room.holders = free, holders
    room.left = room_at(di, base)
    cohort_usage(room)
    return room


def cohort_usage(room: Room) -> None:
    """On Kueue: the quota arithmetic (``kueue_quota.Quotas``) and what each ClusterQueue holds per flavor at
    t, each holder's flavor noted (its end gives it back)."""
    if room.di.scheduler != "kueue":
        return
    cohorts = quotas_of(room.di)
    if not cohorts.cqs:
        return
    room.cohorts = cohorts
    for h in room.holders.values():
        if h.key[1] in cohorts.cqs:
            h.flavor = cohorts.flavor_of(h.job, h.key[1])
            if h.flavor is not None:
                k = (h.key[1], h.flavor)
                room.usage[k] = room.usage.get(k, 0.0) + h.units


def order_at(di: DiagnosisInput, base: ClusterPass, waiting: list[EntityState]) -> QueueOrder:
    """The scheduler's order (``QueueOrder``) over ``waiting`` as the pass at t leaves it: built over every
    waiting job, as the pass's is (the fair shares divide what they all ask), with the pass's starts charged."""
    order = QueueOrder(di, [j for j in di.jobs if is_pending(j)])
    for c in base.starts:
        order.charge(c.job, c.units)
    return order.moved(waiting, {})


def request_key(req: Request) -> tuple[object, ...]:
    """What a whole-GPU job's fit rows depend on (``Room.row``): the pass's request shape."""
    return request_shape(req, True)


def waiter(room: Room, c: Considered, req: Request | None = None) -> Waiter:
    """A waiting job as the replay places it: its request, its queue's strategy, and its quota as read at t with
    the pass at t's starts charged."""
    di = room.di
    req = job_request(di, c.job) if req is None else req
    if c.queue not in room.fifo:
        room.fifo[c.queue] = strict_fifo(di, c.queue)
    q = quota_at(di, c.job, req, 0)
    if q is not None:
        charge_started(q, room.started)  # what the pass at t starts is charged before the replay begins
    return Waiter(c, req, request_key(req), q, (c.project, c.queue), room.fifo[c.queue])


def waiting_again(room: Room, job: EntityState) -> Waiter:
    """A running job the replay evicts, waiting again: the nodes it may use are those of a waiting job of the
    same request, else read from the fit rules."""
    pending = replace(job, state={**job.state, "phase": "Pending", "active": 0})
    req = job_request(room.di, pending)
    req = replace(req, pods=req.pods + req.bound_pods, bound_pods=0)  # its pods at t are gone with it
    key = request_key(req)
    same = next((w for w in room.waiting if w.shape == key), None)
    if same is not None:
        usable = same.usable
    else:
        if key not in room.usable:
            rows = F.node_fits(room.di, req)
            room.usable[key] = frozenset(
                r.node for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)
            )
        usable = room.usable[key]
    queue = job_queue(pending)
    c = Considered(pending, queue, pending.get("project") or queue, 0, 0, round(req.units, 4), NO_ROOM)
    c.usable = usable
    return waiter(room, c, req)


def quota_holds(q: QuotaAt, delta: dict[tuple[str, str], float]) -> bool:
    """Whether the quota read at t, moved by the replay's ends and starts, holds the job."""
    moved = replace(q, department=replace(q.department) if q.department is not None else None)
    charge_started(moved, delta)
    return moved.holds


def below_deserved(q: QuotaAt | None, delta: dict[tuple[str, str], float]) -> bool:
    """Whether the job's queue, its allocation moved by the replay, stays within its deserved quota with it (a
    starved queue: KAI reclaims for it from queues over theirs)."""
    if q is None or q.quota is None:
        return False
    moved = replace(q, department=replace(q.department) if q.department is not None else None)
    charge_started(moved, delta)
    return moved.within_quota


def admits(
    room: Room, w: Waiter, delta: dict[tuple[str, str], float], usage: Usage
) -> tuple[bool, str | None]:
    """Whether ``w``'s quota lets it in on the replay's books (its quota and limit read at t, moved by
    ``delta``), and on Kueue, for a ClusterQueue, the flavor whose quota admits it on ``usage``: its own unused
    nominal quota, then (in a cohort) what the other ClusterQueues of the cohort leave unused, within its
    borrowing limit (``kueue_quota.Quotas.admits``; none: it waits, as Kueue's admission keeps it)."""
    if w.quota is not None and quota_holds(w.quota, delta):
        return False, None
    cohorts = room.cohorts
    if cohorts is None or w.key[1] not in cohorts.cqs:
        return True, None
    flavor = cohorts.admits(w.job, w.key[1], w.req.units, usage)
    return flavor is not None, flavor


def why_started(
    room: Room, w: Waiter, ended: list[tuple[End, Holder]], starts: list[tuple[Waiter, dict[str, int]]]
) -> tuple[list[End], list[str]]:
    """The ends up to a start that freed GPUs it could use or moved its quota (or, Kueue, what its cohort
    leaves unused), and the jobs started before it that took room it could use or counted against its quota
    (``starts``: each with the nodes it took)."""
    usable = w.usable
    related = quota_keys_projects(w) | cohort_of(room, w)
    mine = [
        e for e, h in ended if h.key[0] in related or h.key[1] in related or not usable.isdisjoint(h.gpus)
    ]
    before = [
        o.label
        for o, nodes in starts
        if o.key[0] in related or o.key[1] in related or not usable.isdisjoint(nodes)
    ]
    return mine, before


def quota_keys_projects(w: Waiter) -> set[str]:
    """The projects whose usage counts against ``w``'s quota: its own, and its department's."""
    out = {w.key[0], w.key[1]}
    if w.quota is not None and w.quota.department is not None:
        out.update(w.quota.department.projects)
    return out


def cohort_of(room: Room, w: Waiter) -> set[str]:
    """Kueue: the ClusterQueues of ``w``'s cohort (their ends and starts move what it may borrow)."""
    cohorts = room.cohorts
    cq = cohorts.cqs.get(w.key[1]) if cohorts is not None else None
    if cohorts is None or cq is None:
        return set()
    return {m.name for m in cohorts.members(cq)}


def running(job: EntityState, when: datetime) -> EntityState:
    """The job as it runs from ``when`` (a started job's expected end reads its start)."""
    return replace(job, state={**job.state, "phase": "Running", "started": iso(when)}, valid_from=when)


__all__ = [
    "WAITING",
    "Holder",
    "Room",
    "Run",
    "Started",
    "Waiter",
    "admits",
    "below_deserved",
    "build",
    "cohort_of",
    "cohort_usage",
    "order_at",
    "quota_holds",
    "request_key",
    "quota_keys_projects",
    "running",
    "waiter",
    "waiting_again",
    "why_started",
]
