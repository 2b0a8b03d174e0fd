"""The time cursor shared by every page: ``?t=2026-11-29T03:12:00Z&w=2h``.

Parsed once here (``CursorMiddleware`` sets ``request.cursor``); every link
rcaweb renders between pages goes through :meth:`Cursor.link` or the
``{% cursor_url %}`` tag, which carry *only* ``t`` and ``w``. A malformed value
is a 400 that says which format is expected, never a silent "now".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

from rcaweb.durations import format_duration, parse_duration
from rcaweb.timestamps import format_t, parse_timestamp

T_FORMAT_HELP = "t must be an ISO 8601 UTC time such as 2026-11-29T03:12:00Z"
W_FORMAT_HELP = "w must be a window such as 30m, 2h, 1d or 1h30m (between 1m and 30d)"

DEFAULT_WINDOW = timedelta(hours=2)
MIN_WINDOW = timedelta(minutes=1)
MAX_WINDOW = timedelta(days=30)
# The one time range of rcaweb: the cursor's t, and what the intake accepts as an alert's or a change's time
# (incidents.intake.payload_time), so that every time stored is one a cursor link can point at.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)
TIME_RANGE = f"{EARLIEST.year}-{LATEST.year - 1}"

_T_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]00:?00)$")


class CursorError(ValueError):
    """A ``t`` or ``w`` that cannot be read; the message names the parameter and the format."""


def parse_t(text: str) -> datetime:
    """Parse a UTC ISO 8601 time. Only UTC (``Z`` or ``+00:00``) is accepted: URLs must be unambiguous."""
    text = (text or "").strip()
    if len(text) > 40 or not _T_RE.match(text):
        raise CursorError(f"t={text[:40]!r} is not valid: {T_FORMAT_HELP}")
    try:
        value = parse_timestamp(text)
    except ValueError:
        raise CursorError(f"t={text[:40]!r} is not valid: {T_FORMAT_HELP}")
    if not (EARLIEST <= value < LATEST):
        raise CursorError(f"t={text[:40]!r} is out of range ({TIME_RANGE}): {T_FORMAT_HELP}")
    return value.astimezone(UTC)


def t_or_none(value: object) -> datetime | None:
    """A time from a recorded state, read as :func:`parse_t` reads ``t``; None when absent or unreadable
    (never raises)."""
    if not value or not isinstance(value, str):
        return None
    try:
        return parse_t(value)
    except ValueError:
        return None


def within_range(at: datetime) -> datetime:
    """``at``, or the nearest moment the cursor accepts: a link an hour before an incident of 2000-01-01 00:10
    points at 2000-01-01 00:00 rather than at a 400 (what the intake accepts ends at the same edges)."""
    return min(max(at, EARLIEST), LATEST - timedelta(seconds=1))


def query_at(at: datetime, window: timedelta) -> str:
    """The query of a cursor at ``at`` (``t=…&w=…``), written out rather than through ``urlencode``: of what
    :func:`format_t` and :func:`format_duration` print, only the colons of t need encoding. ``at`` is kept
    within the cursor's range (:func:`within_range`)."""
    return f"t={format_t(within_range(at)).replace(':', '%3A')}&w={format_duration(window)}"


def parse_w(text: str) -> timedelta:
    try:
        value = parse_duration(text)
    except ValueError:
        raise CursorError(f"w={text[:20]!r} is not valid: {W_FORMAT_HELP}")
    if not (MIN_WINDOW <= value <= MAX_WINDOW):
        raise CursorError(f"w={text[:20]!r} is out of range: {W_FORMAT_HELP}")
    return value


@dataclass(frozen=True)
class Cursor:
    """Where the operator is looking: a moment ``t`` (None = live) and a window ``w`` around it."""

    at: datetime | None = None  # None = live
    window: timedelta = DEFAULT_WINDOW
    window_given: bool = False

    @classmethod
    def from_params(cls, t: str | None, w: str | None) -> Cursor:
        at = parse_t(t) if t not in (None, "") else None
        window = parse_w(w) if w not in (None, "") else DEFAULT_WINDOW
        return cls(at=at, window=window, window_given=w not in (None, ""))

    @property
    def live(self) -> bool:
        return self.at is None

    @property
    def t(self) -> datetime:
        """The moment to render: the cursor, or now when live."""
        if self.at is not None:
            return self.at
        from django.utils import timezone

        return timezone.now().replace(microsecond=0)

    @property
    def start(self) -> datetime:
        """Window start: the window ends at t (it looks back from the cursor)."""
        return self.t - self.window

    @property
    def end(self) -> datetime:
        return self.t

    def params(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.at is not None:
            out["t"] = format_t(within_range(self.at))
        if self.window_given or self.at is not None:
            out["w"] = format_duration(self.window)
        return out

    def query(self) -> str:
        """``urlencode(self.params())`` (tests/rcaweb/test_cursor.py checks it against urlencode)."""
        if self.at is not None:
            return query_at(self.at, self.window)
        return f"w={format_duration(self.window)}" if self.window_given else ""

    def link(self, url: str) -> str:
        """Return ``url`` with this cursor's ``t``/``w`` (and nothing else of the current page)."""
        parts = urlsplit(url)
        keep = [kv for kv in parts.query.split("&") if kv and not kv.startswith(("t=", "w="))]
        q = self.query()
        if q:
            keep.append(q)
        return urlunsplit((parts.scheme, parts.netloc, parts.path, "&".join(keep), parts.fragment))

    def moved_to(self, at: datetime | None) -> Cursor:
        return Cursor(at=at, window=self.window, window_given=self.window_given)

    def shifted(self, delta: timedelta) -> Cursor:
        return self.moved_to(self.t + delta)

    @property
    def label(self) -> str:
        return "live" if self.at is None else format_t(self.at)
