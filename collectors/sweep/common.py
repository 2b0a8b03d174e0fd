"""What every sweep shares: the summary it returns, the per-cluster lock, and the runner that turns each source
call into a ``SourceRun`` row (ok, or the error that is itself evidence) without letting it stop the sweep."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.utils import timezone

from collectors.inventory import RecordResult
from collectors.models import Cluster, SourceRun
from collectors.sources.errors import SourceError
from collectors.sources.redact import redact_text

logger = logging.getLogger(__name__)

T = TypeVar("T")
Progress = Callable[[str, int], None]  # (what, items so far)


@dataclass
class SweepSummary:
    """What one sweep did. ``errors`` holds "source: call: message" for every failed call."""

    cluster: str
    at: datetime
    kind: str = "inventory"  # inventory | telemetry | events
    seen: int = 0  # entities seen
    created: int = 0  # new entities
    opened: int = 0  # versions opened
    closed: int = 0  # versions closed by deletion
    changes: int = 0
    events_new: int = 0
    samples_written: int = 0
    errors: list[str] = field(default_factory=list)
    no_data: list[str] = field(default_factory=list)  # metrics Prometheus has no series for
    skipped_kinds: list[str] = field(
        default_factory=list
    )  # kinds not recorded because a source they need failed
    skipped: bool = False  # another sweep of this cluster held the lock
    duration_s: float = 0.0

    def add(self, result: RecordResult) -> None:
        self.seen += result.seen
        self.created += result.created
        self.opened += result.opened
        self.closed += result.closed
        self.changes += result.changes

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def rows_written(self) -> int:
        return self.created + self.opened + self.changes + self.events_new + self.samples_written

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["at"] = self.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        d["rows_written"] = self.rows_written
        return d

    def line(self) -> str:
        if self.skipped:
            return f"{self.cluster}: {self.kind} sweep skipped (another sweep of this cluster is running)"
        parts = [f"{self.cluster} {self.kind} at {self.at:%Y-%m-%dT%H:%M:%SZ}:"]
        if self.kind == "inventory":
            parts.append(
                f"{self.seen} entities seen, {self.created} new, {self.opened} versions opened, "
                f"{self.closed} closed, {self.changes} changes"
            )
        elif self.kind == "events":
            parts.append(f"{self.events_new} new events")
        else:
            parts.append(f"{self.samples_written} samples")
        parts.append(f"{len(self.errors)} errors in {self.duration_s:.1f} s")
        return " ".join(parts)


class Runner:
    """Calls sources for one sweep; each call becomes one SourceRun row (written at the end, in one insert)."""

    def __init__(self, cluster: Cluster, at: datetime, summary: SweepSummary) -> None:
        self.cluster = cluster
        self.at = at
        self.summary = summary
        self.runs: list[SourceRun] = []
        self.failed: set[str] = set()
        self._aside = 0.0  # seconds the call in progress spent on work of ours (``aside``), not the source's

    def call(
        self,
        source: str,
        call: str,
        fn: Callable[[], T],
        *,
        key: str | None = None,
        passes: tuple[type[Exception], ...] = (),
    ) -> T | None:
        """Run ``fn``; on any failure record the error and return None (the caller then skips what depends on it).
        Failures of the ``passes`` types are not the source's (recording what it listed, as it comes): they
        propagate."""
        started = time.monotonic()
        self._aside = 0.0
        try:
            value = fn()
        except passes:
            raise
        except SourceError as exc:
            self._fail(key or call, exc.source or source, exc.call or call, exc.message, started)
            return None
        except Exception as exc:  # a bug or an answer we did not foresee must not stop the other sources
            logger.exception("%s: %s failed", source, call)
            self._fail(key or call, source, call, f"unexpected {type(exc).__name__}: {exc}", started)
            return None
        self.runs.append(
            SourceRun(
                cluster=self.cluster,
                source=source,
                call=call[:300],
                time=self.at,
                ok=True,
                duration_ms=int((time.monotonic() - started - self._aside) * 1000),
            )
        )
        return value

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Work of ours within the call in progress (recording a batch of what it listed): not counted in the
        call's duration, which is the source's."""
        started = time.monotonic()
        try:
            yield
        finally:
            self._aside += time.monotonic() - started

    def note(self, source: str, call: str, message: str) -> None:
        """A call that answered but says "no data": recorded as not ok, so pages show the gap."""
        self.runs.append(
            SourceRun(
                cluster=self.cluster,
                source=source,
                call=call[:300],
                time=self.at,
                ok=False,
                error=redact_text(message),
            )
        )

    def unreadable(self, source: str, call: str, exc: SourceError) -> None:
        """A call that answered but whose answer could not be read when it was decoded, after the call (the
        GPU poll decodes only answers that changed): its row says so, as if the call had failed."""
        for run in reversed(self.runs):
            if run.call == call[:300] and run.ok:
                self.failed.add(call)
                self.summary.errors.append(f"{exc.source or source}: {exc.call or call}: {exc.message}")
                logger.warning("collection error %s: %s: %s", source, call, exc.message)
                run.ok, run.error = False, redact_text(exc.message)[:4000]
                return
        self._fail(call, exc.source or source, exc.call or call, exc.message, time.monotonic())

    def set_rows(self, call: str, rows: int) -> None:
        for run in reversed(self.runs):
            if run.call == call[:300]:
                run.rows_written = rows
                return

    def _fail(self, key: str, source: str, call: str, message: str, started: float) -> None:
        message = redact_text(message)  # "unexpected ValueError: …" may quote a URL with its credentials
        self.failed.add(key)
        self.summary.errors.append(f"{source}: {call}: {message}")
        logger.warning("collection error %s: %s: %s", source, call, message)
        self.runs.append(
            SourceRun(
                cluster=self.cluster,
                source=source,
                call=call[:300],
                time=self.at,
                ok=False,
                error=message[:4000],
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        )

    def save(self) -> None:
        if self.runs:
            SourceRun.objects.bulk_create(self.runs)
            self.runs = []


#
# Locks
#

_local_locks: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


@contextmanager
def cluster_lock(cluster: str, kind: str, ttl_s: int = 600) -> Iterator[bool]:
    """Yield True if this process may sweep ``cluster`` (``kind``) now; False when another sweep holds it.

    With REDIS_URL the lock is a Redis lock (workers on many machines); without, a process-local lock
    (the demo and tests run everything in one process). ``ttl_s`` frees a lock whose holder died.
    """
    key = f"rcaweb:sweep:{kind}:{cluster}"
    redis_url = getattr(settings, "REDIS_URL", "")
    if redis_url:
        import redis  # imported here: not needed without Redis

        try:
            client = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=2)
            lock = client.lock(key, timeout=ttl_s, blocking=False)
            got = bool(lock.acquire(blocking=False))
        except redis.RedisError as exc:
            logger.warning("redis lock unavailable (%s); using a process-local lock", exc)
        else:
            try:
                yield got
            finally:
                if got:
                    try:
                        lock.release()
                    except redis.RedisError:
                        logger.warning("sweep lock %s expired before release", key)
            return
    with _local_guard:
        local = _local_locks.setdefault(key, threading.Lock())
    got = local.acquire(blocking=False)
    try:
        yield got
    finally:
        if got:
            local.release()


def resolve(cluster_name: str, at: datetime | None) -> tuple[Cluster, datetime]:
    try:
        cluster = Cluster.objects.get(name=cluster_name)
    except Cluster.DoesNotExist:
        known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
        raise ValueError(f"unknown cluster {cluster_name!r} (configured: {known})")
    at = at or timezone.now()
    if timezone.is_naive(at):
        raise ValueError(f"at={at!r} is naive: pass an aware UTC datetime")
    return cluster, at.replace(microsecond=0)
