"""The queue replayed forward from t on the room alone: which waiting jobs start, when and where, as the running
jobs end. The engine of the ETA (``incidents.diagnosis.eta``) and of "which jobs start within the hour".

The pass at t (``scheduling_pass.cluster_pass``) answers what the free room starts now. A scheduler runs its own
pass every few seconds, so by the time the inventory is read it has usually taken that room: what starts next
is what the running jobs' ends give back. One replay serves every waiting job at once: it reads the pass at t
once (the jobs it starts run from t; the others wait, with their fit rows, built once per request shape, and
their quota as read at t), then steps through the running jobs' expected ends in time order. Each step frees the
GPUs, CPU and memory of the jobs that end (``replay_resources``), takes them off their queue's (and
department's) allocation, and serves the waiting jobs in the whole GPUs, cores and memory left
(``scheduling_pass.place``, as the pass at t places: a node with free GPUs but no core left takes no pod), each
within its quota and limit, a StrictFIFO queue's head blocking the jobs behind it; the jobs it starts run from then on, their own expected end joining the list.
On Kueue, a ClusterQueue is admitted on the replay's books too: within its own unused nominal quota, then, in a
cohort, what the other ClusterQueues of its cohort leave unused, up to its borrowing limit (``kueue_quota.Quotas``
over what each ClusterQueue holds per flavor, moved by every end and start), so a queue that borrows starts when
another's ending job gives the quota back, not merely when room frees, and one outside a cohort never borrows.
A step serves the jobs still waiting in the order the scheduler gives on the replay's books, as KAI and Kueue
weigh their queues again every session: the model's ``QueueOrder`` with each queue's holdings moved by the ends
and starts so far (``QueueOrder.moved``; each start charged before the next choice), so a queue whose jobs ended
holds less and goes first for the GPUs they free (KAI: within its deserved quota, then the smaller share
allocated / fair share; Kueue: a head that no longer makes its queue borrow goes before one that does). KAI's
fair shares are divided again at each step from what each queue then asks (held plus waiting: an end lowers it,
a start or an eviction does not), so the share a queue whose jobs ended no longer asks goes to the others. On KAI,
at t and after each step, the jobs still waiting that KAI would start by evicting others start so
(``Books.evict``): by reclaim or preemption (``replay_evictions``: the model's ``reclaim`` rules on the books
written back as a state; the victims wait again), or by moving running jobs out of the way of a gang whose GPUs
are free in total (``replay_moves``: the moved jobs start over elsewhere).

What it leaves out, said where the answer is shown: shares and MIG instances take no whole-GPU room (a share or
MIG job's start is not replayed), a Kueue Cohort's own nominal quota (what it lends its ClusterQueues beyond
theirs) is not added to what they may borrow, and Kueue's preemption is not weighed. Pure: no database, no
simulator.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from incidents.diagnosis import replay_moves as moves
from incidents.diagnosis import replay_resources as resources
from incidents.diagnosis.kueue_quota import Usage
from incidents.diagnosis.precedence import job_rank
from incidents.diagnosis.replay_evictions import (
    evictions,
    over_deserved,
    requeue,
    weighed,
    weighed_steps,
)
from incidents.diagnosis.replay_room import (
    Holder,
    Room,
    Run,
    Started,
    Waiter,
    below_deserved,
    quota_holds,
    running,
    waiting_again,
    why_started,
)
from incidents.diagnosis.replay_serve import serve
from incidents.diagnosis.request import job_request
from incidents.diagnosis.resources import Vector, job_vector
from incidents.diagnosis.types import EntityState

if TYPE_CHECKING:
    from incidents.diagnosis.durations import End

MAX_STEPS = 96  # groups of ends per replay
BUCKET = timedelta(minutes=2)  # ends this close together are one step
HORIZON = timedelta(days=7)


def replay(
    room: Room,
    ends: list[End],
    end_of: Callable[[EntityState, datetime], End | None],
    at: Callable[[End], datetime],
    until: datetime | None = None,
    stop: str | None = None,
) -> Run:
    """Step through ``ends`` in the order ``at`` dates them (each drawn from its spread: ``eta.Draw``) and serve
    the waiting jobs after each group, until every waiting job has started (``stop``: that job has), the ends run
    out, ``until`` or ``MAX_STEPS`` (module doc). ``room`` is left as it was."""
    books = Books(room, end_of, at)
    books.pending = sorted(ends, key=books.when)
    run = books.run
    limit = min(until or room.t + HORIZON, room.t + HORIZON)
    books.evict(room.t)  # what KAI reclaims for the jobs the pass at t leaves waiting
    while books.pending and books.waiting and run.steps < MAX_STEPS and stop not in run.starts:
        first = at(books.pending[0])
        if first > limit:
            break
        n = bisect.bisect_right(books.pending, (first + BUCKET, "\uffff"), key=books.when)
        step, books.pending = books.pending[:n], books.pending[n:]
        when = max(at(e) for e in step)
        run.steps += 1
        run.until = when
        for e in step:
            books.end(e)
        order = lambda: room.order.moved(  # noqa: E731
            [w.job for w in books.waiting], books.shifted(), books.shifted(books.gone)
        )
        for w, taken, flavor in serve(
            room, books.waiting, books.free, books.left, books.delta, order, books.usage
        ):
            books.start(w, taken, when, flavor=flavor)
        books.evict(when)
    run.exhausted = not books.pending
    return run


class Books:
    """The replay's books as it steps: free GPUs per node, who runs, who waits, how each queue's allocation
    moved, and the expected ends still to come."""

    def __init__(
        self,
        room: Room,
        end_of: Callable[[EntityState, datetime], End | None],
        at: Callable[[End], datetime],
    ) -> None:
        self.room, self.end_of, self.at = room, end_of, at
        self.run = Run()
        self.free = dict(room.free)
        self.left = resources.copy(room.left)  # CPU and memory left per node
        self.holders = {k: replace(h, gpus=dict(h.gpus)) for k, h in room.holders.items()}
        self.delta: dict[tuple[str, str], float] = {}
        self.shift: dict[str, list[float]] = {}  # per queue: GPU units, CPU, memory moved (``shifted``)
        # per queue: what its jobs that ended held (GPU units, CPU, memory): what it asks drops by as much, as
        # a start or an eviction leaves it (what is held plus what waits) as it was
        self.gone: dict[str, list[float]] = {}
        self.usage: Usage = dict(room.usage)  # Kueue: per (ClusterQueue, flavor), units held
        self.waiting = list(room.waiting)
        self.pending: list[End] = []
        self.ended: list[tuple[End, Holder]] = []
        # the starts so far, each as the waiter and the nodes it took: what a later start's reasons read
        # (``why_started``); not the ``Started`` themselves, whose ``why`` reads this list (a cycle each start
        # would leave to the cycle collector: a forecast's whole state, freed late and at once)
        self.starts: list[tuple[Waiter, dict[str, int]]] = []
        self.evicted: set[str] = set()  # running jobs the replay evicted (they wait again, or run elsewhere)
        self.checks = 0  # steps weighed for reclaim and preemption
        self.moves = 0  # steps weighed for consolidation
        self.ranks: dict[str, int] = {}  # running jobs' priority ranks, read once

    def when(self, e: End) -> tuple[datetime, str]:
        """The key ``pending`` is kept sorted by: the end's moment as the replay dates it, then its job."""
        return (self.at(e), e.label)

    def expect(self, e: End) -> None:
        """A job the replay started (or moved) will end at ``e``: kept in ``pending``'s order."""
        bisect.insort(self.pending, e, key=self.when)

    def end(self, e: End) -> None:
        h = self.holders.pop(e.label, None)
        if h is None:
            return
        self._free(h)
        self._shift(h.key[1], h.job, -h.units, self.gone)
        self.ended.append((e, h))

    def _free(self, h: Holder) -> None:
        for node, g in h.gpus.items():
            self.free[node] = self.free.get(node, 0) + g
        resources.give_back(self.left, h.held)
        self.delta[h.key] = self.delta.get(h.key, 0.0) - h.units
        self._shift(h.key[1], h.job, -h.units)
        if h.flavor is not None:
            k = (h.key[1], h.flavor)
            self.usage[k] = self.usage.get(k, 0.0) - h.units

    def _shift(
        self, queue: str, job: EntityState, units: float, into: dict[str, list[float]] | None = None
    ) -> None:
        moved = (self.shift if into is None else into).setdefault(queue, [0.0, 0.0, 0.0])
        sign = 1.0 if units >= 0 else -1.0
        moved[0] += units
        if self.room.order.weigh:
            cpu, memory = job_vector(self.room.di, job)
            moved[1] += sign * cpu
            moved[2] += sign * memory

    def shifted(self, moved: dict[str, list[float]] | None = None) -> dict[str, tuple[float, Vector]]:
        """How each queue's holdings moved since t (GPU units, [CPU, memory]), or (``moved``: ``gone``) what it
        asks: what the scheduler's order weighs at the next step (``QueueOrder.moved``)."""
        src = self.shift if moved is None else moved
        return {q: (units, (cpu, memory)) for q, (units, cpu, memory) in src.items()}

    def start(
        self,
        w: Waiter,
        taken: dict[str, int],
        when: datetime,
        victims: list[str] | None = None,
        flavor: str | None = None,
    ) -> None:
        """``w`` starts at ``when`` with its pods on ``taken`` (the room already taken from ``free``); on Kueue,
        in a cohort, its quota held in ``flavor``."""
        self.waiting.remove(w)
        room, ended, starts, n_ended, n_starts = (
            self.room,
            self.ended,
            self.starts,
            len(self.ended),
            len(self.starts),
        )
        s = Started(
            when,
            taken,
            evicted=victims or [],
            why=lambda: why_started(room, w, ended[:n_ended], starts[:n_starts]),  # both lists only grow
        )
        self.starts.append((w, taken))
        self.run.starts[w.label] = s
        gpus = {n: p * w.req.gpus_per_pod for n, p in taken.items()}
        started = running(w.job, when)
        cohorts = self.room.cohorts
        if flavor is None and cohorts is not None and w.key[1] in cohorts.cqs:
            flavor = cohorts.flavor_of(w.job, w.key[1])
        held = resources.held_by(w.req, taken)
        self.holders[w.label] = Holder(started, gpus, w.req.units, w.key, when, flavor, held)
        if flavor is not None:
            self.usage[(w.key[1], flavor)] = self.usage.get((w.key[1], flavor), 0.0) + w.req.units
        self.delta[w.key] = self.delta.get(w.key, 0.0) + w.req.units
        self._shift(w.key[1], w.job, w.req.units)
        expected = self.end_of(started, when)
        if expected is not None:
            self.expect(expected)

    def evict(self, when: datetime) -> None:
        """Start the waiting jobs KAI would start at ``when`` by evicting others (``replay_evictions``: a job its
        quota lets in whose queue is below its deserved quota or holds lower-priority work), or by moving them
        (``replay_moves``: a job whose GPUs are free in total, not where its pods fit)."""
        if not self.waiting or not weighed(self.room, when):
            return

        def let_in(w: Waiter) -> bool:
            return not (w.quota is not None and quota_holds(w.quota, self.delta))

        reclaimers: list[Waiter] = []
        if self.checks < weighed_steps(self.room):
            over = over_deserved(self.room, self.holders)
            lowest: dict[str, int] = {}  # per queue, the lowest priority rank it runs
            for h in self.holders.values():
                r = self._rank(h.job)
                if r < lowest.get(h.key[1], r + 1):
                    lowest[h.key[1]] = r
            reclaimers = [
                w
                for w in self.waiting
                if (
                    (over - {w.key[1]} and below_deserved(w.quota, self.delta))
                    or lowest.get(w.key[1], self._rank(w.job)) < self._rank(w.job)
                )
                and let_in(w)
            ]
        movers: list[Waiter] = []
        if self.moves < moves.MAX_STEPS:
            # free GPUs over a set of usable nodes, summed once a step over the nodes with any
            free_on: dict[frozenset[str], int] = {}
            open_nodes = [(n, g) for n, g in self.free.items() if g > 0]
            for w in self.waiting:
                if w.usable not in free_on:
                    free_on[w.usable] = sum(g for n, g in open_nodes if n in w.usable)
            movers = [w for w in self.waiting if free_on[w.usable] >= w.req.total and let_in(w)]
            self.moves += 1 if movers else 0
        if reclaimers:
            self.checks += 1
        done = {e.label for e, _h in self.ended}
        for ev in evictions(self.room, self.holders, reclaimers, self.evicted, done, when):
            if any(label not in self.holders for label in ev.victims):
                continue  # weighed on a state the books have left since
            if any(self.holders[label].since == when for label in ev.victims):
                # a job this very session placed is not a victim of it: KAI's reclaim and preempt weigh the jobs
                # running when the session began (else each reclaimer evicts the one before it, in a chain)
                continue
            for label in ev.victims:
                h = self.holders.pop(label)
                self._free(h)
                self.evicted.add(label)
                self.pending = [e for e in self.pending if e.label != label]
                requeue(self.waiting, waiting_again(self.room, h.job))
            self._take(ev.waiter, ev.nodes)
            self.start(ev.waiter, dict(ev.nodes), when, ev.victims)
        failed: set[tuple[object, ...]] = set()  # a request no move starts, at this step
        for w in movers:
            if w not in self.waiting or (w.shape, w.req.pods) in failed:
                continue
            mv = moves.consolidate(self.room, w, self.free, self.left, self.holders, when)
            if mv is None:
                failed.add((w.shape, w.req.pods))
                continue
            for label, nodes in mv.moved.items():
                self._move(label, nodes, when)
                self.evicted.add(label)
            self._take(w, mv.nodes)
            self.start(w, dict(mv.nodes), when, list(mv.moved))

    def _take(self, w: Waiter, nodes: dict[str, int]) -> None:
        per = max(w.req.gpus_per_pod, 1)
        for node, pods in nodes.items():
            self.free[node] = max(self.free.get(node, 0) - pods * per, 0)
        resources.take(self.left, w.req, nodes)

    def _move(self, label: str, nodes: dict[str, int], when: datetime) -> None:
        """A running job KAI moves: evicted and placed again on ``nodes``, it starts over there (its expected
        end is read again from ``when``)."""
        h = self.holders[label]
        for node, g in h.gpus.items():
            self.free[node] = self.free.get(node, 0) + g
        resources.give_back(self.left, h.held)
        req = job_request(self.room.di, h.job)
        per = req.gpus_per_pod
        h.gpus = {n: p * per for n, p in nodes.items()}
        for node, g in h.gpus.items():
            self.free[node] = max(self.free.get(node, 0) - g, 0)
        h.held = resources.held_by(req, nodes)
        resources.take(self.left, req, nodes)
        h.job, h.since = running(h.job, when), when
        self.pending = [e for e in self.pending if e.label != label]
        expected = self.end_of(h.job, when)
        if expected is not None:
            self.expect(expected)

    def _rank(self, job: EntityState) -> int:
        """A job's priority rank (``precedence.job_rank``: KAI preempts a lower one of the same queue), read once."""
        label = job.label
        if label not in self.ranks:
            self.ranks[label] = job_rank(job)
        return self.ranks[label]


__all__ = ["BUCKET", "HORIZON", "MAX_STEPS", "Books", "replay"]
