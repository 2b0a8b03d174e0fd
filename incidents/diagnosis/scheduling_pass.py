"""The cluster's scheduling pass: every waiting job in the scheduler's order, each gang placed whole in the room
left by the jobs before it or passed over (``cluster_pass``), and a waiting job's position in it (``position``).
The what-if page, the why-pending panel, the edits and the ETA read it; a fault's fix weighed as a pass is
``fault_pass``, built on the same placement (``place``).

Pure: it reads the ``DiagnosisInput`` and the fit rows, never the database nor the simulator (the simulator
stands in for the real scheduler; this is the product's own reading of it).

Whole GPUs, and CPU and memory: each start takes its GPUs, and the CPU and memory its pods request, from the
room the jobs after it see; a pod goes where KAI's default placement puts it (``place``: binpack, the fitting
node with the fewest free GPUs). A share or a MIG instance is weighed by the fit rules alone
(``fit.placeable``), and such jobs take no whole-GPU room. On Kueue, a ClusterQueue admits within its own
unused nominal quota, and in a cohort what the others leave unused (``kueue_quota.Quotas.admits``), each start
charged to it: without a cohort it never borrows, whatever its limit says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from incidents.diagnosis import fit as F
from incidents.diagnosis import queue_order
from incidents.diagnosis.kueue_quota import Quotas, Usage, charge, quotas_of, usage_of
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.placement import place, share_nodes, take_room
from incidents.diagnosis.queue_order import QueueOrder, in_queue_key, job_queue, strict_fifo
from incidents.diagnosis.quota import QuotaAt, quota_at
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.resources import request_vector
from incidents.diagnosis.types import DiagnosisInput, EntityState


def whole_gpus(req: Request) -> bool:
    return not (req.share or req.share_memory_mib or req.mig) and req.gpus_per_pod > 0


# Waiting jobs one cluster pass considers (a page's cost is bounded by it); later ones are "not reached".
MAX_CONSIDERED = 400


STARTS = "starts"


NO_ROOM = "no room"


QUOTA = "quota"


HELD = "held"


BLOCKED_FIFO = "behind its queue's head"  # Kueue StrictFIFO: a head that cannot be admitted blocks its queue


NOT_REACHED = "not reached"


PLACED = "placed"  # every pod is bound already: it waits on its containers, not on the scheduler


@dataclass
class Considered:
    """One waiting job as the cluster's pass considers it, in order."""

    job: EntityState
    queue: str
    project: str
    order: int  # 1-based place in the cluster's order
    queue_order: int  # 1-based place in its own queue
    units: float  # GPU units it asks (a 0.5 share is 0.5)
    outcome: str  # STARTS, NO_ROOM, QUOTA, HELD, BLOCKED_FIFO, PLACED
    nodes: dict[str, int] = field(default_factory=dict)  # where its pods go when it starts
    usable: frozenset[str] = frozenset()  # nodes with no static blocker for it (the GPUs it competes for)
    why: str = ""  # the quota reason, or what held it
    whole: bool = True  # whole GPUs (shares and MIG are weighed by the fit rules alone, taking no room)

    @property
    def label(self) -> str:
        return self.job.label

    @property
    def units_words(self) -> str:
        return f"{round(self.units, 4):g}"

    @property
    def nodes_words(self) -> str:
        return ", ".join(f"{n} ×{p}" if p > 1 else n for n, p in self.nodes.items())


@dataclass
class ClusterPass:
    """One scheduling pass over every waiting job of the cluster, in its order, each taking its room."""

    rule: str  # the words of the order rule
    considered: list[Considered]
    waiting: int  # waiting jobs in all (the pass stops after MAX_CONSIDERED)
    started_units: dict[tuple[str, str], float] = field(default_factory=dict)  # (project, queue) -> units
    # (project, queue) -> [CPU millicores, memory bytes] the pass started
    started_resources: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        return self.waiting > len(self.considered)

    @property
    def starts(self) -> list[Considered]:
        return [c for c in self.considered if c.outcome == STARTS]

    def find(self, namespace: str, name: str) -> Considered | None:
        for c in self.considered:
            if c.job.name == name and c.job.namespace == namespace:
                return c
        return None


def order_rule(di: DiagnosisInput) -> str:
    """The rule that orders the cluster's waiting jobs, in the words the pages show."""
    return queue_order.rule(di.scheduler)


def cluster_pass(di: DiagnosisInput, limit: int = MAX_CONSIDERED) -> ClusterPass:
    """Every waiting job in the cluster's order (:class:`~incidents.diagnosis.queue_order.QueueOrder`), each
    gang placed whole in the room left by the jobs before it or passed over, each charged to its queue and
    department so the next quota check and the next fair-share choice count it.

    Held jobs (state ``held``, a what-if edit) are listed and take nothing. No preemption or reclaim is
    weighed: the pass answers which waiting jobs the free room starts. Pure; call it inside ``di.indexed()``
    on a large input."""
    waiting = [j for j in di.jobs if is_pending(j)]
    order = QueueOrder(di, waiting)
    started: dict[tuple[str, str], float] = {}
    pass_ = _Room()
    if di.scheduler == "kueue" and (cohorts := quotas_of(di)).cqs:
        pass_.cohorts, pass_.usage = cohorts, dict(usage_of(di))
    # The fit rows of one request shape, built once: what a whole-GPU gang's placement reads of them (static
    # blockers, CPU/memory/MIG per pod) does not depend on how many pods it has, nor on whose it is, and the
    # room comes from ``free``. 400 waiting jobs over 200 nodes were 80,000 node fits, 5 s.
    shapes: dict[tuple[Any, ...], tuple[list[F.NodeFit], list[F.NodeFit], frozenset[str]]] = {}
    out: list[Considered] = []
    while len(out) < limit:
        job = order.next()
        if job is None:
            break
        name = job_queue(job)
        c = _consider(di, job, name, pass_, started, shapes, blocked=order.is_blocked(name))
        c.order, c.queue_order = len(out) + 1, order.in_queue(job)
        if c.outcome == STARTS:
            started[(c.project, name)] = started.get((c.project, name), 0.0) + c.units
            pass_.charge((c.project, name), job_request(di, job))
            order.charge(job, c.units)
        elif c.outcome in (NO_ROOM, QUOTA) and strict_fifo(di, name):
            order.block(name)
        out.append(c)
    return ClusterPass(
        rule=order_rule(di),
        considered=out,
        waiting=len(waiting),
        started_units=started,
        started_resources=pass_.started,
    )


@dataclass
class _Room:
    """What a pass has left and has started: free GPUs and CPU/memory per node, and the CPU and memory each
    (project, queue) started (all of it, and its non-preemptible part)."""

    free: dict[str, int] = field(default_factory=dict)
    room: dict[str, list[float | None]] = field(default_factory=dict)
    started: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    non_preemptible: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    # the free GPUs over a set of usable nodes, summed once and kept as starts take room (``free_on``)
    totals: dict[frozenset[str], int] = field(default_factory=dict)
    # Kueue: what each ClusterQueue holds per flavor, the pass's starts charged
    cohorts: Quotas | None = None
    usage: Usage = field(default_factory=dict)

    def free_on(self, nodes: frozenset[str]) -> int:
        """The free GPUs over ``nodes`` (every one of them in ``free``: its shape's rows are read first)."""
        got = self.totals.get(nodes)
        if got is None:
            got = self.totals[nodes] = sum(self.free.get(n, 0) for n in nodes)
        return got

    def take(self, node: str, gpus: int) -> None:
        """A start takes ``gpus`` of ``node``'s free GPUs."""
        self.free[node] -= gpus
        for nodes in self.totals:
            if node in nodes:
                self.totals[nodes] -= gpus

    def charge(self, key: tuple[str, str], req: Request) -> None:
        vec = request_vector(req)
        if not any(vec):
            return
        for into in (self.started, *((self.non_preemptible,) if not req.preemptible else ())):
            got = into.setdefault(key, [0.0, 0.0])
            got[0] += vec[0]
            got[1] += vec[1]


def _consider(
    di: DiagnosisInput,
    job: EntityState,
    queue: str,
    pass_: _Room,
    started: dict[tuple[str, str], float],
    shapes: dict[tuple[Any, ...], tuple[list[F.NodeFit], list[F.NodeFit], frozenset[str]]],
    *,
    blocked: bool,
) -> Considered:
    req = job_request(di, job)
    project = job.get("project") or queue
    free = pass_.free
    c = Considered(job, queue, project, 0, 0, round(req.units, 4), NO_ROOM, whole=whole_gpus(req))
    # a pod asking no GPU at all (no share, no MIG instance) is placed by its CPU and memory, as whole GPUs are
    by_room = c.whole or not (req.gpus_per_pod or req.share or req.share_memory_mib or req.mig)
    key = request_shape(req, by_room)
    if key not in shapes:
        rows = F.node_fits(di, req)
        open_rows = [r for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
        shapes[key] = (rows, open_rows, frozenset(r.node for r in open_rows))
        for r in rows:
            free.setdefault(r.node, r.free)
            if req.cpu_per_pod or req.memory_per_pod:  # the row counted what the node's pods request
                pass_.room.setdefault(r.node, [r.cpu_free, r.memory_free])
    rows, open_rows, c.usable = shapes[key]
    if job.get("held"):
        c.outcome, c.why = HELD, "what-if edit"
        return c
    if blocked:
        c.outcome = BLOCKED_FIFO
        return c
    if req.pods == 0:
        c.outcome, c.why = PLACED, "its pods are bound"
        return c
    held = quota_at(di, job, req, pass_.free_on(c.usable))
    if held is not None:
        charge_started(held, started)
        if held.resources is not None:
            held.resources.charge(pass_.started, pass_.non_preemptible)
        if held.holds:
            c.outcome, c.why = QUOTA, quota_words(held)
            return c
    flavor = pass_.cohorts.admit(job, queue, req.units, pass_.usage) if pass_.cohorts is not None else None
    if flavor == "":
        cohort = pass_.cohorts.cqs[queue].cohort if pass_.cohorts is not None else ""
        c.outcome, c.why = (
            QUOTA,
            (
                f"cohort {cohort}: no unused quota it may borrow"
                if cohort
                else "its nominal quota used, no cohort"
            ),
        )
        return c
    if not by_room:
        if F.fits(rows, req):  # shares and MIG: the fit rules at t, taking no whole-GPU room
            c.outcome, c.nodes = STARTS, share_nodes(rows, req)
            take_room(pass_.room, req, c.nodes)
            charge(pass_.usage, queue, flavor, req.units)
        return c
    # the rows a static blocker closes would take nothing; nor, now or later in the pass, a row without room for
    # one pod (a start only takes room): left out of its shape's rows, which ``place`` reads once per job
    if req.gpus_per_pod > 0:
        open_rows[:] = [r for r in open_rows if free.get(r.node, 0) >= req.gpus_per_pod]
    taken = place(open_rows, req, free, frozenset(), pass_.room if pass_.room else None)
    if taken:
        for node, pods in taken.items():
            pass_.take(node, pods * req.gpus_per_pod)
        take_room(pass_.room, req, taken)
        c.outcome, c.nodes = STARTS, taken
        charge(pass_.usage, queue, flavor, req.units)
    return c


def quota_words(held: QuotaAt) -> str:
    """Why the job's quota holds it, in the pass's words: its GPUs, its department's, or its CPU or memory."""
    dept = held.department
    if held.blocks:
        return (
            f"{held.reason}: {held.display['after']} of quota {held.display['quota']}, "
            f"limit {held.display['limit']}"
        )
    if dept is not None and dept.blocks:
        return f"department {dept.name} at {dept.display['after']} of limit {dept.display['limit']}"
    breach = held.resources.breach() if held.resources is not None else None
    return breach.words if breach is not None else held.reason


def request_shape(req: Request, whole: bool) -> tuple[Any, ...]:
    """What a job's fit rows depend on, besides the cluster: its pods' request, selector and tolerations (and the
    number of pods for a share or MIG job, whose rows the fit rules read as they are)."""
    return (
        req.gpus_per_pod,
        req.cpu_per_pod,
        req.memory_per_pod,
        tuple(sorted(req.node_selector.items())),
        repr(req.tolerations),
        tuple(sorted(req.mig.items())),
        req.share,
        req.share_memory_mib,
        None if whole else req.pods,
    )


def charge_started(held: QuotaAt, started: dict[tuple[str, str], float]) -> None:
    """Add what this pass started before to the quota read at t (its project or queue, and its department)."""
    held.allocated = round(
        held.allocated + sum(u for (p, q), u in started.items() if p == held.project or q == held.queue), 4
    )
    dept = held.department
    if dept is not None:
        extra = sum(u for (p, q), u in started.items() if p in dept.projects or q in dept.projects)
        dept.allocated = round(dept.allocated + extra, 4)


@dataclass
class Position:
    """Where a waiting job stands: in its queue and in the cluster's order, and the jobs ahead competing for the
    GPUs it could use (``cluster_pass``)."""

    rule: str
    queue: str
    in_queue: int
    queue_size: int
    in_cluster: int | None  # None: beyond the jobs the pass considers
    waiting: int
    me: Considered | None
    competitors: list[Considered]  # ahead of it, able to use one of its nodes, in order
    ahead: int  # jobs ahead in the cluster's order

    @property
    def starting_ahead(self) -> list[Considered]:
        return [c for c in self.competitors if c.outcome == STARTS]


def position(di: DiagnosisInput, job: EntityState, cp: ClusterPass | None = None) -> Position | None:
    """The job's position, or None when it is not waiting."""
    if not is_pending(job):
        return None
    cp = cp or cluster_pass(di)
    queue = job_queue(job)
    mine = [j for j in di.jobs if is_pending(j) and job_queue(j) == queue]
    me = cp.find(job.namespace, job.name)
    if me is None:
        ahead_all = cp.considered
        in_queue = 1 + sum(1 for j in mine if in_queue_key(j) < in_queue_key(job))
    else:
        ahead_all = cp.considered[: me.order - 1]
        in_queue = me.queue_order
    usable = me.usable if me is not None else frozenset()
    competitors = [c for c in ahead_all if c.usable & usable and c.outcome not in (HELD, PLACED)]
    return Position(
        rule=cp.rule,
        queue=queue,
        in_queue=in_queue,
        queue_size=len(mine),
        in_cluster=me.order if me is not None else None,
        waiting=cp.waiting,
        me=me,
        competitors=competitors,
        ahead=len(ahead_all),
    )


__all__ = [
    "BLOCKED_FIFO",
    "HELD",
    "MAX_CONSIDERED",
    "NOT_REACHED",
    "NO_ROOM",
    "PLACED",
    "QUOTA",
    "STARTS",
    "ClusterPass",
    "Considered",
    "Position",
    "charge_started",
    "cluster_pass",
    "order_rule",
    "place",
    "position",
    "request_shape",
    "whole_gpus",
]
