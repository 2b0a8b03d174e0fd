"""The API server's storage: rendered objects, one global resourceVersion, watch history, list snapshots.

Like etcd behind a real API server, every change between two world ticks gets
the next resourceVersion, a bounded history answers watches from an older
resourceVersion (older than the history gives 410 Gone), and lists paginate
over a consistent snapshot kept for the last few ticks.
"""
# size: the object store, its watch history and its publication: one consistency unit

from __future__ import annotations

import bisect
import gc
import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, overload

import orjson

from simulator.kube import EVENT_TTL, Item, Signatures, build_context, core, resources

logger = logging.getLogger(__name__)

Key = tuple[str, str]
FIELD_PATHS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "status.phase": ("status", "phase"),
    "involvedObject.name": ("involvedObject", "name"),
    "involvedObject.kind": ("involvedObject", "kind"),
    "involvedObject.namespace": ("involvedObject", "namespace"),
    "involvedObject.uid": ("involvedObject", "uid"),
    "reason": ("reason",),
    "type": ("type",),
}


@dataclass(frozen=True)
class Entry:
    sig: Any
    rv: int
    data: bytes  # the object's JSON, with metadata.resourceVersion
    labels: dict[str, str]
    fields: dict[str, str]


@dataclass(frozen=True)
class Snapshot:
    rv: int
    entries: dict[str, dict[Key, Entry]]
    order: dict[str, list[Key]]  # keys sorted by (namespace, name)


def _prune(obj: dict[str, Any], odd: list[Any]) -> dict[str, Any]:
    """Drop None values, as Go's omitempty does on the wire (a copy; recursing only into containers).

    Also notes in ``odd`` every value that is not a str, an int or a bool (floats, above all), for
    ``_json``. Explicit loops: faster here than comprehensions (hot path: every rendered object).
    """
    out: dict[str, Any] = {}
    for k, v in obj.items():
        kind = type(v)
        if kind is dict:
            out[k] = _prune(v, odd)
        elif kind is list:
            out[k] = _prune_list(v, odd)
        elif v is not None:
            if kind is not str and kind is not int and kind is not bool:
                odd.append(v)
            out[k] = v
    return out


def _prune_list(items: list[Any], odd: list[Any]) -> list[Any]:
    """``_prune`` inside a list: its None items stay (null), as omitempty keeps them."""
    out: list[Any] = []
    for v in items:
        kind = type(v)
        if kind is dict:
            out.append(_prune(v, odd))
        elif kind is list:
            out.append(_prune_list(v, odd))
        else:
            if v is not None and kind is not str and kind is not int and kind is not bool:
                odd.append(v)
            out.append(v)
    return out


def _fields(obj: dict[str, Any]) -> dict[str, str]:
    """The values at FIELD_PATHS ("" where a path is missing): one call per rendered object (hot path)."""
    out = {}
    for name, path in FIELD_PATHS.items():
        cur: Any = obj
        for part in path:
            cur = cur.get(part) if isinstance(cur, dict) else None
        out[name] = "" if cur is None else str(cur)
    return out


def encode(obj: dict[str, Any], rv: int, sig: Any = None) -> Entry:
    odd: list[Any] = []
    obj = _prune(obj, odd)
    obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
    labels = dict(obj["metadata"].get("labels") or {})
    return Entry(sig=sig, rv=rv, data=_json(obj, not odd), labels=labels, fields=_fields(obj))


_dumps = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps without its per-call keyword checks
# Types orjson would write and json refuses or writes otherwise: left to orjson's TypeError, then to json.
_ORJSON = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _json(obj: dict[str, Any], plain: bool) -> bytes:
    """json's compact encoding (ensure_ascii), the wire's bytes; by orjson (7x faster) where the two agree.

    They agree on dicts and lists of str, int, bool and None (``plain``: no float, whose shortest form
    differs, 1e-05 against 1e-5, nor other types) when the output is ASCII without DEL: json escapes
    non-ASCII and DEL as \\uXXXX, orjson writes them as they are; both escape the rest alike. orjson
    refuses what else it cannot write (an int past 64 bits, a key that is not a str): json writes it.
    """
    if plain:
        try:
            data = orjson.dumps(obj, option=_ORJSON)
        except TypeError:  # orjson.JSONEncodeError
            pass
        else:
            if data.isascii() and b"\x7f" not in data:
                return data
    return _dumps(obj).encode()


def with_rv(entry: Entry, rv: int) -> bytes:
    obj = json.loads(entry.data)
    obj["metadata"]["resourceVersion"] = str(rv)
    return json.dumps(obj, separators=(",", ":")).encode()


class Store:
    """Rendered state of the world, synced after every tick (``sync`` is called under the world lock)."""

    def __init__(self, history: int = 100_000, snapshots: int = 16, compaction_s: float = 300.0) -> None:
        self.rv = 0
        self.max_history = history
        # The history also forgets what is older than this much world time, as the API server's storage
        # does (kube-apiserver compacts etcd every 5 minutes, --etcd-compaction-interval): a watch that
        # falls further behind gets 410 and re-lists. Without it a busy cluster's last 100,000 changes
        # (every node status, pod and event write, each rendered) held ~200 MB (bench/trace.py).
        self.compaction_s = compaction_s
        self._synced: list[tuple[float, int]] = []  # (world time of a sync, the resourceVersion it reached)
        self.max_snapshots = snapshots
        self.entries: dict[str, dict[Key, Entry]] = {}
        self.order: dict[str, list[Key]] = {}
        self.history: list[tuple[int, str, str, bytes, Entry]] = []  # (rv, resource, type, data, entry)
        self.history_rvs: list[int] = []
        self.floor = 0  # a watch from below this resourceVersion may have missed events: 410
        self.bookmark_interval_s = 60.0  # an open watch gets a BOOKMARK this often (the apiserver: ~1 min)
        self.snapshots: dict[int, Snapshot] = {}
        self.cond = threading.Condition()
        self.scheduler = "kai"
        self.closed = False
        # Incremental events: the world's resourceVersion at the last sync, and the synced event objects.
        self._world_rv: int | None = None
        self._event_objs: dict[Key, Any] = {}
        self._signatures = Signatures()  # the objects' signature parts, kept from sync to sync
        # Publication on demand (``publish``/``catch_up``): the world that moved since the last sync, and how
        # many watches are open (while one is, every advance syncs at once: its events are due as they happen).
        self._pending: Any = None
        self._pending_since: float | None = None  # world time of the first advance not yet synced
        self.watching = 0

    def publish(self, world: Any) -> None:
        """After the world moved (its lock held): sync now while a watch is open, else at the next read
        (``catch_up``). A list or get at any moment sees exactly what a sync per tick would have shown (the
        objects as the world holds them then); only resourceVersions of states nobody read are skipped, as
        an API server's numbering is opaque and gapped. The driver of a fast-forward reads the cluster at a
        fraction of its ticks: each tick rendered every changed object for nobody (bench/sim.py --pipeline)."""
        if self.watching:
            since, self._pending, self._pending_since = self._pending_since, None, None
            self.sync(world, since=since)
            return
        if self._pending is None:
            now = getattr(world, "now", None)
            self._pending_since = now.timestamp() if now is not None else None
        self._pending = world

    def watch_opened(self) -> None:
        with self.cond:
            self.watching += 1

    def watch_closed(self) -> None:
        with self.cond:
            self.watching -= 1

    def catch_up(self, lock: Any) -> None:
        """Sync the world deferred by ``publish`` (with ``lock``, the world's, held): every reader calls it
        before it reads the store."""
        if self._pending is None:
            return
        with lock:
            world, since, self._pending, self._pending_since = self._pending, self._pending_since, None, None
            if world is not None:
                self.sync(world, since=since)

    def sync(self, world: Any, *, since: float | None = None) -> int:
        """Render the world at world.now, record what changed; returns the number of changes. ``since``: the
        world time of the first advance this sync publishes (deferred by ``publish``): its changes count as
        written then for the history's compaction (they happened at or after it), so a watch that fell
        behind expires as it would had every tick been synced."""
        # A tick allocates many short-lived objects over a large live heap: the cyclic collector's full
        # passes would dominate (seconds per tick at 20,000 pods). Nothing here creates cycles.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._sync(world, since)
        finally:
            if enabled:
                gc.enable()

    def _sync(self, world: Any, since: float | None = None) -> int:
        ctx = build_context(world, self._signatures)
        self.scheduler = ctx.scheduler
        changes: list[tuple[int, str, str, bytes, Entry]] = []
        new_entries = dict(self.entries)
        new_order = dict(self.order)
        world_rv = getattr(world, "resource_version", None)
        incremental_events = (
            "events" in self.entries
            and isinstance(world_rv, int)
            and self._world_rv is not None
            and world_rv >= self._world_rv
            and isinstance(getattr(world, "events", None), list)
        )
        for resource, items in resources(ctx).items():
            old = self.entries.get(resource, {})
            current: dict[Key, Entry] = {}
            changed = False
            added: set[Key] = set()  # keys not in old: with them, current's keys are old's less the deleted
            gone: list[Key] | None = None
            rows: Iterable[Item] = items
            if resource == "events" and incremental_events:
                rows, current, gone = self._event_changes(ctx, world, old)
            elif resource == "events":
                rows = self._record_events(ctx, items)
            for row in rows:  # by index: kube's event items carry a 4th element (the event), not read here
                key, sig = row[0], row[1]
                prev = old.get(key)
                if prev is not None and (sig is None or prev.sig is sig or prev.sig == sig):
                    current[key] = prev
                    continue
                self.rv += 1
                entry = encode(row[2](), self.rv, sig)
                if prev is None:
                    added.add(key)
                # An Event's count is in its rendering: a new count is a real change, no need to compare.
                elif not (
                    resource == "events" and prev.sig is not None and prev.sig[0] != sig[0]
                ) and _same_object(prev.data, entry.data):
                    self.rv -= 1
                    current[key] = Entry(
                        sig=sig, rv=prev.rv, data=prev.data, labels=prev.labels, fields=prev.fields
                    )
                    continue
                current[key] = entry
                changed = True
                changes.append(
                    (entry.rv, resource, "MODIFIED" if prev is not None else "ADDED", entry.data, entry)
                )
            # current holds every added key and some of old's: none of old's is missing when the counts agree
            deleted = len(old) + len(added) != len(current)
            if deleted:
                for key in old if gone is None else gone:
                    if key not in current:
                        prev = old[key]
                        self.rv += 1
                        changed = True
                        changes.append((self.rv, resource, "DELETED", with_rv(prev, self.rv), prev))
            if changed or resource not in self.entries:
                new_entries[resource] = current
                new_order[resource] = _order(self.order.get(resource, []), current, added, deleted)
        if isinstance(world_rv, int):
            self._world_rv = world_rv
        with self.cond:
            self.entries = new_entries
            self.order = new_order
            self.history.extend(changes)
            self.history_rvs.extend(c[0] for c in changes)
            cut = max(0, len(self.history) - self.max_history, self._compacted(world, since))
            if cut:
                self.floor = self.history_rvs[cut - 1]
                self.history = self.history[cut:]
                self.history_rvs = self.history_rvs[cut:]
            self.snapshots[self.rv] = Snapshot(self.rv, new_entries, new_order)
            while len(self.snapshots) > self.max_snapshots:
                self.snapshots.pop(next(iter(self.snapshots)))
            self.cond.notify_all()
        return len(changes)

    def _compacted(self, world: Any, since: float | None = None) -> int:
        """How many of the oldest history entries were written more than ``compaction_s`` of world time ago."""
        now = getattr(world, "now", None)
        if now is None:
            return 0
        ts = now.timestamp()
        self._synced.append((ts if since is None else min(since, ts), self.rv))
        reached = None
        while self._synced and self._synced[0][0] < ts - self.compaction_s:
            reached = self._synced.pop(0)[1]
        return 0 if reached is None else bisect.bisect_right(self.history_rvs, reached)

    def _record_events(self, ctx: Any, items: Any) -> Any:
        """Full pass over the events: remember each synced event object for the incremental passes."""
        self._event_objs = {}
        for item in items:
            self._event_objs[item[0]] = item[3] if len(item) > 3 else None
            yield item[:3]

    def _event_changes(self, ctx: Any, world: Any, old: dict[Key, Entry]) -> tuple[list, dict, list[Key]]:
        """Events since the last sync, without walking every event's signature.

        Same result as the full pass (``kube._iter_events``): an Event only changes through the
        world's ``emit``, which stamps it with a new resourceVersion, and an expired one never comes
        back (the correlator starts a new Event). So the changed ones are those stamped after the
        last sync, and the ones to delete are those past the TTL, in the previous listing's order.
        """
        cutoff = ctx.now - EVENT_TTL
        now = ctx.now
        last = self._world_rv
        objs = self._event_objs
        gone = [k for k, e in objs.items() if e is None or e.last_time <= cutoff or e.first_time > now]
        for k in gone:
            del objs[k]
        current = {k: old[k] for k in objs if k in old}
        items = []
        for e in [e for e in world.events if e.resource_version > last]:  # a comprehension: the fast scan
            if e.last_time > cutoff and e.first_time <= now:
                key = (e.namespace, e.name)
                objs[key] = e
                sig = (e.count, e.last_time, e.message, e.resource_version)
                items.append((key, sig, (lambda e=e: core.event(ctx, e))))
        return items, current, gone

    @overload
    def snapshot(self, rv: None = None) -> Snapshot: ...

    @overload
    def snapshot(self, rv: int) -> Snapshot | None: ...

    def snapshot(self, rv: int | None = None) -> Snapshot | None:
        """The current snapshot; or the one at ``rv``, None once it left the kept ones."""
        with self.cond:
            if rv is None:
                return Snapshot(self.rv, self.entries, self.order)
            return self.snapshots.get(rv)

    def events_since(self, rv: int) -> list[tuple[int, str, str, bytes, Entry]] | None:
        """History after rv, or None when rv is older than the history (410 Gone)."""
        with self.cond:
            if rv < self.floor:
                return None
            start = bisect.bisect_right(self.history_rvs, rv)
            return self.history[start:]

    def wait(self, rv: int, timeout: float) -> None:
        with self.cond:
            if self.rv <= rv and not self.closed:
                self.cond.wait(timeout)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


def _order(old: list[Key], current: dict[Key, Entry], added: set[Key], deleted: bool) -> list[Key]:
    """``sorted(current)`` from the previous order (``sorted`` of the previous keys), without sorting again:
    the previous keys still there, and the few added ones put in place."""
    if not added and not deleted:
        return old
    if len(added) > 64:  # each insertion moves the list's tail: many of them cost more than a sort
        return sorted(current)
    order = [key for key in old if key in current] if deleted else list(old)
    for key in sorted(added):
        bisect.insort(order, key)
    return order


def _same_object(a: bytes, b: bytes) -> bool:
    """Equal apart from metadata.resourceVersion (a signature changed but the rendering did not)."""
    if len(a) < 10 or abs(len(a) - len(b)) > 20:
        return False
    try:
        oa, ob = orjson.loads(a), orjson.loads(b)
    except orjson.JSONDecodeError:  # what json wrote and orjson refuses (NaN): read as json reads it
        oa, ob = json.loads(a), json.loads(b)
    oa["metadata"].pop("resourceVersion", None)
    ob["metadata"].pop("resourceVersion", None)
    return oa == ob
