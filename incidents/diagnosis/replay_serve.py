"""One walk over the jobs still waiting at a step of the queue replayed forward (``replay``): in the scheduler's
order on the replay's books, each within its quota, in the whole GPUs, CPU and memory the step left free. Pure: no
database, no simulator."""

from __future__ import annotations

from collections.abc import Callable

from incidents.diagnosis.kueue_quota import Usage
from incidents.diagnosis.queue_order import QueueOrder
from incidents.diagnosis.replay_resources import Left, take
from incidents.diagnosis.replay_room import Room, Waiter, admits
from incidents.diagnosis.scheduling_pass import place

Key = tuple[frozenset[str], int]  # (usable nodes, GPUs per pod)


def serve(
    room: Room,
    waiting: list[Waiter],
    free: dict[str, int],
    left: Left,
    delta: dict[tuple[str, str], float],
    weighed: Callable[[], QueueOrder],
    usage: Usage,
) -> list[tuple[Waiter, dict[str, int], str | None]]:
    """One pass over ``waiting`` in the scheduler's order (``weighed``: built on the replay's books only when a
    job could start, each start charged before the next choice) in the room ``free`` and ``left`` (whole GPUs,
    CPU and memory per node; changed in place) with the
    allocations moved by ``delta`` and, on Kueue, what the ClusterQueues of a cohort hold per flavor (``usage``):
    the jobs that start, each with its pods per node and its flavor (Kueue, in a cohort). ``delta`` and
    ``usage`` are left as they are (the caller's ``Books.start`` charges each start once); the walk's own starts
    count against the quota (and the cohort's unused quota) of the jobs after them.

    The nodes with room for one pod are read once per (usable nodes, GPUs per pod) and kept as starts take room:
    hundreds of waiting jobs share a few request shapes, and each used to scan every free node. A job whose
    usable nodes lack the GPUs it asks cannot start later in the walk (starts only take room), nor can any job
    once those the room left could take have been reached: the walk stops there, which keeps a step whose ends
    free little room cheap."""
    out: list[tuple[Waiter, dict[str, int], str | None]] = []
    blocked: set[str] = set()
    open_nodes = [n for n, g in free.items() if g > 0]
    candidates: dict[Key, tuple[list[str], int]] = {}  # -> (nodes, their free GPUs)
    live: dict[int, int] = {}  # the jobs the room left could take: the GPUs each asks
    keyed: dict[Key, list[int]] = {}  # the live jobs of each candidates key
    for w in waiting:
        per = max(w.req.gpus_per_pod, 1)
        key = (w.usable, per)
        if key not in candidates:
            nodes = sorted(n for n in open_nodes if free[n] >= per and n in w.usable)
            candidates[key] = (nodes, sum(free[n] for n in nodes))
        if candidates[key][1] >= w.req.total:
            live[id(w.job)] = w.req.total
            keyed.setdefault(key, []).append(id(w.job))
    if not live:
        return out
    by_job = {id(w.job): w for w in waiting}
    order = weighed()
    moved, used = dict(delta), dict(usage)  # the starts of this walk, for the quota of the jobs after them
    while live:
        job = order.next()
        if job is None:
            break
        w = by_job[id(job)]
        if id(job) not in live:
            if w.fifo:
                blocked.add(w.key[1])
            continue
        del live[id(job)]
        if w.fifo and w.key[1] in blocked:
            continue
        per = max(w.req.gpus_per_pod, 1)
        nodes, total = candidates[(w.usable, per)]
        taken: dict[str, int] = {}
        admitted, flavor = admits(room, w, moved, used) if total >= w.req.total else (False, None)
        if admitted:
            rows = [r for r in (room.row(w, n) for n in nodes) if r is not None]
            taken = place(rows, w.req, free, frozenset(), left)
        if not taken:
            if w.fifo:
                blocked.add(w.key[1])
            continue
        for node, pods in taken.items():
            free[node] -= pods * w.req.gpus_per_pod
        take(left, w.req, taken)
        _took(taken, free, candidates, keyed, live)
        moved[w.key] = moved.get(w.key, 0.0) + w.req.units
        if flavor is not None:
            used[(w.key[1], flavor)] = used.get((w.key[1], flavor), 0.0) + w.req.units
        order.charge(job, w.req.units)
        out.append((w, taken, flavor))
    return out


def _took(
    taken: dict[str, int],
    free: dict[str, int],
    candidates: dict[Key, tuple[list[str], int]],
    keyed: dict[Key, list[int]],
    live: dict[int, int],
) -> None:
    """A start took ``taken``'s room: each candidates key whose nodes it touched keeps the nodes still with room for
    one pod, and its jobs that the room left no longer holds leave ``live`` (only the jobs of a key whose room
    shrank can have lost theirs)."""
    for k, (nodes, _total) in list(candidates.items()):
        if taken.keys().isdisjoint(nodes):
            continue
        kept = [n for n in nodes if free[n] >= k[1]]
        candidates[k] = (kept, sum(free[n] for n in kept))
        still = []
        for j in keyed.get(k, ()):
            if j in live and live[j] > candidates[k][1]:
                del live[j]
            elif j in live:
                still.append(j)
        keyed[k] = still


__all__ = ["serve"]
