"""Insert many plain rows fast: PostgreSQL ``COPY … FROM STDIN``, ``bulk_create`` elsewhere.

A first sweep of a 20,000-pod cluster writes ~150,000 rows (entities, versions, changes). Through
``bulk_create`` each row becomes a model instance, every value goes through the field's ``get_db_prep_save``,
and Django 5.2 sends them as ``UNNEST`` arrays whose text encoding escapes every quote of the JSON state
one regex substitution at a time: ~40 s of CPU. ``COPY`` takes the same rows as a stream: ~2 s.

Rows are dicts of attribute name → value (``cluster_id``, not ``cluster``); a missing key takes the
field's default, a JSON field's value is encoded here (None is SQL NULL where the field allows it).
Returns the row count (no primary keys: callers that need them read them back by their natural key).
With ``ignore_conflicts`` a row that collides with a stored one on a unique constraint is skipped, as
``bulk_create(ignore_conflicts=True)`` skips it: on PostgreSQL the rows are copied into a temporary table
and moved with ``INSERT … ON CONFLICT DO NOTHING``, and the count is of the rows actually inserted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import orjson
from django.db import connections, models, router, transaction

_NO_DEFAULT = object()


def json_text(value: Any) -> str:
    """The JSON text stored for ``value`` (orjson: compact; keys of any type; unknown types as str)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()


def insert_rows(
    model: type[models.Model],
    rows: Sequence[dict[str, Any]],
    *,
    ignore_conflicts: bool = False,
    wait_for_disk: bool = True,
) -> int:
    """Insert ``rows`` into ``model``'s table in one statement per backend batch; returns the row count.

    ``wait_for_disk=False``, for rows that are a copy of what a source still holds (telemetry points: the next
    sweep refills from the last stored one): on PostgreSQL the commit does not wait for the write-ahead log to
    reach the disk (``synchronous_commit = off`` for this transaction; inside a caller's transaction, that
    transaction's commit decides). A crash may lose the last fraction of a second of such commits, never
    corrupt or half-write them."""
    if not rows:
        return 0
    alias = router.db_for_write(model)
    conn = connections[alias]
    if conn.vendor != "postgresql":
        objs = [model(**row) for row in rows]
        model._default_manager.bulk_create(objs, batch_size=2000, ignore_conflicts=ignore_conflicts)
        return len(rows)
    if not wait_for_disk and not conn.in_atomic_block:  # within a caller's transaction, its commit decides
        with transaction.atomic(using=alias):
            with conn.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
            return insert_rows(model, rows, ignore_conflicts=ignore_conflicts)
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    unknown = set(rows[0]) - {f.attname for f in fields}  # rows share their keys: the first one tells
    if unknown:
        raise TypeError(f"{model.__name__} has no field {', '.join(sorted(unknown))}")
    plan = []
    for f in fields:
        default = f.get_default() if f.has_default() or f.null else _NO_DEFAULT
        plan.append((f.attname, isinstance(f, models.JSONField), f.null, default))
    table = conn.ops.quote_name(model._meta.db_table)
    # A concrete field always has a column (the stubs type Field.column as optional for the others).
    cols = ", ".join(conn.ops.quote_name(cast(str, f.column)) for f in fields)
    if not ignore_conflicts:
        _copy(conn, table, cols, model, plan, rows)
        return len(rows)
    staging = conn.ops.quote_name(f"_staging_{model._meta.db_table}")
    with transaction.atomic(using=alias), conn.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {staging}")  # a call earlier in the same outer transaction
        cursor.execute(
            f"CREATE TEMPORARY TABLE {staging} ON COMMIT DROP AS SELECT {cols} FROM {table} WITH NO DATA"
        )
        _copy(conn, staging, cols, model, plan, rows)
        cursor.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {staging} ON CONFLICT DO NOTHING")
        return cursor.rowcount


def _copy(
    conn: Any, table: str, cols: str, model: type[models.Model], plan: list, rows: Sequence[dict]
) -> None:
    with conn.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
        for row in rows:
            values = []
            for attname, is_json, nullable, default in plan:
                value = row.get(attname, default)
                if value is _NO_DEFAULT:
                    raise TypeError(f"{model.__name__}.{attname} has no value and no default")
                if is_json and not (value is None and nullable):
                    value = json_text(value)
                values.append(value)
            copy.write_row(values)
