"""The runner that turns each source call of a sweep into a ``SourceRun`` row (ok, or the error that is itself
evidence) without letting it stop the sweep."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TypeVar

from collectors.models import Cluster, SourceRun
from collectors.sources.errors import SourceError
from collectors.sources.redact import redact_text
from collectors.sweep.summary import SweepSummary

logger = logging.getLogger(__name__)

T = TypeVar("T")


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
