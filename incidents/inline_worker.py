"""Processing without Celery workers: one background thread per process drains the outbox after the response.

With a broker, the webhook stores the alerts and a Celery worker groups them, collects evidence and
diagnoses. Without one (Celery eager: the demo, ``run_scenario``, a single-process install on SQLite) the
same work used to run inside the webhook's request, so the sender waited for evidence and diagnosis (32 s
for one incident on a 200-node cluster: Alertmanager logged ``context deadline exceeded`` and retried).

``RCAWEB_INLINE_PROCESSING`` chooses what eager mode does:

- ``thread`` (the default outside tests): the webhook answers as soon as the alerts are stored; this
  module's worker thread groups them (``outbox.process_alerts``), then collects each touched incident's
  evidence and diagnoses it (``evidence.collect_evidence``), grouping new alerts before the next collection
  so incidents appear while a long collection backlog drains. One thread, so the pipeline never writes
  concurrently with itself; on SQLite its write transactions and the intake's take one process-wide lock
  (``serialized``), so two writers never meet (SQLite has one writer), and the intake's goes first
  (:class:`WriteLock`): the webhook's insert waits for the one background transaction in progress at most.
  Those are short: grouping commits every ``outbox.SQLITE_TRANSACTION_S`` (50 ms), evidence collection
  holds the lock only while it writes, not while it reads the sources, and the diagnosis while it stores
  its run. Writers outside this process' lock (the demo's sweeps, another process) queue in SQLite itself:
  transactions begin IMMEDIATE with a busy timeout (``rcaweb.settings.SQLITE_OPTIONS``). Connections are closed after every unit of work
  (the thread outlives requests, SQLite files are replaced by run_scenario). An error is a log line and the
  thread goes on; the rows stay in the outbox and the worker's idle sweep (what beat's ``sweep_outbox`` does
  with workers, run once the thread has been idle ``IDLE_SWEEP_S`` after some work) picks them up. At exit the queue is drained (bounded by ``SHUTDOWN_DRAIN_S``).
- ``sync``: everything inline in the request, as before (tests: deterministic, nothing runs after the
  test's assertions). Tests of the thread mode switch it on and call :func:`drain`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator

from django.conf import settings
from django.db import connection, connections

logger = logging.getLogger(__name__)

MODES = ("sync", "thread")
COALESCE_S = (
    0.02  # alerts arriving this close together are grouped in one batch (as the broker publisher does)
)
WORKER_NICE = (
    10  # the thread's CPU priority below the web threads': on a busy machine the webhook answers first
)
IDLE_SWEEP_S = 30.0  # idle this long: process what the outbox holds unprocessed (as beat's sweep_outbox does)
SHUTDOWN_DRAIN_S = 30.0


class WriteLock:
    """The process' SQLite write lock: reentrant, and the webhook (``urgent``) goes before background writers.

    A plain lock lets the worker thread, which releases it between two batches and asks again at once, win
    over a request that has been waiting: the request then waits a second batch, and a third. Here a writer
    that is not urgent waits while an urgent one waits, so the webhook's insert waits for at most the one
    transaction in progress, never a queue of them; handing over is a condition notify, not SQLite's busy
    handler, which sleeps in steps of up to 100 ms between tries.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.owner: int | None = None
        self.depth = 0
        self.urgent_waiting = 0
        self.waiting = 0  # all writers waiting, urgent or not

    def acquire(self, *, urgent: bool = False) -> None:
        me = threading.get_ident()
        with self.cond:
            if self.owner == me:
                self.depth += 1
                return
            self.waiting += 1
            if urgent:
                self.urgent_waiting += 1
            try:
                while self.owner is not None or (not urgent and self.urgent_waiting):
                    self.cond.wait()
            finally:
                self.waiting -= 1
                if urgent:
                    self.urgent_waiting -= 1
            self.owner, self.depth = me, 1

    def release(self) -> None:
        with self.cond:
            if self.owner != threading.get_ident():
                raise RuntimeError("the SQLite write lock is released by a thread that does not hold it")
            self.depth -= 1
            if not self.depth:
                self.owner = None
                self.cond.notify_all()


_writes = WriteLock()


def webhook_waiting() -> bool:
    """A webhook is waiting for the SQLite write lock: a background transaction that can stop early should."""
    return _writes.urgent_waiting > 0


def mode() -> str:
    value = getattr(settings, "RCAWEB_INLINE_PROCESSING", "sync")
    if value not in MODES:
        raise ValueError(f"RCAWEB_INLINE_PROCESSING={value!r}: expected one of {', '.join(MODES)}")
    return value


def threaded() -> bool:
    """True when eager Celery hands processing to this module's worker thread."""
    return bool(getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False)) and mode() == "thread"


@contextlib.contextmanager
def serialized(*, urgent: bool = False) -> Iterator[None]:
    """Hold the process' SQLite write lock around one write transaction (no-op on PostgreSQL, which has row
    locks and many writers). ``urgent``: the webhook's insert, which a sender is waiting for (see
    :class:`WriteLock`)."""
    if connection.vendor != "sqlite":
        yield
        return
    _writes.acquire(urgent=urgent)
    try:
        yield
    finally:
        _writes.release()


class InlineWorker:
    """The thread: alert ids to group first, then incident ids whose evidence to collect, in arrival order."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.alerts: list[int] = []
        self.evidence: dict[int, None] = {}  # ordered set: a collection queued twice runs once
        self.busy = False
        self.pid = 0
        self.thread: threading.Thread | None = None
        self.processed = 0  # alerts handed to grouping, collections run: for tests and curiosity
        self.collected = 0
        self.errors = 0
        self.last_add = 0.0
        self.dirty = False  # work was taken since the last idle sweep

    def _ensure(self) -> None:
        if self.thread is None or self.pid != os.getpid() or not self.thread.is_alive():
            # First use in this process (or after a fork: threads do not survive it).
            self.pid = os.getpid()
            self.alerts, self.evidence, self.busy = [], {}, False
            self.thread = threading.Thread(target=self._run, name="rcaweb-inline-worker", daemon=True)
            self.thread.start()

    def add_alerts(self, alert_ids: list[int]) -> None:
        with self.cond:
            self._ensure()
            self.alerts.extend(alert_ids)
            self.last_add = time.monotonic()
            self.cond.notify_all()

    def add_evidence(self, incident_id: int) -> None:
        with self.cond:
            self._ensure()
            self.evidence[incident_id] = None
            self.cond.notify_all()

    def drain(self, timeout: float = 60.0) -> bool:
        """Wait until everything queued so far was processed; False when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.alerts or self.evidence or self.busy:
                if self.thread is None or not self.thread.is_alive():
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def _take(self) -> tuple[str, list[int]] | None:
        """The next unit of work (grouping before collections), or None after an idle period."""
        with self.cond:
            if not self.alerts and not self.evidence:
                self.cond.wait(IDLE_SWEEP_S)
            if self.alerts or self.evidence:
                self.dirty = True
            if self.alerts:
                while (wait := self.last_add + COALESCE_S - time.monotonic()) > 0:
                    self.cond.wait(wait)  # more of the same burst may follow: one batch, not one each
                ids, self.alerts = self.alerts, []
                self.busy = True
                return "alerts", ids
            if self.evidence:
                incident_id = next(iter(self.evidence))
                del self.evidence[incident_id]
                self.busy = True
                return "evidence", [incident_id]
            return None

    def _run(self) -> None:
        try:  # Linux: a thread id is a process id for setpriority; elsewhere the thread keeps its priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICE)
        except (AttributeError, OSError) as exc:
            logger.debug("inline worker priority unchanged: %s", exc)
        while True:
            unit = self._take()
            try:
                if unit is None:
                    self._idle_sweep()
                elif unit[0] == "alerts":
                    self._group(unit[1])
                else:
                    self._collect(unit[1][0])
            except Exception:
                self.errors += 1
                logger.exception("inline processing failed (%s); the outbox sweep retries what is left", unit)
            finally:
                _release_connections()
                with self.cond:
                    self.busy = False
                    self.cond.notify_all()

    def _group(self, alert_ids: list[int]) -> None:
        from incidents import outbox

        # Each batch's transaction takes the write lock on its own (outbox.process_alerts): between two the
        # webhook stores, so a backlog of thousands never holds a sender longer than one small batch.
        outbox.process_alerts(alert_ids)  # touched incidents come back through add_evidence on commit
        self.processed += len(alert_ids)

    def _collect(self, incident_id: int) -> None:
        from incidents import evidence

        self.collected += 1
        evidence.collect_evidence(incident_id)

    def _idle_sweep(self) -> None:
        from incidents import tasks

        if not threaded() or not self.dirty:
            return  # nothing ran since the last sweep: nothing this process stored can have been left behind
        self.dirty = False
        tasks.sweep_outbox()  # unprocessed alerts and collections never started: queued here again

    def shutdown(self, timeout: float = SHUTDOWN_DRAIN_S) -> None:
        if self.thread is None or self.pid != os.getpid() or not self.thread.is_alive():
            return
        with self.cond:
            left = len(self.alerts) + len(self.evidence) + int(self.busy)
        if left and not self.drain(timeout):
            logger.warning(
                "inline worker: exiting with work queued; the alerts stay in the outbox for the next start"
            )


def _release_connections() -> None:
    """Close and forget this thread's connections (they are per thread): the next unit opens fresh ones from
    the settings of the moment (run_scenario points the default database at a new SQLite file per run)."""
    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except Exception as exc:  # a broken connection is being dropped anyway
            logger.info("inline worker: closing %s: %s", conn.alias, exc)
        with contextlib.suppress(AttributeError):
            del connections[conn.alias]


worker = InlineWorker()
atexit.register(worker.shutdown)


def working() -> bool:
    """Whether the worker has something to do or is doing it (a driver times work of its own around it)."""
    w = worker
    return w.thread is not None and bool(w.alerts or w.evidence or w.busy)


def drain(timeout: float = 60.0) -> bool:
    """Block until the worker has processed everything queued so far (run_scenario's driver, tests, benches)."""
    if worker.thread is None:
        return True
    return worker.drain(timeout)
