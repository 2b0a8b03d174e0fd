"""Where a gang's pods go in the room a scheduling pass has left: KAI's default placement (binpack).

KAI's node-placement plugin scores each fitting node for a pod by how little it has left (GPUs for a GPU pod,
CPU for a pod asking none), so a pod goes to the fullest node that still takes it, a tie to the first node by
name; a node is filled before the next is opened. A pod asking no GPU goes to a node without GPUs before any
node with them (its resource-type score outweighs binpack's). ``cluster_pass``, ``fault_pass``, ``reclaim`` and
``consolidation`` all place through :func:`place`, so "where would it start" names the node KAI would pick.

Pure: reads fit rows and the room maps it is given.
"""

from __future__ import annotations

import math

from incidents.diagnosis import fit as F
from incidents.diagnosis.request import Request


def place(
    rows: list[F.NodeFit],
    req: Request,
    free: dict[str, int],
    lifted: frozenset[str],
    room: dict[str, list[float | None]] | None = None,
) -> dict[str, int]:
    """A gang's pods over ``rows`` using the room in ``free`` (all or nothing: {} when they do not all fit), as
    KAI's default placement (binpack) puts them: each pod onto the fitting node with the fewest free GPUs (a pod
    asking no GPU: the least free CPU), a tie by name, so a node is filled before the next is opened. Rows with
    a static blocker that is not lifted take nothing; CPU, memory and MIG limits still apply, the CPU and memory
    read from ``room`` (node -> [cores, bytes] left by the jobs placed before) where given, else from the row."""
    per = req.gpus_per_pod
    ignore = F.CPU_MEMORY in lifted
    usable: list[F.NodeFit] = []
    for row in rows:
        if per > 0 and free.get(row.node, 0) < per:
            continue  # no room for one pod: nothing else about the node matters (most rows of a busy cluster)
        if any(b in F.STATIC_BLOCKERS and b not in lifted for b in row.blockers):
            continue
        usable.append(row)
    # a pod asking no GPU goes to a node without GPUs first (KAI's resource-type score outweighs binpack's)
    usable.sort(key=lambda r: (per <= 0 and r.nominal > 0, _left(r, per, free, room), r.node))
    placed: dict[str, int] = {}
    want = req.pods
    for row in usable:
        here = want if per <= 0 else min(free.get(row.node, 0) // per, want)
        res = _resource_pods(row, req, room, ignore, lifted)
        if res is not None:
            here = min(here, res)
        if here > 0:
            placed[row.node] = here
            want -= here
        if want <= 0:
            return placed
    return {}


def _left(
    row: F.NodeFit, per: int, free: dict[str, int], room: dict[str, list[float | None]] | None
) -> float:
    """What binpack weighs a node by: its free GPUs, or for a pod asking none, its free CPU."""
    if per > 0:
        return free.get(row.node, 0)
    got = room.get(row.node) if room is not None else None
    cpu = got[0] if got is not None else row.cpu_free
    return math.inf if cpu is None else cpu


def _resource_pods(
    row: F.NodeFit,
    req: Request,
    room: dict[str, list[float | None]] | None,
    ignore: bool,
    lifted: frozenset[str],
) -> int | None:
    """Pods of the job the node's CPU, memory and MIG instances take (None: none of them is counted)."""
    got = room.get(row.node) if room is not None else None
    if got is None:
        return row.resource_pods(lifted)
    known = []
    if not ignore:
        if req.cpu_per_pod and got[0] is not None:
            known.append(int(got[0] // req.cpu_per_pod + 1e-9))
        if req.memory_per_pod and got[1] is not None:
            known.append(int(got[1] // req.memory_per_pod))
    if row.mig_pods is not None and F.MIG not in lifted:
        known.append(row.mig_pods)
    return min(known) if known else None


def take_room(room: dict[str, list[float | None]], req: Request, nodes: dict[str, int]) -> None:
    """Charge a start's CPU and memory to the nodes its pods go to."""
    for node, pods in nodes.items():
        got = room.get(node)
        if got is None:
            continue
        if got[0] is not None and req.cpu_per_pod:
            got[0] = max(got[0] - pods * req.cpu_per_pod, 0.0)
        if got[1] is not None and req.memory_per_pod:
            got[1] = max(got[1] - pods * req.memory_per_pod, 0.0)


def share_order(rows: list[F.NodeFit], req: Request) -> list[F.NodeFit]:
    """The nodes a share or MIG pod is tried on, in KAI's order: a node with a GPU already shared that takes the
    share first (KAI packs a share beside others before it reserves a free GPU), then binpack, the fewest free
    whole GPUs first, a tie by name."""

    def packed(r: F.NodeFit) -> bool:
        return any(F.share_fits(req, x["free"], x["free_mib"], x["free_mib"]) > 0 for x in r.shared)

    return sorted(rows, key=lambda r: (not packed(r), r.free, r.node))


def share_nodes(rows: list[F.NodeFit], req: Request) -> dict[str, int]:
    """Where a share or MIG job's pods go over its fit ``rows``, in KAI's order (``share_order``): node -> pods."""
    out: dict[str, int] = {}
    want = req.pods
    for r in share_order(rows, req):
        if r.fits and want > 0:
            out[r.node] = min(r.pods_fit, want)
            want -= out[r.node]
    return out


__all__ = ["place", "share_nodes", "share_order", "take_room"]
