"""Watch-based inventory collection: list once, then watch from the list's resourceVersion.

A :class:`WatchSession` holds one cluster's lease (``cluster_lease``: a Redis lock renewed while the session
lives, so two workers never watch one cluster and a dead worker's lease expires). It starts with a relist:
the ordinary inventory sweep through a :class:`RecordingKube`, which keeps every object it lists and each
listing's resourceVersion. Then one thread per listing watches from that resourceVersion (the client's
``kubernetes.watch.Watch``, bookmarks on) and queues what it sees; the session's own thread applies the
queued events to the kept objects and records the result through the sweep's own code over a
:class:`CachedKube` (no HTTP): the same mapping, the same ``record_states`` digests, so an object whose
mapped state did not change writes nothing and pages and as-of queries read what a sweep would have written.

- Nothing changed, nothing done: a quiet cluster costs the open watches and a bookmark a minute.
- Only nodes changed (kubelet status heartbeats): only nodes are mapped and recorded.
- A 410 (``resourceVersion`` too old) relists that listing alone and watches from the new list.
- The relist safety net runs every ``RCAWEB_WATCH_RELIST_S``: a full sweep that writes only differences.
- GPUs come from Prometheus, which has no watch: they are polled every ``RCAWEB_SWEEP_INVENTORY_S``
  against the kept nodes and pods; an answer equal to the last one (compared undecoded, without sample
  times) is neither decoded nor mapped.
- Kubernetes Events are listed with each relist and watched too, but not kept: they are stored as the
  events sweep stores them (``store_events``, once per (uid, count)).
- Where each watch stands (per listing: resourceVersion, last event or bookmark) is kept in Redis
  (``rcaweb:watch:<cluster>``) for ``/metrics`` and for the next session, which relists (it has no objects).
"""

# size: one class, the session's loop (relist, apply, GPU poll, drain) over shared state; what it drives has
# modules of its own (kept_listings, watch_lease, watch_cursors, watch_streams, watch_stats).
from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from collectors import mapping
from collectors.models import Cluster
from collectors.sources.errors import SourceError
from collectors.sources.kubernetes import KubeSource
from collectors.sources.redact import redact_text
from collectors.sweep.cluster_lock import cluster_lock
from collectors.sweep.events import store_events
from collectors.sweep.gc_pause import no_cyclic_gc
from collectors.sweep.gpus import answers_digest, decode_gpu_answers, gpu_answers, record_gpus
from collectors.sweep.inventory import Sweep, announce, sweep_cluster
from collectors.sweep.kept_listings import CachedKube, Kept, RecordingKube
from collectors.sweep.runner import Runner
from collectors.sweep.summary import SweepSummary
from collectors.sweep.target import resolve
from collectors.sweep.watch_cursors import save_cursors
from collectors.sweep.watch_lease import Lease
from collectors.sweep.watch_stats import WatchStats
from collectors.sweep.watch_streams import ERROR, GONE, WatchStreams

logger = logging.getLogger(__name__)

EVENTS = "list events"  # listed at each relist and watched; stored as the events sweep stores them, not kept
EVENTS_BATCH = 2000  # Events listed are stored this many at a time
RELIST_RETRY_S = 30.0  # a relist in which a Kubernetes listing failed is tried again after this


class WatchSession:
    """One cluster's watch, from ``start`` to ``stop``; ``step`` applies what arrived. ``clock`` gives the
    time states are recorded at (the simulator's tests pass simulated time)."""

    def __init__(
        self,
        cluster_name: str,
        *,
        clock: Callable[[], datetime] | None = None,
        watch_timeout_s: int | None = None,
        apply_every_s: float | None = None,
        relist_every_s: float | None = None,
        gpu_every_s: float | None = None,
        lease_s: float | None = None,
    ) -> None:
        self.cluster, _ = resolve(cluster_name, None)
        self.clock = clock or timezone.now
        self.watch_timeout_s = int(watch_timeout_s or settings.RCAWEB_WATCH_TIMEOUT_S)
        self.apply_every_s = float(settings.RCAWEB_WATCH_APPLY_S if apply_every_s is None else apply_every_s)
        self.relist_every_s = float(relist_every_s or settings.RCAWEB_WATCH_RELIST_S)
        self.gpu_every_s = float(gpu_every_s or settings.RCAWEB_SWEEP_INVENTORY_S)
        self.lease = Lease(self.cluster.name, lease_s or settings.RCAWEB_WATCH_LEASE_S)
        self.kept = Kept()
        self.kube: RecordingKube | None = None
        self.stats = WatchStats()
        self.streams = WatchStreams(self.cluster.name, self.watch_timeout_s)  # restarted by every relist
        self._dirty: set[str] = set()
        self._relist: set[str] = set()
        self._last_apply = 0.0
        self._last_at: datetime | None = None
        self._last_relist = 0.0
        self._last_gpus = 0.0
        self._sweep: Sweep | None = None  # the last full pass: nodes and pods the GPU poll resolves against
        self._pass_serial = 0  # bumped whenever that pass or its nodes change
        self._gpu_inputs: tuple[Any, ...] | None = None  # what the last recorded GPU poll was computed from
        self._events: list[dict[str, Any]] = []  # Kubernetes Events received and not stored yet
        self._last_events = 0.0

    # lifecycle

    def start(self) -> bool:
        """Take the lease and relist; False when another session holds the cluster (nothing was done)."""
        if not self.lease.acquire():
            return False
        self.relist()
        return True

    def stop(self) -> None:
        self._stop_streams()
        if self._events:
            self.store_events()
        if self.kube is not None:
            self.kube.shutdown()
            self.kube = None
        self.lease.release()

    def __enter__(self) -> WatchSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def run(self, duration_s: float) -> WatchStats:
        """start, then step until ``duration_s`` passed or the lease was lost, then stop."""
        if not self.start():
            self.stats.errors.append("another worker watches this cluster")
            return self.stats
        deadline = time.monotonic() + duration_s
        try:
            while time.monotonic() < deadline:
                if not self.step(timeout=1.0):
                    break
        finally:
            self.stop()
        return self.stats

    # the work

    def relist(self, calls: set[str] | None = None) -> None:
        """All listings (the full sweep, GPUs included), or only ``calls`` (after a 410) and then an apply."""
        self._stop_streams()
        at = self._at()
        if calls is None:
            if self.kube is not None:
                self.kube.shutdown()
            self.kept = Kept()
            self.kube = None

            def factory(cluster: Cluster) -> RecordingKube:
                self.kube = RecordingKube(cluster, self.kept)
                return self.kube

            passes: list[Sweep] = []
            summary = sweep_cluster(self.cluster.name, at, kube_factory=factory, passes=passes)
            self._sweep = passes[0] if passes else None
            self._pass_serial += 1
            # the relist recorded the GPUs from these answers: a poll that gets the same ones maps nothing
            answers = self._sweep.gpu_answers if self._sweep is not None and not summary.errors else None
            self._gpu_inputs = (self._pass_serial, answers_digest(answers)) if answers is not None else None
            if self._sweep is not None:
                self._sweep.gpu_answers = None  # their digest is all a poll needs of them
            self._note(summary)
            self.stats.relists += 1
            self._last_relist = self._last_gpus = time.monotonic()
            self._dirty.clear()
            if self.kube is None or any(e.startswith(("k8s:", "kai:", "kueue:")) for e in summary.errors):
                # a listing failed: what depends on it was not recorded and is not watched; try again soon
                self._last_relist -= max(0.0, self.relist_every_s - RELIST_RETRY_S)
            if self.kube is None:
                self._relist.clear()
                return
            self._list_events()
        else:
            assert self.kube is not None
            if EVENTS in calls:
                calls = calls - {EVENTS}
                self._list_events()
            for call in sorted(calls):
                fn, args = self.kube.lister(call)
                try:
                    list(self.kube.iter_items(call, lambda *a, fn=fn, args=args, **kw: fn(*args, **kw)))
                except SourceError as exc:
                    self._fail(exc.call or call, exc.message)
            self.stats.relists += 1
            self._dirty |= calls
        self._relist.clear()
        save_cursors(self.cluster.name, self.kept.rv, listed_at=time.time())
        self._start_streams()

    def step(self, timeout: float = 1.0) -> bool:
        """Take what the watches queued (waiting up to ``timeout`` for the first), apply it when due, poll GPUs
        and relist when due, renew the lease. False when the lease was lost (the session must end)."""
        if not self.lease.renew():
            return False
        self._drain(timeout)
        now = time.monotonic()
        if now - self._last_relist >= self.relist_every_s:
            self.relist()
        elif self._relist:
            self.relist(set(self._relist))
        now = time.monotonic()
        if self._dirty and now - self._last_apply >= self.apply_every_s:
            self.apply()
        if self._events and now - self._last_events >= self.apply_every_s:
            self.store_events()
        if self.cluster.prometheus_url and now - self._last_gpus >= self.gpu_every_s:
            self.poll_gpus()
        return True

    def apply(self) -> SweepSummary:
        """Record the kept objects' current states (only those whose mapped state changed get rows)."""
        dirty, self._dirty = self._dirty, set()
        at = self._at()
        summary = SweepSummary(cluster=self.cluster.name, at=at, kind="inventory")
        started = time.monotonic()
        with cluster_lock(self.cluster.name, "inventory") as got:
            if not got:  # a sweep (collect --once) is writing this cluster: apply at the next step
                self._dirty |= dirty
                summary.skipped = True
                return summary
            runner = Runner(self.cluster, at, summary)
            sweep = Sweep(
                self.cluster,
                at,
                runner,
                summary,
                lambda what, n: None,
                kube_factory=lambda cluster: CachedKube(self.kept),
                gpus=False,
            )
            with no_cyclic_gc(collect=False):  # a full collection over the kept objects each apply: no
                if dirty == {"list nodes"} and self._sweep is not None and self._nodes_only(sweep):
                    pass
                else:
                    sweep.run()
                    self._sweep = sweep
                    self._pass_serial += 1
            # The kept listings answered: their SourceRun rows would only say so every few seconds.
            runner.runs = [r for r in runner.runs if not r.ok]
            runner.save()
        summary.duration_s = time.monotonic() - started
        self._note(summary)
        if summary.rows_written or summary.closed:
            announce(self.cluster.name, at)  # the incidents re-diagnose what changed, as after a sweep
        self.stats.applies += 1
        self._last_apply = time.monotonic()
        save_cursors(self.cluster.name, self.kept.rv, applied_at=time.time())
        return summary

    def store_events(self) -> int:
        """Store the Kubernetes Events received (deduplicated on (uid, count), as the events sweep does, so an
        event already stored by a sweep or a relist is not stored twice); how many were new."""
        pending, self._events = self._events, []
        with cluster_lock(self.cluster.name, "events") as got:
            if not got:  # an events sweep (collect --once) is writing: store them at the next step
                self._events[:0] = pending
                return 0
            new = store_events(self.cluster, pending, self.clock())
        self.stats.kube_events_new += new
        self._last_events = time.monotonic()
        return new

    def _list_events(self) -> None:
        """List the Events (a relist, or after a 410 of their watch), store them, and watch from the list. The
        objects are not kept (nothing is mapped from them, each is stored once), nor held all at once: they
        are stored a page batch at a time."""
        assert self.kube is not None
        kube = self.kube
        try:
            # the plain listing, not the RecordingKube's, which keeps every object it lists
            for obj in KubeSource.iter_items(kube, EVENTS, kube.core.list_event_for_all_namespaces):
                self._events.append(obj)
                if len(self._events) >= EVENTS_BATCH:
                    self.store_events()
        except SourceError as exc:
            self._fail(exc.call or EVENTS, exc.message)
            self.kept.rv.pop(EVENTS, None)  # not watched until a relist lists them, in 30 s
            self._last_relist = min(
                self._last_relist, time.monotonic() - self.relist_every_s + RELIST_RETRY_S
            )
            return
        finally:
            if self._events:
                self.store_events()
        self.kept.rv[EVENTS] = kube.last_resource_version.get(EVENTS, "")

    def _nodes_only(self, sweep: Sweep) -> bool:
        """Only nodes changed: record them alone, unless a node's GPU memory (which pods read) changed."""
        assert self._sweep is not None
        nodes = [mapping.map_node(n) for n in CachedKube(self.kept).list_nodes()]
        before = self._sweep.nodes or {}
        if any(
            (before.get(o.name) or {}).get("gpu_memory_mib") != o.state.get("gpu_memory_mib") for o in nodes
        ):
            return False
        sweep.record("node", nodes)
        self._sweep.nodes = {o.name: o.state for o in nodes}
        self._pass_serial += 1
        return True

    def poll_gpus(self) -> SweepSummary:
        """GPUs from Prometheus (no watch there), against the nodes and pods of the last full pass (none when
        its pods were not listed: a GPU's pod would read as gone; the relist retry comes first)."""
        at = self._at()
        cpu = time.thread_time()
        summary = SweepSummary(cluster=self.cluster.name, at=at, kind="inventory")
        if self._sweep is None or self._sweep.pods is None:
            self._last_gpus = time.monotonic()
            return summary
        with cluster_lock(self.cluster.name, "inventory") as got:
            if not got:
                return summary
            runner = Runner(self.cluster, at, summary)
            sweep = Sweep(self.cluster, at, runner, summary, lambda what, n: None)
            sweep.nodes, sweep.pods = self._sweep.nodes, self._sweep.pods
            try:
                answers = gpu_answers(sweep)
                inputs = (self._pass_serial, answers_digest(answers))
                if answers is not None and inputs == self._gpu_inputs:
                    # Prometheus said what it said last time, about the same nodes and pods: the mapping
                    # would give the states recorded last time (it is deterministic), so the answers are
                    # not even decoded.
                    self.stats.gpu_polls_unchanged += 1
                else:
                    fetched = decode_gpu_answers(sweep, answers)
                    record_gpus(sweep, fetched)
                    self._gpu_inputs = inputs if fetched is not None and not summary.errors else None
            finally:
                runner.save()
        self._note(summary)
        if summary.rows_written or summary.closed:
            announce(self.cluster.name, at)
        self.stats.gpu_polls += 1
        self.stats.gpu_poll_cpu_s += time.thread_time() - cpu
        self._last_gpus = time.monotonic()
        return summary

    # streams

    def _start_streams(self) -> None:
        assert self.kube is not None
        calls = set(self.kept.items) | ({EVENTS} & set(self.kept.rv))
        self.streams.start(self.kube, {call: self.kept.rv.get(call, "") for call in calls})

    def _stop_streams(self) -> None:
        self.streams.stop(self.kube)

    def _drain(self, timeout: float) -> None:
        try:
            item = self.streams.queue.get(timeout=timeout) if timeout > 0 else self.streams.queue.get_nowait()
        except queue.Empty:
            return
        while True:
            generation, call, kind, payload = item
            if generation == self.streams.generation:
                if kind == GONE:
                    self.stats.gone += 1
                    logger.info("%s: %s: %s; listing again", self.cluster.name, call, payload)
                    self._relist.add(call)
                elif kind == ERROR:
                    self._fail(call.replace("list ", "watch ", 1), payload)
                elif call == EVENTS:  # stored, not kept: a bookmark or an event only moves where it resumes
                    if kind == "BOOKMARK":
                        self.stats.bookmarks += 1
                    elif kind in ("ADDED", "MODIFIED"):
                        self.stats.kube_events += 1
                        self._events.append(payload["object"])
                    rv = (payload["object"].get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self.kept.rv[call] = str(rv)
                elif kind == "BOOKMARK":
                    self.stats.bookmarks += 1
                    self.kept.apply(call, payload)
                elif call not in self._relist:
                    self.stats.events += 1
                    if self.kept.apply(call, payload):
                        self._dirty.add(call)
            try:
                item = self.streams.queue.get_nowait()
            except queue.Empty:
                return

    # bookkeeping

    def _at(self) -> datetime:
        """The moment a pass records, later than the one before: record_states keeps the first state written
        at a moment, so two applies within one second (at second precision) lost the second's changes."""
        at = self.clock()
        if self._last_at is not None and at <= self._last_at:
            at = self._last_at + timedelta(microseconds=1)
        self._last_at = at
        return at

    def _note(self, summary: SweepSummary) -> None:
        self.stats.summaries.append(summary)
        self.stats.errors += summary.errors
        del self.stats.summaries[:-50]

    def _fail(self, call: str, message: str) -> None:
        from collectors.models import SourceRun

        message = redact_text(message)  # stats, the log and the SourceRun row alike
        self.stats.errors.append(f"k8s: {call}: {message}")
        logger.warning("collection error k8s: %s: %s", call, message)
        SourceRun.objects.create(
            cluster=self.cluster,
            source="k8s",
            call=call[:300],
            time=self._at(),
            ok=False,
            error=message[:4000],
        )


@contextmanager
def watching(cluster_name: str, **kw: Any) -> Iterator[WatchSession]:
    """A started session (``RuntimeError`` when another one holds the cluster), stopped on exit."""
    session = WatchSession(cluster_name, **kw)
    if not session.start():
        raise RuntimeError(f"another worker watches {cluster_name}")
    try:
        yield session
    finally:
        session.stop()


def watch_cluster(cluster_name: str, duration_s: float | None = None) -> WatchStats:
    """One watch session of ``duration_s`` (default ``RCAWEB_WATCH_SESSION_S``); what the Celery task runs."""
    return WatchSession(cluster_name).run(float(duration_s or settings.RCAWEB_WATCH_SESSION_S))
