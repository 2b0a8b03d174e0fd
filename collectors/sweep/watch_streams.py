"""A watch session's streams: one thread per kept listing, watching from where its listing stands."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from collectors.sources.errors import SourceError
from collectors.sources.kubernetes import KubeSource

logger = logging.getLogger(__name__)

STREAM_RETRY_S = (1.0, 30.0)  # a broken watch (not a 410) is resumed after a backoff in this range
GONE = "gone"  # queued for a 410: the listing is listed again and watched from the new list
ERROR = "error"  # queued for any other failure of a stream (it resumes after a backoff)


class WatchStreams:
    """The streams of one session. Each queues what it sees as (generation, listing call, event type or
    ``GONE``/``ERROR``, the event or message); every ``start`` bumps the generation, so the reader drops
    what streams of an earlier start queued."""

    def __init__(self, cluster_name: str, watch_timeout_s: int) -> None:
        self.cluster_name = cluster_name
        self.watch_timeout_s = watch_timeout_s
        self.queue: queue.Queue[tuple[int, str, str, Any]] = queue.Queue()
        self.generation = 0
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    def start(self, kube: KubeSource, cursors: dict[str, str]) -> None:
        """A stream per listing of ``cursors`` (listing call -> resourceVersion to watch from)."""
        self._stopping = threading.Event()
        self.generation += 1
        self._threads = [
            threading.Thread(
                target=self._stream,
                args=(kube, call, rv, self.generation, self._stopping),
                name=f"watch-{self.cluster_name}-{call.removeprefix('list ')}",
                daemon=True,
            )
            for call, rv in sorted(cursors.items())
        ]
        for t in self._threads:
            t.start()

    def stop(self, kube: KubeSource | None) -> None:
        self._stopping.set()
        if kube is not None:
            kube.stop_watches()
        for t in self._threads:
            t.join(timeout=self.watch_timeout_s + 10)
        self._threads = []

    def _stream(
        self, kube: KubeSource, call: str, rv: str, generation: int, stopping: threading.Event
    ) -> None:
        """One listing's watch, resumed from the last resourceVersion it saw until the session stops it."""
        failures = 0
        while not stopping.is_set():
            try:
                for event in kube.watch_listing(call, rv, self.watch_timeout_s):
                    if stopping.is_set():
                        return
                    new_rv = str(((event["object"].get("metadata") or {}).get("resourceVersion")) or "")
                    rv = new_rv or rv
                    self.queue.put((generation, call, event["type"], event))
                    failures = 0
            except SourceError as exc:
                if stopping.is_set():
                    return
                if exc.gone:
                    self.queue.put((generation, call, GONE, exc.message))
                    return  # the session relists this listing and starts a new stream
                failures += 1
                self.queue.put((generation, call, ERROR, exc.message))
                stopping.wait(min(STREAM_RETRY_S[1], STREAM_RETRY_S[0] * 2 ** (failures - 1)))
            except Exception as exc:  # a bug must not kill the stream silently
                logger.exception("watch %s of %s failed", call, self.cluster_name)
                self.queue.put((generation, call, ERROR, f"unexpected {type(exc).__name__}: {exc}"))
                stopping.wait(STREAM_RETRY_S[1])
