"""The CPU and memory in the queue replayed forward (``incidents.diagnosis.replay``): what each node has left, and
what each running job holds where, kept as jobs end, start and move.

A node's GPUs are not all of its room: on a cluster where pods ask for many cores (Alibaba's GPU trace: 12 to 96
cores per pod on 96-core nodes), a node with free GPUs often has no CPU left for one more pod, and a job that
the replay started there at the next end of any job would not start there in KAI (nor in the pass at t, which
counts both). The room is the pass's own (``scheduling_pass``: node -> [cores, bytes] left, None where the node
does not report it), read at t from each node's allocatable CPU and memory less its bound pods' requests, less
what the pass at t starts; a job that ends gives back what its pods asked where they ran.

Pure: no database, no simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from incidents.diagnosis.node_resources import node_base, requested_on
from incidents.diagnosis.placement import take_room
from incidents.diagnosis.request import Request, job_request

if TYPE_CHECKING:
    from incidents.diagnosis.scheduling_pass import ClusterPass
    from incidents.diagnosis.types import DiagnosisInput

Left = dict[
    str, list[float | None]
]  # node -> [cores, bytes] left (None: not reported), as ``placement.place``
Held = dict[str, list[float]]  # node -> [cores, bytes] a job's pods there ask


def room_at(di: DiagnosisInput, base: ClusterPass) -> Left:
    """Every node's CPU and memory left at t once the pass at t's starts have taken theirs. Call inside
    ``di.indexed()`` (the per-node reads are the pass's own, built once)."""
    left: Left = {}
    for nd in di.nodes:
        b = node_base(di, nd)
        cores, mem = requested_on(di, nd.name)
        left[nd.name] = [
            None if b.cpu_allocatable is None else max(b.cpu_allocatable - cores, 0.0),
            None if b.memory_allocatable is None else max(float(b.memory_allocatable) - mem, 0.0),
        ]
    for c in base.starts:
        if c.whole:
            take(left, job_request(di, c.job), c.nodes)
    return left


def held_by(req: Request, nodes: dict[str, int]) -> Held:
    """What a job the replay places asks per node: its pods there (``nodes``: node -> pods) times its request."""
    return {
        n: [pods * (req.cpu_per_pod or 0.0), pods * float(req.memory_per_pod or 0)]
        for n, pods in nodes.items()
    }


# A start's pods (node -> pods) take their CPU and memory: the pass's own charge, on the replay's books.
take = take_room


def give_back(left: Left, held: Held) -> None:
    """A job that ends, is evicted or moves gives back what its pods asked."""
    for node, (cpu, mem) in held.items():
        got = left.get(node)
        if got is None:
            continue
        if got[0] is not None:
            got[0] += cpu
        if got[1] is not None:
            got[1] += mem


def pods_taken(left: Left, node: str, req: Request) -> int | None:
    """How many pods of ``req`` the node's CPU and memory left take (None: neither is counted)."""
    got = left.get(node)
    if got is None:
        return None
    known = []
    if req.cpu_per_pod and got[0] is not None:
        known.append(int(got[0] // req.cpu_per_pod + 1e-9))
    if req.memory_per_pod and got[1] is not None:
        known.append(int(got[1] // req.memory_per_pod))
    return min(known) if known else None


def copy(left: Left) -> Left:
    return {n: list(v) for n, v in left.items()}


class Overlay(dict[str, list[float | None]]):
    """``left`` as a scratch copy, each node copied when first read (``get``: what this module reads with): a
    consolidation tries several sets of moves, each on the room as the step left it, over a few nodes of many."""

    def __init__(self, base: Left) -> None:
        super().__init__()
        self.base = base

    def get(self, node: str, default: list[float | None] | None = None) -> list[float | None] | None:  # type: ignore[override]
        if node in self:
            return self[node]
        got = self.base.get(node)
        if got is None:
            return default
        mine = self[node] = list(got)
        return mine


__all__ = [
    "Held",
    "Left",
    "Overlay",
    "copy",
    "give_back",
    "held_by",
    "pods_taken",
    "room_at",
    "take",
]
