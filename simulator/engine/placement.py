"""Gang placement during one scheduling pass, as KAI's allocate action places: all or nothing, bin-packing onto
the most allocated node that fits (each node judged by ``fit``).
"""
# size: the Placer: one pass's free-GPU indexes and the gang placement that reads them

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .fit import (
    DEFAULT_TOLERATIONS,
    EPS,
    UNREACHABLE_TAINTS,
    UNSCHEDULABLE_TAINT,
    Room,
    filter_node,
    fit_pod,
    fit_score,
    free_gpus,
    needs_rooms,
    take,
    tolerates,
)
from .messages import INSUFFICIENT
from .sharing import cpu_memory_request, node_requests

if TYPE_CHECKING:
    from ..state import SimJob, SimPod
    from .world import World

__all__ = [
    "DEFAULT_TOLERATIONS",
    "UNREACHABLE_TAINTS",
    "UNSCHEDULABLE_TAINT",
    "Placer",
    "Room",
    "filter_node",
    "fit_pod",
    "take",
    "tolerates",
]


class Placer:
    """Free GPUs of every node during one scheduling pass, with per-shape filter caching."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.order = {name: i for i, name in enumerate(world.nodes)}
        self.free: dict[str, list[int]] = {n: free_gpus(node) for n, node in world.nodes.items()}
        # CPU and memory count only on pools that set them; then every job goes through the rooms.
        self.counts_resources = any(
            n.cpu_millis is not None or n.memory_bytes is not None for n in world.nodes.values()
        )
        self._rooms: dict[str, Room] | None = None
        self._filters: dict[tuple, dict[str, tuple[str, dict[str, str] | None] | None]] = {}
        self.version = 0  # bumps on every bind/release, to invalidate cached failures
        self.memo: dict[Any, tuple[int, Any]] = {}  # (version, value): per-pass results valid until it moves
        # Indexes (see "Indexes" below): nodes by free whole GPUs per job shape, shared GPUs by use.
        self.names = list(world.nodes)
        self._buckets: dict[tuple, list[list[int]]] = {}
        self._shared: list[tuple[float, int, int]] | None = None  # (-share in use, node order, GPU index)
        self._shared_of: dict[int, list[tuple[float, int, int]]] = {}  # node order -> its entries

    def shape(self, job: SimJob) -> tuple:
        return (
            tuple(sorted(job.node_selector.items())),
            tuple(tuple(sorted(t.items())) for t in job.tolerations),
        )

    def filters(self, job: SimJob) -> dict[str, tuple[str, dict[str, str] | None] | None]:
        key = self.shape(job)
        got = self._filters.get(key)
        if got is None:
            got = {n: filter_node(node, job) for n, node in self.world.nodes.items()}
            self._filters[key] = got
        return got

    def rooms(self) -> dict[str, Room]:
        if self._rooms is None:
            used = node_requests(self.world) if self.counts_resources else {}
            out = {}
            for n, node in self.world.nodes.items():
                room = Room(list(self.free[n]))
                if node.device_plugin_healthy and node.sharing:
                    room.shared = {
                        g.index: g.shared_fraction
                        for g in node.gpus
                        if g.reservation and g.present and g.healthy
                    }
                if node.mig_layout and node.mig_state != "pending" and node.device_plugin_healthy:
                    for g in node.gpus:
                        if g.present and g.healthy:
                            for inst in g.mig:
                                if inst.pod is None:
                                    room.mig.setdefault(inst.profile, []).append((g.index, inst.gi_id))
                c, m = used.get(n, (0, 0))
                room.cpu = None if node.cpu_millis is None else node.cpu_millis - c
                room.mem = None if node.memory_bytes is None else node.memory_bytes - m
                out[n] = room
            self._rooms = out
        return self._rooms

    def _released_rooms(self, released: list[SimPod]) -> dict[str, Room]:
        """Rooms as they would be with ``released`` pods gone (victim search)."""
        rooms = self.rooms()
        out: dict[str, Room] = {}
        for p in released:
            if p.node is None:
                continue
            node = self.world.nodes[p.node]
            room = out.get(p.node) or rooms[p.node].copy()
            out[p.node] = room
            key = f"{p.namespace}/{p.name}"
            if p.mig_instances:
                for gi, gid in p.mig_instances:
                    if p.mig_profile:
                        room.mig.setdefault(p.mig_profile, []).append((gi, gid))
            elif p.shared:
                for i in p.gpu_indices:
                    frac = node.gpus[i].shares.get(key, 0.0)
                    if i in room.shared:
                        room.shared[i] -= frac
                        if room.shared[i] <= EPS:
                            del room.shared[i]
                            room.free.append(i)
            else:
                room.free.extend(i for i in p.gpu_indices if i not in room.free)
            if room.cpu is not None:
                room.cpu += p.cpu_millis
            if room.mem is not None:
                room.mem += p.memory_bytes
        return out

    def place(
        self,
        job: SimJob,
        extra: dict[str, list[int]] | None = None,
        released: list[SimPod] | None = None,
    ) -> tuple[list[tuple[str, Any]] | None, int, dict[str, Any]]:
        """Place the whole gang or nothing. Returns (placement, pods placed before failing, free counts then)."""
        if self.counts_resources or needs_rooms(job) or released:
            return self._place_rooms(job, released or [])
        if not extra:
            return self._place_indexed(job)
        filt = self.filters(job)
        ok = [n for n, r in filt.items() if r is None]
        counts = {n: len(self.free[n]) + len((extra or {}).get(n, ())) for n in ok}
        chosen: list[str] = []
        gpp = int(job.gpus_per_pod)  # whole GPUs: these paths place no share
        for i in range(job.pods):
            best = None
            for n in ok:
                c = counts[n]
                if c >= gpp and (best is None or (c, self.order[n]) < (counts[best], self.order[best])):
                    best = n
            if best is None:
                return None, i, counts
            counts[best] -= gpp
            chosen.append(best)
        taken: dict[str, int] = {}
        out = []
        for n in chosen:
            pool = sorted([*self.free[n], *(extra or {}).get(n, ())])
            start = taken.get(n, 0)
            out.append((n, pool[start : start + gpp]))
            taken[n] = start + gpp
        return out, job.pods, counts

    def _place_indexed(self, job: SimJob) -> tuple[list[tuple[str, Any]] | None, int, dict[str, Any]]:
        """``place`` for whole GPUs without counted CPU/memory: the node with the fewest free GPUs that has
        enough (then node order), found in the free-count index instead of a scan of every node."""
        gpp = int(job.gpus_per_pod)  # whole GPUs: these paths place no share
        taken: dict[str, int] = {}  # GPUs this gang took so far, per node
        chosen: list[str] = []
        for i in range(job.pods):
            best: tuple[int, int] | None = None  # (free count, node order)
            for n, k in taken.items():  # nodes this gang already uses: their tentative counts
                c = len(self.free[n]) - k
                if c >= gpp and (best is None or (c, self.order[n]) < best):
                    best = (c, self.order[n])
            for o, c in self._lowest(job, gpp, exclude=taken):
                if best is None or (c, o) < best:
                    best = (c, o)
                break
            if best is None:
                filt = self.filters(job)
                counts = {n: len(self.free[n]) - taken.get(n, 0) for n, r in filt.items() if r is None}
                return None, i, counts
            n = self.names[best[1]]
            taken[n] = taken.get(n, 0) + gpp
            chosen.append(n)
        out = []
        start: dict[str, int] = {}
        for n in chosen:
            pool = sorted(self.free[n])
            at = start.get(n, 0)
            out.append((n, pool[at : at + gpp]))
            start[n] = at + gpp
        return out, job.pods, {}

    #
    # Indexes: each job shape (selector, tolerations) has its nodes that pass the filters bucketed by free
    # whole GPUs (node order within a bucket), so the best-fitting node is the first of the lowest bucket
    # that is high enough; shared GPUs are kept sorted by the share in use. Both follow every commit.
    #

    def _bucket_key(self, job: SimJob, sharing: bool) -> tuple:
        return (self.shape(job), sharing)

    def _buckets_for(self, job: SimJob, sharing: bool = False) -> list[list[int]]:
        key = self._bucket_key(job, sharing)
        got = self._buckets.get(key)
        if got is None:
            filt = self.filters(job)
            width = max((len(node.gpus) for node in self.world.nodes.values()), default=0)
            got = [[] for _ in range(width + 1)]
            for o, n in enumerate(self.names):
                if filt[n] is None and (not sharing or self.world.nodes[n].sharing):
                    got[len(self.free[n])].append(o)  # ascending: enumerate is in node order
            self._buckets[key] = got
        return got

    def _lowest(self, job: SimJob, need: int, exclude: dict[str, Any], sharing: bool = False):  # noqa: ANN202
        """(node order, free count) of the nodes passing the job's filters with at least ``need`` free GPUs,
        fewest free first, then node order (``exclude``: nodes the caller judges itself)."""
        buckets = self._buckets_for(job, sharing)
        for c in range(max(need, 0), len(buckets)):
            for o in buckets[c]:
                if self.names[o] not in exclude:
                    yield o, c

    def _reindex(self, n: str, old_free: int) -> None:
        """Node ``n``'s free count moved from ``old_free``: move it between buckets of every shape."""
        new_free = len(self.free[n])
        o = self.order[n]
        if new_free != old_free:
            for buckets in self._buckets.values():
                row = buckets[old_free]
                i = bisect_left(row, o)
                if i < len(row) and row[i] == o:
                    del row[i]
                    insort(buckets[new_free], o)
        if self._shared is not None and self._rooms is not None:
            for e in self._shared_of.pop(o, ()):
                del self._shared[bisect_left(self._shared, e)]
            mine = [(-used, o, gi) for gi, used in self._rooms[n].shared.items()]
            for e in mine:
                insort(self._shared, e)
            if mine:
                self._shared_of[o] = mine

    def _shared_index(self) -> list[tuple[float, int, int]]:
        if self._shared is None:
            self._shared_of = {}
            for n, room in self.rooms().items():
                if room.shared:
                    o = self.order[n]
                    self._shared_of[o] = [(-used, o, gi) for gi, used in room.shared.items()]
            self._shared = sorted(e for mine in self._shared_of.values() for e in mine)
        return self._shared

    def _room_fits_cpu(self, job: SimJob, room: Room) -> bool:
        if room.cpu is None and room.mem is None:
            return True
        cpu, mem = cpu_memory_request(job)
        return not ((room.cpu is not None and cpu > room.cpu) or (room.mem is not None and mem > room.mem))

    def _best_indexed(
        self, job: SimJob, filt: dict[str, Any], rooms: dict[str, Room], exclude: dict[str, Room]
    ) -> tuple[tuple, str, Any] | None:
        """What the scan of ``_place_rooms`` would pick among the nodes not in ``exclude``, from the indexes:
        (score, node, allocation) or None. Whole GPUs: the fewest free whole GPUs that suffice; a fraction:
        the fullest shared GPU it fits (then fewest free whole GPUs), else a free GPU on a sharing node."""
        if not job.shared:
            k = job.devices_per_pod
            return self._first_fit(job, k, exclude, rooms, lambda room: sorted(room.free)[:k])
        frac = float(job.gpu_fraction or 0.0)
        if frac > 1 + EPS:
            return None
        entries = self._shared_index()
        # Entries run from the fullest shared GPU down; those the share fits are a suffix (monotone in use).
        lo, hi = 0, len(entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if -entries[mid][0] + frac <= 1 + EPS:
                hi = mid
            else:
                lo = mid + 1
        i = lo
        while i < len(entries):
            level = entries[i][0]
            best: tuple | None = None
            seen: set[int] = set()
            while i < len(entries) and entries[i][0] == level:
                _neg, o, gi = entries[i]
                i += 1
                if o in seen:
                    continue  # this node's lowest GPU index at this level came first
                seen.add(o)
                n = self.names[o]
                if n in exclude or filt[n] is not None:
                    continue
                room = rooms[n]
                if not self._room_fits_cpu(job, room):
                    continue
                alloc = [gi]
                score = (fit_score(job, room, alloc), o)
                if best is None or score < best[0]:
                    best = (score, n, alloc)
            if best is not None:
                return best

        def free_gpu(room: Room) -> list[int] | None:
            if room.shared and any(used + frac <= 1 + EPS for used in room.shared.values()):
                return None  # it has a shared GPU the share fits: judged above (and refused there)
            return [min(room.free)]

        return self._first_fit(job, 1, exclude, rooms, free_gpu, sharing=True)

    def _first_fit(
        self,
        job: SimJob,
        need: int,
        exclude: dict[str, Room],
        rooms: dict[str, Room],
        alloc_of: Callable[[Room], list[int] | None],
        sharing: bool = False,
    ) -> tuple[tuple, str, Any] | None:
        """The first node of the free-count index (fewest free GPUs that suffice, then node order) whose room
        ``alloc_of`` gives an allocation (None: not this node) and whose CPU and memory fit: (score, node,
        allocation), as ``_best_indexed`` returns it."""
        for o, _c in self._lowest(job, need, exclude, sharing):
            n = self.names[o]
            room = rooms[n]
            alloc = alloc_of(room)
            if alloc is not None and self._room_fits_cpu(job, room):
                return (fit_score(job, room, alloc), o), n, alloc
        return None

    def _place_rooms_indexed(
        self, job: SimJob, filt: dict[str, Any], rooms: dict[str, Room]
    ) -> tuple[list[tuple[str, Any]] | None, int, dict[str, Any]]:
        tent: dict[str, Room] = {}
        out: list[tuple[str, Any]] = []
        for i in range(job.pods):
            best = self._best_indexed(job, filt, rooms, tent)
            for n, room in tent.items():  # nodes this gang already uses: their tentative rooms
                if filt[n] is not None:
                    continue
                alloc, _why = fit_pod(job, self.world.nodes[n], room)
                if alloc is None:
                    continue
                score = (fit_score(job, room, alloc), self.order[n])
                if best is None or score < best[0]:
                    best = (score, n, alloc)
            if best is None:
                return None, i, {"rooms": {**rooms, **tent}}
            _s, n, alloc = best
            target = tent.get(n)
            if target is None:
                target = tent[n] = rooms[n].copy()
            take(job, self.world.nodes[n], target, alloc)
            out.append((n, alloc))
        return out, job.pods, {"rooms": {**rooms, **tent}}

    def _place_rooms(
        self, job: SimJob, released: list[SimPod]
    ) -> tuple[list[tuple[str, Any]] | None, int, dict[str, Any]]:
        filt = self.filters(job)
        ok = [n for n, r in filt.items() if r is None]
        rooms = self.rooms()
        tent = self._released_rooms(released) if released else {}
        out: list[tuple[str, Any]] = []
        if not released and not job.mig_profile and job.gpu_memory_mib is None:
            return self._place_rooms_indexed(job, filt, rooms)
        for i in range(job.pods):
            best: tuple | None = None
            for n in ok:
                node = self.world.nodes[n]
                room = tent.get(n) or rooms[n]
                alloc, _why = fit_pod(job, node, room)
                if alloc is None:
                    continue
                score = (fit_score(job, room, alloc), self.order[n])
                if best is None or score < best[0]:
                    best = (score, n, alloc)
            if best is None:
                return None, i, {"rooms": {**rooms, **tent}}
            _s, n, alloc = best
            target = tent.get(n)
            if target is None:
                target = tent[n] = rooms[n].copy()
            take(job, self.world.nodes[n], target, alloc)
            out.append((n, alloc))
        return out, job.pods, {"rooms": {**rooms, **tent}}

    def place_on(self, job: SimJob, nodes: list[str]) -> list[tuple[str, Any]] | None:
        """The job's pods on the given nodes, one each in order (a job the scenario starts as running there),
        or None when they do not fit there."""
        rooms = self.rooms()
        tent: dict[str, Room] = {}
        out: list[tuple[str, Any]] = []
        for n in nodes:
            node = self.world.nodes.get(n)
            if node is None:
                return None
            room = tent.setdefault(n, rooms[n].copy())
            alloc, _why = fit_pod(job, node, room)
            if alloc is None:
                return None
            take(job, node, room, alloc)
            out.append((n, alloc))
        return out

    def commit(self, placement: list[tuple[str, Any]], job: SimJob | None = None) -> None:
        before = {n: len(self.free[n]) for n, _idx in placement}
        if self._rooms is not None and job is not None:
            for n, alloc in placement:
                take(job, self.world.nodes[n], self._rooms[n], alloc)
        for n, idx in placement:
            if job is not None and needs_rooms(job):
                if job.shared and self._rooms is not None:
                    self.free[n] = list(self._rooms[n].free)
                continue
            self.free[n] = [i for i in self.free[n] if i not in idx]
        for n, old in before.items():
            self._reindex(n, old)
        self.version += 1

    def refresh(self, nodes: set[str]) -> None:
        for n in nodes:
            self.free[n] = free_gpus(self.world.nodes[n])
        self._rooms = None
        self._buckets.clear()
        self._shared = None
        self.version += 1

    def reasons(self, job: SimJob, counts: dict[str, Any]) -> list[Any]:
        """Per-node failure reasons for the pod that did not fit, in node order (a list when several)."""
        filt = self.filters(job)
        rooms = counts.get("rooms") if isinstance(counts.get("rooms"), dict) else None
        out: list[Any] = []
        for n in self.world.nodes:
            r = filt[n]
            if r is not None:
                out.append(r)
            elif rooms is not None:
                _alloc, why = fit_pod(job, self.world.nodes[n], rooms[n])
                if len(why) == 1:
                    out.append(why[0])
                elif why:
                    out.append(why)
            elif counts.get(n, 0) < job.gpus_per_pod:
                out.append((INSUFFICIENT, None))
        return out
