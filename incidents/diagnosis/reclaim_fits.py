"""The fit table reclaim weighs its victims on (``reclaim.victims``), built once per waiting job and read again
only where a trial's victims touch.

A node's row reads only the node, the pods bound to it and its GPUs (``fit.node_fits``), so evicting a victim
changes only the rows of the nodes it touches (``Fits``): those are read again on a view of these nodes alone,
the victims' pods gone (``without``); every other row is the first table's. ``carry_over`` hands the tables to
the state an eviction leaves. ``place_rows`` places a gang over such a table as KAI does.

Pure: reads the ``DiagnosisInput``; no database, no simulator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from incidents.diagnosis import fit as F
from incidents.diagnosis.allocation import ACTIVE_POD_PHASES
from incidents.diagnosis.node_resources import carry_nodes
from incidents.diagnosis.placement import place, share_nodes
from incidents.diagnosis.request import Request
from incidents.diagnosis.types import READS, DiagnosisInput, EntityState

if TYPE_CHECKING:
    from incidents.diagnosis.reclaim import Victim


def _shared_at(di: DiagnosisInput) -> list[int]:
    """Where in ``di.gpus`` the GPUs with shares are (once per indexed block, and per list of GPUs while the
    states written from one another hold it: a fleet's GPUs are mostly whole)."""
    got: list[int] | None = di.memo(
        "reclaim_shared_at", lambda: [i for i, g in enumerate(di.gpus) if g.get("shares")]
    )
    return [i for i, g in enumerate(di.gpus) if g.get("shares")] if got is None else got


def _negative_gpus(di: DiagnosisInput) -> bool:
    """Whether a pod is recorded with fewer than no GPUs (once per indexed block, and per list of pods)."""
    got: bool | None = di.memo(
        "reclaim_negative_gpus", lambda: any(int(p.get("gpus") or 0) < 0 for p in di.pods)
    )
    return any(int(p.get("gpus") or 0) < 0 for p in di.pods) if got is None else got


READS["reclaim_shared_at"] = ("gpus",)
READS["reclaim_negative_gpus"] = ("pods",)


def without(di: DiagnosisInput, jobs: Iterable[EntityState]) -> DiagnosisInput:
    """The input as it would be with ``jobs``' pods gone: their shares leave their GPUs, and a shared GPU left
    with no share loses its reservation pod (KAI releases it), so the GPU is whole again."""
    pods = {(p.namespace, p.name) for j in jobs for p in di.pods_of_job(j)}
    if not pods:
        return di
    keys = {f"{ns}/{name}" for ns, name in pods}
    # the same list while no share leaves it (what was read of it holds: ``DiagnosisInput.inherit``)
    gpus = di.gpus
    emptied: set[str] = set()
    for i in _shared_at(di):
        g = gpus[i]
        shares = g.get("shares") or []
        if any(x.get("pod") in keys for x in shares):
            left = [x for x in shares if x.get("pod") not in keys]
            state = {**g.state, "shares": left}
            if not left:
                state.pop("reservation", None)
                emptied |= {g.name, str(g.get("uuid") or g.name)}
            if gpus is di.gpus:
                gpus = list(di.gpus)
            gpus[i] = replace(g, state=state)
    kept = [
        p for p in di.pods if (p.namespace, p.name) not in pods and p.get("reservation_for") not in emptied
    ]
    return replace(di, pods=kept, gpus=gpus)


def place_rows(rows: list[F.NodeFit], req: Request, usable: list[bool] | None = None) -> dict[str, int]:
    """Where the job's pods go over the fit ``rows`` of the cluster without the victims ({} when its gang does
    not fit): whole GPUs as KAI's binpack places them, shares first onto GPUs already shared, MIG where the
    profile is free (the fit rules). ``usable``: per row, whether it has no static blocker (known already)."""
    if usable is None:
        rows = [r for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
    else:
        rows = [r for r, u in zip(rows, usable, strict=True) if u]
    if not (req.share or req.share_memory_mib or req.mig):
        free = {r.node: r.free for r in rows}
        per = req.gpus_per_pod
        # a row without room for one pod takes nothing (``place`` skips it): left out before it sorts them
        return place([r for r in rows if per <= 0 or free[r.node] >= per], req, free, frozenset())
    if not F.fits(rows, req):
        return {}
    return share_nodes(rows, req)


def carry_over(old: DiagnosisInput, new: DiagnosisInput) -> None:
    """Give ``new`` what was read on ``old`` (both indexed) where it still holds: the lookups of the lists both
    hold (``DiagnosisInput.inherit``), what was read of each node whose pods and GPUs are the same objects
    (``node_resources.carry_nodes``), the fit tables ``victims`` built, the rows of the nodes whose pods or GPUs
    differ read again on ``new``, and what it read of each running job (weighed again where the job's pods
    differ): for a state written from another (the victims gone, the reclaimer bound), most of whose nodes and
    jobs are as they were. No node's reads nor fit table when the nodes or their history differ."""
    tables: dict[str, tuple[Request, list[F.NodeFit]]] | None = old.memo("reclaim_fit_tables", dict)
    target: dict[str, tuple[Request, list[F.NodeFit]]] | None = new.memo("reclaim_fit_tables", dict)
    if new is old or target is None or tables is None:
        return
    new.inherit(old)
    moved = {"pods": _moved(old.pods, new.pods), "gpus": _moved(old.gpus, new.gpus)}
    seen = old.memo("reclaim_evictable_seen", dict)
    if seen:
        new.memo("reclaim_evictable_seen", dict).update(seen)
    checked = old.memo("reclaim_evictable_checked", dict)
    if checked:  # the running jobs none of whose pods came or went
        jobs = {(p.namespace, p.get("job")) for p in moved["pods"]}
        into = new.memo("reclaim_evictable_checked", dict)
        into.update((k, v) for k, v in checked.items() if (v[0].namespace, v[0].name) not in jobs)
    if new.nodes is not old.nodes or new.history is not old.history or new.peak_gpus is not old.peak_gpus:
        return
    changed = {x.get("node") for x in (*moved["pods"], *moved["gpus"])}
    names = {n.name for n in new.nodes}
    changed = {n for n in changed if n in names}
    carry_nodes(old, new, changed)
    if not tables:
        return
    view = replace(
        new,
        nodes=[n for n in new.nodes if n.name in changed],
        pods=[p for n in changed for p in new.pods_bound_to(n)],
        gpus=[g for n in changed for g in new.gpus_of_node(n)],
    )
    for key, (req, rows) in tables.items():
        if key in target:
            continue
        at: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            at.setdefault(r.node, []).append(i)
        out = list(rows)
        placed: dict[str, int] = {}
        for r in F.node_fits(view, req) if changed else []:
            k = placed.get(r.node, 0)
            out[at[r.node][k]] = r
            placed[r.node] = k + 1
        target[key] = (req, out)


def _moved(before: list[EntityState], after: list[EntityState]) -> list[EntityState]:
    """What one list holds and the other does not (the same objects, not equal ones)."""
    if after is before:
        return []
    kept = {id(x) for x in after}
    was = {id(x) for x in before}
    return [x for x in before if id(x) not in kept] + [x for x in after if id(x) not in was]


class Fits:
    """The job's fit table over the cluster without some victims, built once on the state as given.

    A node's row reads only the node, the pods bound to it and its GPUs (``fit.node_fits``), so evicting a
    victim changes only the rows of the nodes it touches (``touch``): those are read again on a view of these
    nodes alone, the victims' pods gone (``without``); every other row is the first table's. One trial costs
    the victims' few nodes, not the 1,213 of a fleet. For a whole-GPU gang, ``may_fit`` first bounds the room
    from above (each row's free GPUs, plus what the victims' pods and the reservation pods they free hold
    there) and skips the placement when even that cannot take the gang.

    ``take`` and ``taken_rows`` follow the growing list of ``victims``' trials (the rows read again only for
    the last victim's nodes); ``rows`` and ``may_fit`` answer for any set (``_trim``, ``_stands``)."""

    def __init__(self, di: DiagnosisInput, req: Request) -> None:
        self.di, self.req = di, req
        self.per = req.gpus_per_pod
        self.whole = self.per > 0 and not (req.share or req.share_memory_mib or req.mig)
        self._base: list[F.NodeFit] | None = None  # the table on the state as given, read at its first use
        self.at: dict[str, list[int]] = {}  # node -> its rows' positions in the table
        self.by_name: dict[str, list[EntityState]] = {}
        self.usable: list[bool] = []  # rows without a static blocker
        self.room = 0  # pods of a whole-GPU gang the table's usable rows take
        self._touch: dict[int, tuple[frozenset[str], dict[str, int]]] = {}
        # share pod "ns/name" -> the GPUs it holds; GPU name or uuid -> its reservation pods (read at first use)
        self._shares: dict[str, list[EntityState]] | None = None
        self._reserving: dict[str, list[EntityState]] | None = None
        # the trials' running state: the victims so far, their freeable GPUs per node, the rows read again
        self.taken: list[EntityState] = []
        self.gain: dict[str, int] = {}
        self.unweighed: list[dict[str, int]] = []  # the GPUs of the victims taken since the bound was moved
        self.taken_room: int | None = None
        self.current: list[F.NodeFit] | None = None
        self.dirty: set[str] = set()

    @property
    def base(self) -> list[F.NodeFit]:
        """The job's fit table on the state as given: once per request while the input is indexed (the jobs
        weighed on one state ask a few shapes; a table's rows are read, never changed)."""
        if self._base is None:
            tables: dict[str, tuple[Request, list[F.NodeFit]]] | None = self.di.memo(
                "reclaim_fit_tables", dict
            )
            key = repr(self.req)
            if tables is None:
                self._base = F.node_fits(self.di, self.req)
            elif key in tables:
                self._base = tables[key][1]
            else:
                self._base = F.node_fits(self.di, self.req)
                tables[key] = (self.req, self._base)
            for i, r in enumerate(self._base):
                self.at.setdefault(r.node, []).append(i)
            for n in self.di.nodes:
                self.by_name.setdefault(n.name, []).append(n)
            self.usable = [not any(b in F.STATIC_BLOCKERS for b in r.blockers) for r in self._base]
            if self.whole:
                self.room = sum(r.free // self.per for r, u in zip(self._base, self.usable, strict=True) if u)
        return self._base

    def touch(self, job: EntityState) -> tuple[frozenset[str], dict[str, int]]:
        """The nodes whose rows evicting ``job`` may change: where its pods are, where the GPUs holding its
        shares are, and where those GPUs' reservation pods are (``without`` releases them); and per node the
        most GPUs its eviction frees there (its active pods' and those reservation pods')."""
        got = self._touch.get(id(job))
        if got is not None:
            return got
        nodes: set[str] = set()
        gain: dict[str, int] = {}

        def held(p: EntityState) -> None:
            node = p.get("node")
            if node:
                nodes.add(node)
                if p.get("phase") in ACTIVE_POD_PHASES:
                    gain[node] = gain.get(node, 0) + max(int(p.get("gpus") or 0), 0)

        for p in self.di.pods_of_job(job):
            held(p)
            for g in self._shared().get(f"{p.namespace}/{p.name}", ()):
                if g.get("node"):
                    nodes.add(g.get("node"))
                seen: set[int] = set()
                for key in (g.name, str(g.get("uuid") or g.name)):
                    for r in self._reservations().get(key, ()):
                        if id(r) not in seen:
                            seen.add(id(r))
                            held(r)
        got = self._touch[id(job)] = (frozenset(nodes), gain)
        return got

    def _shared(self) -> dict[str, list[EntityState]]:
        if self._shares is None:
            self._shares = {}
            gpus = self.di.gpus
            for i in _shared_at(self.di):
                for x in gpus[i].get("shares") or []:
                    self._shares.setdefault(x.get("pod"), []).append(gpus[i])
        return self._shares

    def _reservations(self) -> dict[str, list[EntityState]]:
        if self._reserving is None:
            self._reserving = {}
            for p in self.di.pods:
                if p.get("reservation_for"):
                    self._reserving.setdefault(str(p.get("reservation_for")), []).append(p)
        return self._reserving

    def _gained(self, node: str, before: int, after: int) -> int:
        """Pods of the gang the node's usable rows take more once ``after`` GPUs, not ``before``, may be freed."""
        base = self.base
        more = 0
        for i in self.at.get(node, ()):
            if self.usable[i]:
                r = base[i]
                top = r.allocatable - r.allocated
                more += max(top + after, 0) // self.per - max(top + before, 0) // self.per
        return more

    def _bound(self, gain: dict[str, int]) -> int:
        """Pods of the gang the table's usable rows take at most once ``gain`` GPUs per node may be freed."""
        if not self.base:
            return 0  # no row: no placement
        return self.room + sum(self._gained(node, 0, g) for node, g in gain.items())

    def may_fit_emptied(self) -> bool:
        """False only when a whole-GPU gang would not fit even with every pod gone: its pods of the allocatable
        GPUs of the rows without a static blocker (a pod of 16 GPUs on nodes of 8). Pods recorded with fewer
        than no GPUs would free more than that: then True."""
        if not self.whole or _negative_gpus(self.di):
            return True
        room = sum(
            max(r.allocatable, 0) // self.per for r, u in zip(self.base, self.usable, strict=True) if u
        )
        return room >= self.req.pods

    def may_fit(self, gone: list[Victim]) -> bool:
        """False only when the gang cannot fit once ``gone`` are evicted (a whole-GPU gang's room bounded from
        above); True otherwise, and always for shares and MIG."""
        if not self.whole:
            return True
        gain: dict[str, int] = {}
        for v in gone:
            for node, g in self.touch(v.job)[1].items():
                gain[node] = gain.get(node, 0) + g
        return self._bound(gain) >= self.req.pods

    def rows(self, gone: list[Victim]) -> list[F.NodeFit]:
        """The fit table over the cluster without ``gone``'s pods (``F.node_fits(without(di, gone))``)."""
        jobs = [v.job for v in gone]
        nodes: set[str] = set()
        for j in jobs:
            nodes |= self.touch(j)[0]
        out = list(self.base)
        self._swap(out, nodes, jobs)
        return out

    def given_back(self, rows: list[F.NodeFit], v: Victim, rest: list[Victim]) -> list[F.NodeFit]:
        """``rows(rest)`` from ``rows``, the table without ``rest`` and ``v``: only ``v``'s nodes read again."""
        out = list(rows)
        self._swap(out, set(self.touch(v.job)[0]), [x.job for x in rest])
        return out

    def place(self, rows: list[F.NodeFit]) -> dict[str, int]:
        """``place_rows`` over a table of this job (its rows where the first table's are, static blockers
        alike: they are the node's, not its pods')."""
        return place_rows(rows, self.req, self.usable if len(rows) == len(self.usable) else None)

    def take(self, job: EntityState) -> None:
        """One more victim for the trials (``taken_rows``, ``may_fit_taken``)."""
        self.taken.append(job)
        nodes, gain = self.touch(job)
        self.dirty |= nodes
        self.unweighed.append(gain)

    def may_fit_taken(self) -> bool:
        """``may_fit`` of every victim taken so far, the bound moved by the last ones' GPUs only."""
        if not self.whole:
            return True
        if self.taken_room is None:
            self.taken_room = self._bound({})
        for gain in self.unweighed:
            for node, g in gain.items():
                before = self.gain.get(node, 0)
                self.gain[node] = before + g
                self.taken_room += self._gained(node, before, before + g)
        self.unweighed = []
        return self.taken_room >= self.req.pods

    def taken_rows(self) -> list[F.NodeFit]:
        """``rows`` of every victim taken so far: the rows of the nodes the last ones touch read again."""
        if self.current is None:
            self.current = list(self.base)
        if self.dirty:
            self._swap(self.current, self.dirty, self.taken)
            self.dirty = set()
        return self.current

    def _swap(self, out: list[F.NodeFit], nodes: set[str], jobs: list[EntityState]) -> None:
        """Put into ``out`` the rows of ``nodes`` read on a view of them alone without ``jobs``' pods. The view
        holds the nodes, the pods bound to them, their GPUs, and of the jobs that touch them their pods and the
        GPUs holding their shares: all ``without`` reads to release a share, a GPU and its reservation pod."""
        if not self.base:
            return
        nodes = {n for n in nodes if n in self.at}
        if not nodes:
            return
        di = self.di
        near = [j for j in jobs if self.touch(j)[0] & nodes]
        pods = {id(p): p for n in nodes for p in di.pods_bound_to(n)}
        gpus = {id(g): g for n in nodes for g in di.gpus_of_node(n)}
        for j in near:
            for p in di.pods_of_job(j):
                pods.setdefault(id(p), p)
                for g in self._shared().get(f"{p.namespace}/{p.name}", ()):
                    gpus.setdefault(id(g), g)
        view = replace(
            di,
            nodes=[n for name in nodes for n in self.by_name[name]],
            pods=list(pods.values()),
            gpus=list(gpus.values()),
        )
        taken: dict[str, int] = {}
        for r in F.node_fits(without(view, near), self.req):
            k = taken.get(r.node, 0)
            out[self.at[r.node][k]] = r
            taken[r.node] = k + 1


__all__ = ["Fits", "carry_over", "place_rows", "without"]
