"""Room edits for a waiting job: uncordon or repair nodes it could use, hold the jobs ahead that take its room,
stop preemptible running jobs, or let it onto another pool (``incidents.diagnosis.edits`` tries each in one pass).
"""

from __future__ import annotations

from incidents.diagnosis import fit as F
from incidents.diagnosis.request import Request
from incidents.diagnosis.scheduling_pass import NO_ROOM, ClusterPass, Considered, whole_gpus
from incidents.diagnosis.shrink import free_after, static
from incidents.diagnosis.types import DiagnosisInput, EntityState
from incidents.diagnosis.whatif_edits import Edit

MAX_HOLDS = 4  # jobs ahead one answer may hold
MAX_NODES = 4  # nodes one answer may uncordon or repair


def size_refusal(req: Request, rows: list[F.NodeFit]) -> str:
    """Why no room edit can start a whole-GPU job: its pods are larger than every node it selects."""
    if not whole_gpus(req):
        return ""
    per = req.gpus_per_pod
    selected = [r for r in rows if F.SELECTOR not in r.blockers]
    largest_any = max((r.nominal for r in rows), default=0)
    if largest_any < per:
        return f"not possible: no node type can hold 1×{per} GPUs (the largest has {largest_any})"
    largest = max((r.nominal for r in selected), default=0)
    if largest < per:
        return (
            f"not possible where it may go: no node type it selects has {per} GPUs (the largest has {largest}); "
            "another pool could"
        )
    return ""


def room_candidates(
    di: DiagnosisInput,
    job: EntityState,
    req: Request,
    rows: list[F.NodeFit],
    me: Considered,
    base: ClusterPass,
) -> list[tuple[str, list[Edit], str]]:
    per = max(req.gpus_per_pod, 1)
    free = free_after(base, rows, me)
    out: list[tuple[str, list[Edit], str]] = []
    # the waiting jobs ahead that want the same GPUs would take room given back first: it must be enough for them
    ahead = [c for c in waiting_ahead(base, me) if c.usable & me.usable]
    want = req.pods + sum(-(-int(c.units) // per) for c in ahead)
    # uncordon / repair: nodes whose only static blocker is the cordon, or which are sick, with room for a pod
    cordoned = [r for r in rows if F.CORDONED in r.blockers and static(r) <= {F.CORDONED}]
    sick = [r for r in rows if _sick(r) and static(r) <= {F.NOT_READY}]
    for kind, cands, lifted in (
        ("uncordon", cordoned, set()),
        ("repair", sick, {F.DEVICE_PLUGIN, F.MISSING_GPU}),
    ):
        picks = _cover(cands, want, lifted, per)
        if picks:
            out.append((kind, [Edit(kind, n) for n in picks], f"{kind} {', '.join(picks)}"))
    # hold the jobs ahead that take room it could use, the largest takers first
    takers = sorted(
        (c for c in base.starts if c.order < me.order and c.whole and set(c.nodes) & me.usable),
        key=lambda c: (-sum(p for n, p in c.nodes.items() if n in me.usable) * c.units, c.order),
    )
    need = req.pods * per - sum(min(free.get(n, 0), free.get(n, 0) // per * per) for n in me.usable)
    held: list[Considered] = []
    gained = 0
    for c in takers[:MAX_HOLDS]:
        held.append(c)
        gained += int(c.units)
        if gained >= need:
            break
    if held and len(held) + len(ahead) <= MAX_HOLDS:
        held += ahead  # the jobs ahead still waiting would take the room first: they wait too
        names = ", ".join(c.label for c in held)
        out.append(("hold", [Edit("hold", c.job.name, c.job.namespace) for c in held], f"hold {names}"))
    stop = _stop_running(di, req, rows, free, me, base, per)
    if stop:
        names = ", ".join(j.ref.label for j in stop)
        out.append(("stop", [Edit("hold", j.name, j.namespace) for j in stop], f"stop {names}"))
    # another pool: nodes closed to it only by a taint or its selector, with room for its pods
    other = [r for r in rows if r.blockers and static(r) and static(r) <= {F.TAINT, F.SELECTOR}]
    pools: dict[str, list[F.NodeFit]] = {}
    for r in other:
        pools.setdefault(r.pool or r.node, []).append(r)
    best = max(pools.values(), key=lambda rs: sum(r.free // per for r in rs), default=[])
    if best and sum(r.free // per for r in best) >= req.pods:
        node = max(best, key=lambda r: r.free)
        what = "tolerate its taints" if any(r.untolerated for r in best) else "select it"
        out.append(
            ("onto", [Edit("onto", job.name, job.namespace, profile=node.node)],
             f"let it onto pool {node.pool or node.node} ({what})")
        )  # fmt: skip
    return out


_CLASS_ORDER = {"inference": 3, "build": 2, "interactive-preemptible": 1}  # higher: stopped last


def waiting_ahead(base: ClusterPass, me: Considered) -> list[Considered]:
    """The whole-GPU jobs ahead of ``me`` the pass at t does not start for want of room."""
    return [c for c in base.considered[: me.order - 1] if c.outcome == NO_ROOM and c.whole]


def _stop_running(
    di: DiagnosisInput,
    req: Request,
    rows: list[F.NodeFit],
    free: dict[str, int],
    me: Considered,
    base: ClusterPass,
    per: int,
) -> list[EntityState]:
    """The fewest preemptible running jobs on nodes it could use whose GPUs, freed, take its pods: the lowest
    priority class first, then the newest (the least work lost). [] when it has room already or they cannot."""
    open_rows = {r.node: r for r in rows if not static(r)}
    room = dict(free)
    if sum(room.get(n, 0) // per for n in open_rows) >= req.pods:
        return []
    # the waiting jobs ahead that want the same GPUs take freed room first: free enough for them too
    want = req.pods + sum(-(-int(c.units) // per) for c in waiting_ahead(base, me) if c.usable & me.usable)
    held: dict[str, tuple[EntityState, dict[str, int]]] = {}
    for node in open_rows:
        for p in di.pods_on_node(node):
            j = di.find("job", p.get("job") or "", p.namespace) if p.get("job") else None
            if j is None or j.get("phase") != "Running" or j.get("preemptible") is False:
                continue
            entry = held.setdefault(j.ref.label, (j, {}))
            entry[1][node] = entry[1].get(node, 0) + int(p.get("gpus") or 0)
    ranked = sorted(
        held.values(),
        key=lambda h: (_CLASS_ORDER.get(h[0].get("priority_class") or "", 0), _neg(h[0].get("started"))),
    )
    picks: list[EntityState] = []
    for job, gpus in ranked[: MAX_HOLDS * 8]:
        if not any(room.get(n, 0) % per + g >= per or g >= per for n, g in gpus.items()):
            continue  # what it frees on each node is too little for one pod
        picks.append(job)
        for n, g in gpus.items():
            room[n] = room.get(n, 0) + g
        if sum(room.get(n, 0) // per for n in open_rows) >= want:
            return picks
        if len(picks) >= MAX_HOLDS:
            break
    return []


def _neg(started: object) -> str:
    """Newest first: a descending sort key from an ISO time."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in str(started or ""))


def _sick(r: F.NodeFit) -> bool:
    return F.NOT_READY in r.blockers or r.capacity < r.nominal or r.allocatable < r.capacity


def _cover(cands: list[F.NodeFit], want: int, lifted: set[str], per: int) -> list[str]:
    """The fewest of ``cands`` (most room first) whose room takes ``want`` pods; [] when all of them cannot."""
    picks: list[str] = []
    pods = 0
    for r in sorted(cands, key=lambda r: (-r.free_if(lifted), r.node))[:MAX_NODES]:
        here = r.free_if(lifted) // per
        if here <= 0:
            continue
        picks.append(r.node)
        pods += here
        if pods >= want:
            return picks
    return []
