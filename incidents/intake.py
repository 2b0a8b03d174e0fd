"""Alertmanager webhook intake: validate, store first (the outbox), then enqueue.

The alerts of one notification are written in one transaction *before* the
HTTP answer and before any Celery work: a broker outage delays grouping, it
never loses an alert (``incidents.tasks.sweep_outbox`` picks up rows whose
``processed_at`` is NULL). Identity is (fingerprint, startsAt), so resends of
the same group are idempotent: an identical resend writes nothing, a resolved
notification updates the alert in place (status, endsAt) and queues it again.

Validation names the field path of the first error (``alerts[3].labels.severity:
expected a string``) so whoever configured the receiver can fix it.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from collectors.sources.redact import redact_text, redact_value
from incidents import inline
from incidents.models import Alert
from rcaweb import timestamps
from rcaweb.cursor import EARLIEST, LATEST, TIME_RANGE

logger = logging.getLogger(__name__)

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


@dataclass
class IntakeResult:
    """What one notification did: ``queued`` are the ids handed to ``process_alerts``."""

    received: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    queued: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {
            "received": self.received,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
        }


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


#
# Storage (the outbox)
#


def _cluster_of(labels: dict[str, str], common: dict[str, str]) -> str:
    return (labels.get("cluster") or common.get("cluster") or "")[:63]


def ingest_alertmanager(payload: dict, *, received_at: datetime | None = None) -> IntakeResult:
    """Validate (raises :class:`PayloadError`), store in one transaction, enqueue processing on commit.

    New alerts cost one ``INSERT … ON CONFLICT DO NOTHING RETURNING id`` (the common case: one statement);
    only identities that already existed are read back and compared, and updated when they changed.
    """
    group, parsed = validate_alertmanager(payload)
    now = received_at or timezone.now()
    result = IntakeResult(received=len(parsed))
    # Within one notification the same identity may appear twice (it should not); the last one wins.
    by_key = {(a.fingerprint, a.starts_at): a for a in parsed}
    # On SQLite the write lock, ahead of background writers: the insert waits for one transaction at most.
    with inline.serialized(urgent=True), transaction.atomic():
        new_ids = _insert([_new_row(a, group, now) for a in by_key.values()])
        result.created = len(new_ids)
        result.queued.extend(new_ids)
        if len(new_ids) < len(by_key):  # some identities existed: a resend, a resolution, or a race
            taken = set(new_ids)
            for key, row in _existing(list(by_key)).items():
                if row.pk in taken:
                    continue
                if _update_row(row, by_key[key], group, now):
                    result.updated += 1
                    result.queued.append(row.pk)
                else:
                    result.unchanged += 1
        if result.queued:
            ids = list(result.queued)
            transaction.on_commit(lambda: enqueue_processing(ids))
    return result


def _existing(keys: list[tuple[str, datetime]]) -> dict[tuple[str, datetime], Alert]:
    if not keys:
        return {}
    qs = Alert.objects.filter(fingerprint__in={k[0] for k in keys})
    wanted = set(keys)
    return {(a.fingerprint, a.starts_at): a for a in qs if (a.fingerprint, a.starts_at) in wanted}


# Columns the intake writes (processed_at and incident stay NULL: the outbox); JSON and times are adapted per backend.
_COLUMNS = (
    "fingerprint",
    "name",
    "status",
    "severity",
    "cluster_name",
    "labels",
    "annotations",
    "starts_at",
    "ends_at",
    "generator_url",
    "group_key",
    "receiver",
    "raw",
    "received_at",
    "updated_at",
)
_JSON_COLUMNS = frozenset({"labels", "annotations", "raw"})
_TIME_COLUMNS = frozenset({"starts_at", "ends_at", "received_at", "updated_at"})


def _new_row(a: ParsedAlert, group: dict[str, Any], now: datetime) -> dict[str, Any]:
    return {
        "fingerprint": a.fingerprint,
        "name": a.labels.get("alertname", "")[:200] or "(no alertname)",
        "status": a.status,
        "severity": a.labels.get("severity", "")[:32],
        "cluster_name": _cluster_of(a.labels, group["common_labels"]),
        "labels": a.labels,
        "annotations": a.annotations,
        "starts_at": a.starts_at,
        "ends_at": a.ends_at,
        "generator_url": a.generator_url,
        "group_key": group["group_key"],
        "receiver": group["receiver"],
        "raw": a.raw,
        "received_at": now,
        "updated_at": now,
    }


def _update_row(row: Alert, a: ParsedAlert, group: dict[str, Any], now: datetime) -> bool:
    """Apply a resend in place; True when something an operator would see changed (then it is queued again)."""
    changed = (row.status, row.ends_at, row.labels, row.annotations) != (
        a.status,
        a.ends_at,
        a.labels,
        a.annotations,
    )
    if not changed:
        return False
    if row.status == "resolved" and a.status == "firing" and row.ends_at and row.ends_at >= a.starts_at:
        # A stale firing resend arriving after the resolution (retries reorder): keep the resolution.
        return False
    Alert.objects.filter(pk=row.pk).update(
        status=a.status,
        ends_at=a.ends_at,
        labels=a.labels,
        annotations=a.annotations,
        raw=a.raw,
        severity=a.labels.get("severity", "")[:32],
        group_key=group["group_key"] or row.group_key,
        updated_at=now,
        processed_at=None,
    )
    return True


INSERT_CHUNK = 500  # rows per statement: 15 parameters each stays under SQLite's 32,766 variables


def _insert(rows: list[dict[str, Any]]) -> list[int]:
    """``INSERT … ON CONFLICT (fingerprint, starts_at) DO NOTHING RETURNING id`` (PostgreSQL and SQLite ≥ 3.35).

    Returns the ids of the rows this call created; identities that already existed (or that a concurrent
    request inserted first) are skipped here and compared by the caller. Plain SQL rather than
    ``bulk_create``: one statement, pks back on every backend, and no model instances on the hot path.
    """
    if not rows:
        return []
    if connection.vendor == "postgresql":
        return _insert_postgresql(rows)
    ops = connection.ops
    qn = ops.quote_name
    cols = ", ".join(qn(c) for c in _COLUMNS)
    one = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"
    ids: list[int] = []

    def adapt(col: str, value: Any) -> Any:
        if col in _JSON_COLUMNS:
            return ops.adapt_json_value(value, None)
        if col in _TIME_COLUMNS:
            return ops.adapt_datetimefield_value(value)
        return value

    with connection.cursor() as cur:
        for start in range(0, len(rows), INSERT_CHUNK):
            chunk = rows[start : start + INSERT_CHUNK]
            cur.execute(
                f"INSERT INTO {qn(Alert._meta.db_table)} ({cols}) VALUES {', '.join([one] * len(chunk))} "
                f"ON CONFLICT ({qn('fingerprint')}, {qn('starts_at')}) DO NOTHING RETURNING {qn('id')}",
                [adapt(c, r[c]) for r in chunk for c in _COLUMNS],
            )
            ids.extend(row[0] for row in cur.fetchall())
    return ids


def _pg_types() -> list[str]:
    out = []
    for name in _COLUMNS:
        if name in _JSON_COLUMNS:
            out.append("jsonb[]")
        elif name in _TIME_COLUMNS:
            out.append("timestamptz[]")
        else:
            out.append("text[]")
    return out


_PG_INSERT = (
    f"INSERT INTO {Alert._meta.db_table} ({', '.join(_COLUMNS)}) "
    f"SELECT * FROM unnest({', '.join(f'%b::{t}' for t in _pg_types())}) "
    "ON CONFLICT (fingerprint, starts_at) DO NOTHING RETURNING id"
)


def _insert_postgresql(rows: list[dict[str, Any]]) -> list[int]:
    """The webhook's hot path on PostgreSQL: one column array per parameter, one prepared statement.

    Whatever the number of alerts, the statement text is the same and has 15 parameters, so psycopg caches
    its conversion and PostgreSQL its plan; a plain psycopg cursor on Django's connection (same transaction)
    binds server-side instead of re-quoting every value client-side. Together about half the CPU per
    notification on both sides (bench/intake.py).
    """
    import psycopg
    from psycopg.types.json import Jsonb

    columns = [[r[c] for r in rows] for c in _COLUMNS]
    for k, name in enumerate(_COLUMNS):
        if name in _JSON_COLUMNS:
            columns[k] = [Jsonb(v) for v in columns[k]]
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cur:
        cur.execute(_PG_INSERT, columns, prepare=True)
        return [row[0] for row in cur.fetchall()]


# Processing lives in incidents.outbox; re-exported here for callers of the intake module.
from incidents.outbox import (  # noqa: E402
    enqueue_evidence,
    enqueue_processing,
    process_alert,
    process_alerts,
    sweep_outbox,
)

__all__ = [
    "IntakeResult",
    "PayloadError",
    "enqueue_evidence",
    "enqueue_processing",
    "ingest_alertmanager",
    "payload_time",
    "process_alert",
    "process_alerts",
    "sweep_outbox",
    "validate_alertmanager",
]
