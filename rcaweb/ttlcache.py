"""A small in-process cache whose entries live for a time-to-live read at each call.

Evidence collections of one problem, a few seconds apart, ask Prometheus the same range query and the API
server the same container log; each answer is kept for ``RCAWEB_EVIDENCE_SHARE_S`` (0 turns sharing off) so
the second asks nothing. Thread-safe: inline workers collect in threads. Bounded: when full, the expired
entries go, else the oldest half.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class TtlCache(Generic[V]):
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: dict[Hashable, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, ttl: float) -> V | None:
        """The value kept for ``key`` if it is younger than ``ttl`` seconds; None otherwise (or when ttl <= 0)."""
        if ttl <= 0:
            return None
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and time.monotonic() - hit[0] <= ttl:
            return hit[1]
        return None

    def put(self, key: Hashable, value: V, ttl: float) -> None:
        """Keep ``value`` for ``key`` from now; nothing is kept when ttl <= 0."""
        if ttl <= 0:
            return
        now = time.monotonic()
        with self._lock:
            if len(self._entries) >= self.max_entries:
                expired = [k for k, (at, _) in self._entries.items() if now - at > ttl]
                for k in expired or list(self._entries)[: self.max_entries // 2]:
                    self._entries.pop(k, None)
            self._entries[key] = (now, value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
