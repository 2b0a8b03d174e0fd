"""The Alertmanager webhook's payload validated: field paths in every error, limits, times in range.

Validation names the field path of the first error (``alerts[3].labels.severity: expected a string``) so
whoever configured the receiver can fix it. The changes API (``POST /api/v1/changes``) reads its times and
texts with the same helpers.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from collectors.sources.redact import redact_text, redact_value
from rcaweb import timestamps
from rcaweb.cursor import EARLIEST, LATEST, TIME_RANGE

# Alertmanager's own max_alerts is unbounded by default, but a 1 MiB body cannot honestly carry
# more than a few thousand alerts; beyond this we answer 413 rather than write a partial group.
MAX_ALERTS = 5000
MAX_LABELS = 200  # per alert; Prometheus' default label_limit is unbounded, real rules carry < 50
MAX_STRING = 8192  # a label or annotation value (descriptions can be long; megabyte strings are abuse)
MAX_KEY = 256
GO_ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt while an alert fires


class PayloadError(ValueError):
    """The payload does not match the webhook format; ``path`` names the field (``alerts[3].labels``)."""

    def __init__(self, path: str, message: str, *, status: int = 400) -> None:
        text = f"{path}: {message}" if path else message
        # The message quotes the sender's text, which may hold lone surrogates: escaped, it can be logged and
        # written anywhere UTF-8 goes (a log handler, a test runner's report) instead of failing there.
        super().__init__(text.encode("utf-8", "backslashreplace").decode("utf-8"))
        self.path = path
        self.status = status


@dataclass
class ParsedAlert:
    fingerprint: str
    status: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None
    generator_url: str
    raw: dict[str, Any]


#
# Validation
#


def payload_time(value: Any, path: str, *, zero_ok: bool = False) -> datetime:
    """Go's RFC 3339 (nanoseconds, any offset) as an aware UTC datetime, within rcaweb's one time range
    (``rcaweb.cursor.EARLIEST``..``LATEST``, the cursor's): an alert dated 1999 would be an incident whose
    every link is a 400. With ``zero_ok``, Go's zero time (year 1, any offset) is returned as written: the
    endsAt of a firing alert, which the caller reads as no end."""
    if not isinstance(value, str):
        raise PayloadError(path, f"expected an RFC 3339 time string, got {_type(value)}")
    try:
        parsed = timestamps.parse_rfc3339(value)
    except timestamps.TimestampError as exc:
        raise PayloadError(path, str(exc))
    if parsed.year <= 1 and zero_ok:
        return parsed
    try:
        utc = parsed.astimezone(UTC)  # 9999-12-31T23:59:59-01:00 is past datetime's year 9999
    except OverflowError:  # ... and 0001-01-01T00:00:00+01:00 before its year 1
        utc = LATEST if parsed.year > 1 else EARLIEST - timedelta(days=1)
    if utc >= LATEST:
        raise PayloadError(path, f"{value[:40]!r} is after {LATEST.year - 1}: {_RANGE_HELP}")
    if utc < EARLIEST:
        raise PayloadError(path, f"{value[:40]!r} is before {EARLIEST.year}: {_RANGE_HELP}")
    return utc


_RANGE_HELP = f"an alert's or a change's time must be within {TIME_RANGE} (UTC), the range of the time cursor"


_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def clean_text(value: Any) -> Any:
    """``value`` with NUL bytes and lone surrogates replaced by U+FFFD in every string and key.

    Both are valid JSON (``\\u0000``, ``\\ud800``) but PostgreSQL refuses NUL in text and jsonb, and a lone
    surrogate cannot be encoded as UTF-8 for either database. Replacing them keeps the alert (and the
    valid alerts of the same notification: Alertmanager does not retry a 4xx) with the damage visible.
    """
    if isinstance(value, str):
        return _BAD_TEXT.sub("\ufffd", value) if "\x00" in value or not value.isascii() else value
    if isinstance(value, dict):
        return {clean_text(k): clean_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_text(v) for v in value]
    return value


def _type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


def _string(value: Any, path: str, *, max_len: int = MAX_STRING, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise PayloadError(path, f"expected a string, got {_type(value)}")
    if len(value) > max_len:
        raise PayloadError(path, f"longer than {max_len} characters")
    return value


def _kv(value: Any, path: str) -> dict[str, str]:
    """An Alertmanager KV map: object<string,string>."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PayloadError(path, f"expected an object of strings, got {_type(value)}")
    if len(value) > MAX_LABELS:
        raise PayloadError(path, f"more than {MAX_LABELS} entries")
    out: dict[str, str] = {}
    for k, v in value.items():
        if len(k) > MAX_KEY:
            raise PayloadError(path, f"key {k[:40]!r}… longer than {MAX_KEY} characters")
        out[k] = _string(v, f"{path}.{k}", required=True)
    return out


def label_fingerprint(labels: dict[str, str]) -> str:
    """For Alertmanagers older than 0.19 (no ``fingerprint``): a stable 16-hex hash of the label set."""
    text = "\xff".join(f"{k}\xff{labels[k]}" for k in sorted(labels))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def validate_alertmanager(payload: Any) -> tuple[dict[str, Any], list[ParsedAlert]]:
    """Check the webhook shape (version "4"; unknown keys tolerated, as newer Alertmanagers add some)."""
    if not isinstance(payload, dict):
        raise PayloadError("", f"expected a JSON object, got {_type(payload)}")
    try:
        payload = clean_text(payload)
    except RecursionError:
        raise PayloadError("", "JSON nested too deeply")
    version = payload.get("version")
    if version is not None and version != "4":
        raise PayloadError("version", f'expected "4" (the Alertmanager webhook format), got {version!r}')
    group: dict[str, Any] = {
        "receiver": _string(payload.get("receiver"), "receiver", max_len=200),
        "status": _string(payload.get("status"), "status", max_len=16),
        "group_key": _string(payload.get("groupKey"), "groupKey", max_len=2000),
        "external_url": _string(payload.get("externalURL"), "externalURL", max_len=2000),
        "group_labels": _kv(payload.get("groupLabels"), "groupLabels"),
        "common_labels": _kv(payload.get("commonLabels"), "commonLabels"),
        "common_annotations": _kv(payload.get("commonAnnotations"), "commonAnnotations"),
    }
    if group["status"] and group["status"] not in ("firing", "resolved"):
        raise PayloadError("status", f'expected "firing" or "resolved", got {group["status"][:20]!r}')
    truncated = payload.get("truncatedAlerts", 0)
    if not isinstance(truncated, int) or isinstance(truncated, bool) or truncated < 0:
        raise PayloadError("truncatedAlerts", f"expected a non-negative integer, got {_type(truncated)}")
    group["truncated"] = truncated
    alerts = payload.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("alerts", f"expected an array, got {_type(alerts)}")
    if len(alerts) > MAX_ALERTS:
        raise PayloadError(
            "alerts",
            f"{len(alerts)} alerts in one notification; at most {MAX_ALERTS} are accepted "
            f"(set max_alerts on the webhook receiver)",
            status=413,
        )
    return group, [_parse_alert(a, f"alerts[{i}]") for i, a in enumerate(alerts)]


def _parse_alert(item: Any, path: str) -> ParsedAlert:
    if not isinstance(item, dict):
        raise PayloadError(path, f"expected an object, got {_type(item)}")
    labels = _kv(item.get("labels"), f"{path}.labels")
    if not labels:
        raise PayloadError(f"{path}.labels", "an alert needs at least one label (alertname)")
    status = _string(item.get("status"), f"{path}.status", max_len=16) or "firing"
    if status not in ("firing", "resolved"):
        raise PayloadError(f"{path}.status", f'expected "firing" or "resolved", got {status[:20]!r}')
    if "startsAt" not in item:
        raise PayloadError(f"{path}.startsAt", "missing")
    starts_at = payload_time(item["startsAt"], f"{path}.startsAt")
    ends_raw = item.get("endsAt")
    ends_at = (
        None
        if ends_raw in (None, "", GO_ZERO_TIME)
        else payload_time(ends_raw, f"{path}.endsAt", zero_ok=True)
    )
    if ends_at is not None and ends_at.year <= 1:  # Go's zero time in another offset
        ends_at = None
    if status == "firing":
        ends_at = None  # a firing alert's endsAt is Alertmanager's resolve timeout guess, not an end
    fingerprint = _string(item.get("fingerprint"), f"{path}.fingerprint", max_len=64) or label_fingerprint(
        labels
    )
    annotations = _kv(item.get("annotations"), f"{path}.annotations")
    generator_url = _string(item.get("generatorURL"), f"{path}.generatorURL", max_len=2000)
    # Redacted after the fingerprint is taken (identity stays Alertmanager's), before anything is stored.
    return ParsedAlert(
        fingerprint=fingerprint,
        status=status,
        labels=redact_value(labels),
        annotations=redact_value(annotations),
        starts_at=starts_at,
        ends_at=ends_at,
        generator_url=redact_text(generator_url),
        raw=redact_value(item),
    )
