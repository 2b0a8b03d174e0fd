"""Starts by eviction in the replay: at a step of the queue replayed forward (``incidents.diagnosis.replay``),
the waiting jobs the room left does not start that KAI would start by reclaiming GPUs from queues over their
fair share, or by preempting lower-priority jobs of their own queue.

The replay keeps its own books (free GPUs per node, who holds what); the eviction rules read a
``DiagnosisInput``. ``state_at`` writes the replay's books back as one: the jobs that ended are gone (their
pods with them), the jobs evicted wait again, the jobs the replay started run with their pods bound where it
put them. ``whatif_reclaim.reclaims`` then weighs the waiting jobs that found no room, in order, each on the
state the ones before it left (``reclaim.victims``: KAI's proportion rules, fair share and deserved quota,
queue priority, the victims' standing). Its answer is the replay's next move: the reclaimer starts on the
nodes it names, the victims go back to waiting.

KAI only (Kueue's preemption is its admission cycle's, not weighed here); whole GPUs only, like the replay.
Bounded: at most ``weighed_steps`` steps of a replay are weighed (4; fewer on a cluster of more than 400 nodes,
the step at t always), within ``WITHIN`` of t, and only steps where a queue holds more than its deserved quota
(KAI reclaims from no other) or a job outranks work of its own queue.
Pure: no database, no simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from incidents.diagnosis.queue_order import in_queue_key
from incidents.diagnosis.reclaim import carry_over, without
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduling_pass import NO_ROOM, ClusterPass
from incidents.diagnosis.types import DiagnosisInput, EntityState, iso
from incidents.diagnosis.whatif_reclaim import placed_pods, reclaims

if TYPE_CHECKING:
    from incidents.diagnosis.replay_room import Holder, Room, Waiter

MAX_CHECKS = (
    4  # steps of one replay weighed for reclaim and preemption (each writes the books back as a state)
)
# Node-states one replay may weigh: each weighed step reads every node's fit rows, running jobs and standings
# again on the books written back as a state (some 60 ms at 1,213 nodes), so a large cluster weighs fewer steps
# (``weighed_steps``): 4 up to 400 nodes, 1 (the step at t, shared by a forecast's draws) from 800.
CHECK_BUDGET = 1600
WITHIN = timedelta(hours=3)  # evictions are weighed at steps this close to t


@dataclass
class Eviction:
    """A waiting job the replay starts by evicting others (labels: they wait again), and where its pods go."""

    waiter: Waiter
    nodes: dict[str, int]  # node -> pods
    victims: list[str]


def weighed(room: Room, when: datetime) -> bool:
    """Whether the replay weighs evictions at a step at ``when``."""
    return room.di.scheduler == "kai" and when <= room.t + WITHIN


def weighed_steps(room: Room) -> int:
    """How many steps of a replay weigh reclaim and preemption: at every cluster size at least the step at t
    (``reclaim.victims`` reads a job's fit table once and, per victim tried, only the rows of the nodes the
    victim holds: milliseconds per waiting job at 1,213 nodes), up to ``MAX_CHECKS`` within ``CHECK_BUDGET``
    node-states; the jobs weighed per step stay bounded by ``whatif_reclaim.MAX_TRIED``."""
    if room.di.scheduler != "kai":
        return 0
    return max(1, min(MAX_CHECKS, CHECK_BUDGET // max(len(room.di.nodes), 1)))


def over_deserved(room: Room, holders: dict[str, Holder]) -> set[str]:
    """The queues whose running jobs hold more than their deserved quota (the only ones KAI reclaims from)."""
    if not room.deserved:
        for q in room.di.queues:
            quota = q.get("quota_gpus")
            room.deserved[q.name] = float(quota) if isinstance(quota, int | float) else float("inf")
    held: dict[str, float] = {}
    for h in holders.values():
        held[h.key[1]] = held.get(h.key[1], 0.0) + h.units
    return {q for q, units in held.items() if units > room.deserved.get(q, float("inf")) + 1e-9}


def evictions(
    room: Room,
    holders: dict[str, Holder],
    reclaimers: list[Waiter],
    evicted: set[str],
    done: set[str],
    when: datetime,
) -> list[Eviction]:
    """The jobs of ``reclaimers`` (in order) that start by reclaiming or preempting on the replay's state at
    ``when`` (``state_at``, ``whatif_reclaim.reclaims``). At t, before anything ends or is evicted, the draws
    of a forecast ask the same of the same state: weighed once while ``room.di`` is indexed."""
    if not reclaimers:
        return []
    memo: dict[tuple[int, ...], tuple[list[Waiter], list[Eviction]]] | None = None
    if when == room.t and not evicted and not done and _as_at_t(room, holders):
        memo = room.di.memo("replay_evictions_at_t", dict)
    key = tuple(id(w) for w in reclaimers)
    got = memo.get(key) if memo is not None else None
    if got is None or any(a is not b for a, b in zip(got[0], reclaimers, strict=True)):
        got = (list(reclaimers), _evictions(room, holders, reclaimers, evicted, done, when))
        if memo is not None:
            memo[key] = got  # the reclaimers held with it: their ids are not reused while it is
    return [Eviction(ev.waiter, dict(ev.nodes), list(ev.victims)) for ev in got[1]]


def _as_at_t(room: Room, holders: dict[str, Holder]) -> bool:
    """Whether the replay's holders are still the room's at t: the same jobs on the same GPUs."""
    if holders.keys() != room.holders.keys():
        return False
    for label, h in holders.items():
        at_t = room.holders[label]
        if h.job is not at_t.job or h.gpus != at_t.gpus or h.since != at_t.since:
            return False
    return True


def _evictions(
    room: Room,
    holders: dict[str, Holder],
    reclaimers: list[Waiter],
    evicted: set[str],
    done: set[str],
    when: datetime,
) -> list[Eviction]:
    state = state_at(room, holders, evicted, done, when)
    by_label = {w.label: w for w in reclaimers}
    with state.indexed():
        # the books written back hold the room's nodes, and most of its pods: what was read of them holds
        carry_over(room.di, state)
        considered = [
            replace(w.c, job=state.find("job", w.job.name, w.job.namespace) or w.job, outcome=NO_ROOM)
            for w in reclaimers
        ]
        cp = ClusterPass(rule="", considered=considered, waiting=len(considered))
        found = reclaims(state, cp)
        # and back: what the replay reads next of the room's nodes (``waiting_again``'s fit rows)
        carry_over(state, room.di)
    return [Eviction(by_label[r.label], dict(r.nodes), [v.label for v in r.victims]) for r in found]


def state_at(
    room: Room, holders: dict[str, Holder], evicted: set[str], done: set[str], when: datetime
) -> DiagnosisInput:
    """The replay's books as a ``DiagnosisInput`` at ``when`` (module doc). ``evicted``: the jobs the replay has
    evicted (waiting again, or started again elsewhere); ``done``: the jobs that have ended."""
    di = room.di
    at_t = {label for label, h in room.holders.items() if di.pods_of_job(h.job)}
    moved = (at_t - holders.keys()) | (at_t & evicted)  # their pods at t are gone
    view = without(di, [room.holders[label].job for label in moved])
    pods = list(view.pods)
    jobs: dict[str, EntityState] = {}
    for j in di.jobs:
        label = j.ref.label
        if label in done and label not in holders:
            j = replace(j, state={**j.state, "phase": "Succeeded", "active": 0})
        elif label in moved and label not in holders:
            j = replace(j, state={**j.state, "phase": "Pending", "active": 0})
        jobs[label] = j
    for label, h in holders.items():
        if label in at_t and label not in evicted:
            continue
        since = h.since or when
        jobs[label] = replace(h.job, state={**h.job.state, "phase": "Running", "started": iso(since)})
        pods.extend(bound_pods(di, h.job, h.gpus, since))
    return replace(view, t=when, pods=pods, jobs=list(jobs.values()))


def bound_pods(
    di: DiagnosisInput, job: EntityState, gpus: dict[str, int], when: datetime
) -> list[EntityState]:
    """The pods of a job the replay started, bound where it put them (``gpus``: whole GPUs per node)."""
    req = job_request(di, job)
    per = max(req.gpus_per_pod, 1)
    return placed_pods(job, req, {node: max(g // per, 1) for node, g in gpus.items()}, when, "replay")


def requeue(waiting: list[Waiter], w: Waiter) -> None:
    """Put an evicted job back among the waiting ones: ahead of the younger jobs of its queue (KAI orders a
    queue's jobs by priority, then age), else after its queue's last, else last."""
    mine = [i for i, o in enumerate(waiting) if o.key[1] == w.key[1]]
    key = in_queue_key(w.job)
    for i in mine:
        if in_queue_key(waiting[i].job) > key:
            waiting.insert(i, w)
            return
    waiting.insert(mine[-1] + 1 if mine else len(waiting), w)


__all__ = [
    "CHECK_BUDGET",
    "MAX_CHECKS",
    "WITHIN",
    "Eviction",
    "bound_pods",
    "evictions",
    "over_deserved",
    "weighed_steps",
    "requeue",
    "state_at",
    "weighed",
]
