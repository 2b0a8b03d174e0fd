"""The API server's storage: rendered objects, one global resourceVersion, watch history, list snapshots.

Like etcd behind a real API server, every change between two world ticks gets
the next resourceVersion, a bounded history answers watches from an older
resourceVersion (older than the history gives 410 Gone), and lists paginate
over a consistent snapshot kept for the last few ticks.
"""

from __future__ import annotations

import bisect
import gc
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from collectors.sim.kube import build_context, resources

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


def _prune(value: Any) -> Any:
    """Drop None values, as Go's omitempty does on the wire (recursing only into containers: hot path)."""
    kind = type(value)
    if kind is dict:
        return {k: (_prune(v) if type(v) in _CONTAINERS else v) for k, v in value.items() if v is not None}
    if kind is list:
        return [_prune(v) if type(v) in _CONTAINERS else v for v in value]
    return value


_CONTAINERS = (dict, list)


def _field(obj: dict[str, Any], path: tuple[str, ...]) -> str:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    return "" if cur is None else str(cur)


def encode(obj: dict[str, Any], rv: int) -> Entry:
    obj = _prune(obj)
    obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
    labels = dict(obj["metadata"].get("labels") or {})
    fields = {name: _field(obj, path) for name, path in FIELD_PATHS.items()}
    return Entry(
        sig=None, rv=rv, data=json.dumps(obj, separators=(",", ":")).encode(), labels=labels, fields=fields
    )


def with_rv(entry: Entry, rv: int) -> bytes:
    obj = json.loads(entry.data)
    obj["metadata"]["resourceVersion"] = str(rv)
    return json.dumps(obj, separators=(",", ":")).encode()


class Store:
    """Rendered state of the world, synced after every tick (``sync`` is called under the world lock)."""

    def __init__(self, history: int = 100_000, snapshots: int = 16) -> None:
        self.rv = 0
        self.max_history = history
        self.max_snapshots = snapshots
        self.entries: dict[str, dict[Key, Entry]] = {}
        self.order: dict[str, list[Key]] = {}
        self.history: list[tuple[int, str, str, bytes, Entry]] = []  # (rv, resource, type, data, entry)
        self.history_rvs: list[int] = []
        self.floor = 0  # a watch from below this resourceVersion may have missed events: 410
        self.snapshots: dict[int, Snapshot] = {}
        self.cond = threading.Condition()
        self.scheduler = "kai"
        self.closed = False

    def sync(self, world: Any) -> int:
        """Render the world at world.now, record what changed; returns the number of changes."""
        # A tick allocates many short-lived objects over a large live heap: the cyclic collector's full
        # passes would dominate (seconds per tick at 20,000 pods). Nothing here creates cycles.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._sync(world)
        finally:
            if enabled:
                gc.enable()

    def _sync(self, world: Any) -> int:
        ctx = build_context(world)
        self.scheduler = ctx.scheduler
        changes: list[tuple[int, str, str, bytes, Entry]] = []
        new_entries = dict(self.entries)
        new_order = dict(self.order)
        for resource, items in resources(ctx).items():
            old = self.entries.get(resource, {})
            current: dict[Key, Entry] = {}
            changed = False
            for key, sig, render in items:
                prev = old.get(key)
                if prev is not None and sig is not None and prev.sig == sig:
                    current[key] = prev
                    continue
                if prev is not None and sig is None:
                    current[key] = prev
                    continue
                self.rv += 1
                entry = encode(render(), self.rv)
                entry = Entry(sig=sig, rv=entry.rv, data=entry.data, labels=entry.labels, fields=entry.fields)
                if prev is not None and _same_object(prev.data, entry.data):
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
            for key, prev in old.items():
                if key not in current:
                    self.rv += 1
                    changed = True
                    changes.append((self.rv, resource, "DELETED", with_rv(prev, self.rv), prev))
            if changed or resource not in self.entries:
                new_entries[resource] = current
                new_order[resource] = sorted(current)
        with self.cond:
            self.entries = new_entries
            self.order = new_order
            self.history.extend(changes)
            self.history_rvs.extend(c[0] for c in changes)
            if len(self.history) > self.max_history:
                cut = len(self.history) - self.max_history
                self.floor = self.history_rvs[cut - 1]
                self.history = self.history[cut:]
                self.history_rvs = self.history_rvs[cut:]
            self.snapshots[self.rv] = Snapshot(self.rv, new_entries, new_order)
            while len(self.snapshots) > self.max_snapshots:
                self.snapshots.pop(next(iter(self.snapshots)))
            self.cond.notify_all()
        return len(changes)

    def snapshot(self, rv: int | None = None) -> Snapshot | None:
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


def _same_object(a: bytes, b: bytes) -> bool:
    """Equal apart from metadata.resourceVersion (a signature changed but the rendering did not)."""
    if len(a) < 10 or abs(len(a) - len(b)) > 20:
        return False
    oa, ob = json.loads(a), json.loads(b)
    oa["metadata"].pop("resourceVersion", None)
    ob["metadata"].pop("resourceVersion", None)
    return oa == ob
