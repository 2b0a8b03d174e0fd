"""KAI's consolidation in the replay's books: a waiting whole-GPU job whose GPUs are free in total, but not
where its pods fit, starts once running jobs are moved out of its way.

The rules are ``consolidation``'s (the model's reading of KAI's consolidate action): running preemptible
whole-GPU jobs of any queue are tried lowest priority first, then the smallest, then the newest, one more at a
time (at most ``MAX_MOVED``, a bound on the cost), until the job's gang fits the room they leave and every one
of them is placed again elsewhere (all its pods, on nodes it may use): every job tried is moved, as KAI moves
them, and starts over there; no queue's allocation moves.
Weighed on the replay's books (free whole GPUs, CPU and memory per node, who holds what where), not on a
``DiagnosisInput``: the books are what the replay has at each step, and ``consolidation`` over a whole
cluster's state is too slow to run at every step. A pod goes only where the CPU and memory left take it too.

Pure: no database, no simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from incidents.diagnosis import fit as F
from incidents.diagnosis import replay_resources as resources
from incidents.diagnosis.durations import preemptible_state
from incidents.diagnosis.precedence import job_rank
from incidents.diagnosis.replay_resources import Left
from incidents.diagnosis.replay_room import Holder, Room, Waiter, request_key
from incidents.diagnosis.request import Request, job_request

MAX_MOVED = 8  # jobs moved for one job at most
MAX_STEPS = 8  # steps of one replay weighed for consolidation (each sorts every running job)


@dataclass
class Moves:
    """Where the waiting job's pods go, and each moved job's pods (label -> node -> pods)."""

    nodes: dict[str, int]
    moved: dict[str, dict[str, int]]


def consolidate(
    room: Room,
    w: Waiter,
    free: dict[str, int],
    left: Left,
    holders: dict[str, Holder],
    when: datetime | None = None,
) -> Moves | None:
    """The moves that start ``w`` at ``when`` (module doc), or None. ``free`` and ``left`` (CPU and memory) are
    not changed. A job placed or moved at ``when`` is not moved again: KAI's session weighs the jobs running when
    it began (else one step moved the same few jobs out of the way of one waiting job after another)."""
    per = w.req.gpus_per_pod
    if per <= 0 or sum(free.get(n, 0) for n in w.usable) < w.req.total:
        return None
    kinds = [(_kind(room, h), h) for h in holders.values() if when is None or h.since != when]
    movable = [
        h for k, h in sorted(((k, h) for k, h in kinds if k[0]), key=lambda x: (x[0][2], x[1].units, x[0][3]))
    ]
    usable = sorted(w.usable)
    taken: list[Holder] = []
    for h in movable:
        if len(taken) >= MAX_MOVED:
            break
        taken.append(h)
        room_left, cm_left = dict(free), resources.Overlay(left)
        for t in taken:
            for node, g in t.gpus.items():
                room_left[node] = room_left.get(node, 0) + g
            resources.give_back(cm_left, t.held)
        mine = _place(usable, w.req, room_left, cm_left)
        if not mine:
            continue
        moved: dict[str, dict[str, int]] = {}
        for t in sorted(taken, key=lambda t: -t.units):
            t_per = _pods(room, t)[0]
            there = _place(sorted(usable_for(room, t)), _request(room, t), room_left, cm_left)
            if not there or there == {n: g // t_per for n, g in t.gpus.items()}:
                break
            moved[t.job.label] = there
        else:
            return Moves(mine, moved)
    return None


def _place(nodes: list[str], req: Request, free: dict[str, int], left: resources.Left) -> dict[str, int]:
    """``req``'s pods over ``nodes`` in ``free`` and ``left`` (taken from both), all or nothing; the fullest node
    that takes one first (KAI's bin-packing), where its CPU and memory left take the pod too."""
    per = max(req.gpus_per_pod, 1)
    out: dict[str, int] = {}
    want = req.pods
    for node in sorted((n for n in nodes if free.get(n, 0) >= per), key=lambda n: free.get(n, 0)):
        here = min(free.get(node, 0) // per, want)
        fit = resources.pods_taken(left, node, req)
        if fit is not None:
            here = min(here, fit)
        if here > 0:
            out[node] = here
            want -= here
        if want == 0:
            break
    if want > 0:
        return {}
    for node, n in out.items():
        free[node] -= n * per
    resources.take(left, req, out)
    return out


def _request(room: Room, h: Holder) -> Request:
    """A running job's request as the replay places it again: all its pods, none bound."""
    req = job_request(room.di, h.job)
    per, pods = _pods(room, h)
    return replace(req, pods=pods, bound_pods=0, gpus_per_pod=per)


def _kind(room: Room, h: Holder) -> tuple[bool, int, int, tuple[int, ...]]:
    """(movable: preemptible, whole GPUs only; GPUs per pod; priority rank; newest first) of a running job, read
    once per job."""
    label = h.job.label
    if label not in room.movers:
        req = job_request(room.di, h.job)
        whole = not (req.share or req.share_memory_mib or req.mig) and req.gpus_per_pod > 0
        room.movers[label] = (
            whole and preemptible_state(h.job.state),
            max(req.gpus_per_pod, 1),
            job_rank(h.job),
            tuple(-ord(c) for c in (h.job.get("submitted") or "")),
        )
    return room.movers[label]


def _pods(room: Room, h: Holder) -> tuple[int, int]:
    """(GPUs per pod, pods) of a running job."""
    per = _kind(room, h)[1]
    return per, max(sum(h.gpus.values()) // per, 1)


def usable_for(room: Room, h: Holder) -> frozenset[str]:
    """The nodes a running job's pods may go to (no static blocker for its request), read once per request."""
    req = job_request(room.di, h.job)
    key = request_key(req)
    if key not in room.usable:
        rows = F.node_fits(room.di, req)
        room.usable[key] = frozenset(
            r.node for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)
        )
    return room.usable[key]


__all__ = ["MAX_MOVED", "MAX_STEPS", "Moves", "consolidate", "usable_for"]
