"""Reading times written as text: the one place rcaweb parses a timestamp.

- :func:`parse_rfc3339`: RFC 3339 exactly, as Go writes it (Alertmanager, Kubernetes): ``Z`` or an offset, up
  to nanoseconds (kept to microseconds). For wire formats that must be checked: an error names the value.
- :func:`parse_timestamp`: ISO 8601 with a zone, the forms rcaweb and its sources write
  (``2026-11-29T03:12:07Z``, ``…07.123456+00:00``, ``…07.123456789Z``); an error names the value.
- :func:`timestamp_or_none`: the same, leniently, for times inside recorded states and objects: absent or
  unreadable is None, a ``datetime`` is returned as it is.

And the one place it writes one: :func:`format_t` (``2026-11-29T03:12:00Z``: UTC, seconds, ``Z``; a naive
datetime is taken as UTC) and :func:`format_t_or_none`.

The cursor's ``t`` (``rcaweb.cursor.parse_t``) and the intake's times add their own rules (UTC only, a range)
on top of these. Database values are the drivers' business (``rcaweb/timestamptz_loader.py``, ``collectors/storage/raw_sql.py``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

# RFC 3339 section 5.6 (date-time), with Go's nanoseconds; "t"/"z" in lower case and a space for "T" are
# allowed by the RFC.
_RFC3339 = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<frac>\d{1,9}))?(?P<tz>[Zz]|[+-]\d{2}:\d{2})$"
)


def format_t(value: datetime) -> str:
    """``2026-11-29T03:12:00Z``: UTC, seconds precision, Z suffix (docs/conventions.md §5)."""
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_t_or_none(value: datetime | None) -> str | None:
    """:func:`format_t`, and None for no time."""
    return format_t(value) if value is not None else None


class TimestampError(ValueError):
    """A text that is not a time of the expected form; the message quotes it (cut to 40 characters)."""


def parse_rfc3339(value: str) -> datetime:
    """RFC 3339 text as an aware datetime in its own offset (Go's zero time, year 1, stays as written)."""
    m = _RFC3339.match(value)
    if not m:
        raise TimestampError(f"{value[:40]!r} is not an RFC 3339 time such as 2026-11-29T03:12:00Z")
    frac = (m["frac"] or "")[:6]  # Python keeps microseconds; Go writes up to nanoseconds
    tz = "+00:00" if m["tz"] in ("Z", "z") else m["tz"]
    try:
        return datetime.fromisoformat(
            f"{m['date']}T{m['time']}{'.' + frac.ljust(6, '0') if frac else ''}{tz}"
        )
    except ValueError:
        raise TimestampError(f"{value[:40]!r} is not a valid date/time") from None


def parse_timestamp(value: str) -> datetime:
    """ISO 8601 text with a zone as an aware datetime; nanoseconds are cut to microseconds."""
    parsed = timestamp_or_none(value) if isinstance(value, str) else None
    if parsed is None:
        raise TimestampError(f"{str(value)[:40]!r} is not a time such as 2026-11-29T03:12:00Z")
    if parsed.tzinfo is None:
        raise TimestampError(f"{value[:40]!r} has no time zone: add Z or an offset such as +00:00")
    return parsed


def timestamp_or_none(value: Any) -> datetime | None:
    """A time from a recorded state or object, or None when absent or unreadable (never raises).

    A ``datetime`` is returned as it is; text without a zone gives a naive datetime, as ``fromisoformat`` does.
    """
    if isinstance(value, datetime):
        return value
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        pass
    try:
        return parse_rfc3339(value)
    except TimestampError:
        return None
