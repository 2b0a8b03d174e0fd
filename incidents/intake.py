"""Alertmanager webhook intake: validate, store first (the outbox), then enqueue.

The alerts of one notification are written in one transaction *before* the
HTTP answer and before any Celery work: a broker outage delays grouping, it
never loses an alert (``incidents.tasks.sweep_outbox`` picks up rows whose
``processed_at`` is NULL). Identity is (fingerprint, startsAt), so resends of
the same group are idempotent: an identical resend writes nothing, a resolved
notification updates the alert in place (status, endsAt) and queues it again.

The payload is validated first (``incidents.payload``: the field path of the first error, so whoever
configured the receiver can fix it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from incidents import inline_worker
from incidents.models import Alert
from incidents.payload import (
    MAX_ALERTS,
    ParsedAlert,
    PayloadError,
    clean_text,
    payload_time,
    validate_alertmanager,
)


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
    with inline_worker.serialized(urgent=True), transaction.atomic():
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
    "MAX_ALERTS",
    "IntakeResult",
    "PayloadError",
    "clean_text",
    "enqueue_evidence",
    "enqueue_processing",
    "ingest_alertmanager",
    "payload_time",
    "process_alert",
    "process_alerts",
    "sweep_outbox",
    "validate_alertmanager",
]
