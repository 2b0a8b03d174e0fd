"""Container logs for the pod page: read now from the Kubernetes API, bounded, redacted, never stored.

Kubernetes keeps two logs per container, the running one's and the last terminated one's (``previous``); older
containers' logs are gone. So a log is live data even when the page is as of a past ``t``: it is read when asked
(``collectors.sources.kubernetes.KubeSource.pod_log``, the source the incident evidence reads too, redacted by
``collectors.sources.redact``), with the kubelet's timestamps, and the lines written after ``t`` are left out.

A read is bounded in size (the last ``tail`` lines, at most ``MAX_TAIL``, and 1 MiB, by the source) and in
time (``RCAWEB_SOURCE_TIMEOUT_S`` whatever the server does: the read runs on a small pool of its own and the
page stops waiting at the deadline), and it never raises: a failure is a :class:`LogRead` with ``error`` in
words a responder can act on.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone

from collectors.models import Cluster
from collectors.sources.errors import SourceError
from collectors.sources.redact import redact_text

logger = logging.getLogger(__name__)

DEFAULT_TAIL = 200
MAX_TAIL = 5000  # what KubeSource.pod_log asks at most
# At most this many log reads at once, whatever the number of open pages: a hung API server holds these
# threads until their socket timeout, never more of them.
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="podlog")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d) ?")


@dataclass(frozen=True)
class LogLine:
    """One line of a container log, with the time the kubelet stamped on it (None when it carried none)."""

    time: datetime | None
    text: str


@dataclass
class LogRead:
    """What one read of a container's log gave: its lines (the last ``tail``, written by ``until``, matching
    ``query``), or why there are none."""

    container: str
    previous: bool
    read_at: datetime
    until: datetime | None = None  # the cursor's t; None when live
    query: str = ""
    lines: list[LogLine] = field(default_factory=list)
    read: int = 0  # lines the API answered
    after_t: int = 0  # of those, written after t (left out)
    before_tail: int = 0  # of those written by t, older than the last ``tail`` (left out)
    error: str = ""

    def text(self) -> str:
        """The lines as a file (the download): each with its RFC 3339 time, as ``kubectl logs --timestamps``."""
        return "".join(f"{_stamp(ln.time)}{ln.text}\n" for ln in self.lines)


def _stamp(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ ") if t else ""


def parse_lines(text: str) -> list[LogLine]:
    """``timestamps=true`` log text as lines; a line without a stamp keeps the previous line's time."""
    out: list[LogLine] = []
    last: datetime | None = None
    for raw in text.splitlines():
        m = _STAMP.match(raw)
        if m:
            try:
                last = datetime.fromisoformat(m[1] + (m[3] if m[3] != "Z" else "+00:00")).astimezone(UTC)
                raw = raw[m.end() :]
            except ValueError:
                pass
        out.append(LogLine(last, raw))
    return out


def select(
    lines: list[LogLine], *, until: datetime | None, tail: int, query: str
) -> tuple[list[LogLine], int, int]:
    """(the lines shown, how many were written after ``until``, how many before the last ``tail``): the last
    ``tail`` lines written by ``until``, then those containing ``query`` (any case)."""
    kept = [ln for ln in lines if until is None or ln.time is None or ln.time <= until]
    after = len(lines) - len(kept)
    older = max(0, len(kept) - tail)
    kept = kept[older:]
    if query:
        needle = query.casefold()
        kept = [ln for ln in kept if needle in ln.text.casefold()]
    return kept, after, older


def read_log(
    cluster: Cluster,
    namespace: str,
    name: str,
    container: str,
    *,
    previous: bool,
    tail: int = DEFAULT_TAIL,
    until: datetime | None = None,
    query: str = "",
) -> LogRead:
    """One container's log now, as of ``until`` (see the module's docstring). Never raises."""
    tail = max(1, min(int(tail), MAX_TAIL))
    answer = LogRead(container, previous, timezone.now(), until, query)
    # As of a past t, read as much as the source allows: the lines after t are dropped before the tail is taken.
    ask = tail if until is None else MAX_TAIL
    deadline = float(settings.RCAWEB_SOURCE_TIMEOUT_S)
    _load_client()
    future = _POOL.submit(_fetch, cluster, namespace, name, container, previous, ask, deadline)
    try:
        text = future.result(timeout=deadline + 1)
    except FutureTimeout:
        future.cancel()
        answer.error = (
            f"The Kubernetes API did not answer within {deadline:g} s. Try again, or ask for fewer lines."
        )
        return answer
    except SourceError as exc:
        answer.error = _in_words(exc, namespace, name, container, previous)
        return answer
    except Exception as exc:  # a log read must never take the page down
        logger.exception("log %s/%s [%s] could not be read", namespace, name, container)
        answer.error = f"The log could not be read: {redact_text(str(exc))[:300]}"
        return answer
    lines = parse_lines(text)
    answer.read = len(lines)
    answer.lines, answer.after_t, answer.before_tail = select(lines, until=until, tail=tail, query=query)
    return answer


def _load_client() -> None:
    """Import the API classes KubeSource builds. The client imports them on first use, which takes seconds once
    per process: paid here, before the deadline starts, since the deadline is the API server's to meet."""
    from kubernetes import client

    for name in ("CoreV1Api", "BatchV1Api", "CustomObjectsApi"):
        getattr(client, name)


def _fetch(
    cluster: Cluster, namespace: str, name: str, container: str, previous: bool, tail: int, timeout: float
) -> str:
    # Imported here: the module's client is only loaded by the first read.
    from collectors.sources.kubernetes import KubeSource

    with KubeSource(cluster, timeout=timeout) as source:
        return source.pod_log(
            namespace, name, container=container or None, previous=previous, tail_lines=tail, timestamps=True
        )


def _in_words(exc: SourceError, namespace: str, name: str, container: str, previous: bool) -> str:
    """A failed read, said for the pod page (the API server's own words kept: they are already redacted)."""
    if exc.status == 404:
        return (
            f"The Kubernetes API has no pod {namespace}/{name} now: the pod no longer exists, and its logs "
            "were deleted with it."
        )
    if exc.status == 400 and previous and "previous terminated container" in exc.message:
        return f"Container {container} has not restarted: there is no previous container log. ({exc.message})"
    if exc.status == 400:
        return f"Kubernetes has no log for container {container} now: {exc.message}"
    return f"The log cannot be read now: {exc.message}"
