"""The tuned inventory store: rows written with ``COPY … FROM STDIN`` on PostgreSQL (elsewhere one prepared
``INSERT`` run for every row, with the values ``bulk_create`` would write), versions at t read with hand-written
SQL (:mod:`collectors.storage.raw_sql`, for both backends).

Writing: through ``bulk_create`` each row becomes a model instance, every value goes through the field's
``get_db_prep_save``, and Django 5.2 sends them as ``UNNEST`` arrays whose text encoding escapes every quote
of the JSON state one regex substitution at a time; a first sweep of a 20,000-pod cluster writes ~150,000
rows (entities, versions, changes). ``COPY`` takes the same rows as a stream (``bench/collect.py`` measures
a first sweep). Rows are dicts of attribute name → value (``cluster_id``, not ``cluster``); a missing key
takes the field's default, a JSON field's value is encoded here (None is SQL NULL where the field allows
it). With ``ignore_conflicts`` a row that collides with a stored one on a unique constraint is skipped, as
``bulk_create(ignore_conflicts=True)`` skips it: the rows are copied into a temporary table and moved with
``INSERT … ON CONFLICT DO NOTHING``, and the count is of the rows actually inserted.

Reading: see :meth:`TunedStore.versions_at`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

import orjson
from django.db import connections, models, router, transaction
from django.db.models.constants import OnConflict

from collectors.models import Cluster, Entity, EntityVersion
from collectors.storage import raw_sql
from collectors.storage.hot_columns import check_hot_columns
from collectors.storage.orm import OrmStore

_NO_DEFAULT = object()


def json_text(value: Any) -> str:
    """The JSON text stored for ``value`` (orjson: compact; keys of any type; unknown types as str)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()


# The entity's "namespace/name" comes by correlated subquery (one primary-key probe per row), not by a
# join: PostgreSQL misestimates the as-of filter (valid_from <= t AND (valid_to IS NULL OR valid_to > t))
# by an order of magnitude and then hashes the whole entity table, which grows with history
# (bench/asof.py). One subquery for both (a namespace has no "/").
_VERSIONS_AT = raw_sql.valid_at(f"""
SELECT {raw_sql.EV_SELECT},
       (SELECT e.namespace || '/' || e.name FROM {raw_sql.ENTITY} e WHERE e.id = v.entity_id) AS entity_key
FROM {raw_sql.EV} v
WHERE v.cluster_id = %s AND v.kind IN ({{kinds}}) AND {{where}} AND VALID_TO AND v.valid_from <= %s
  AND NOT v.deleted""")
_ENTITY_LOADED = ["id", "cluster_id", "kind", "namespace", "name"]  # the rest is loaded on access


class TunedStore:
    """:class:`collectors.storage.InventoryStore` by ``COPY`` and hand-written SQL."""

    name = "tuned"

    def insert_rows(
        self,
        model: type[models.Model],
        rows: Sequence[dict[str, Any]],
        *,
        ignore_conflicts: bool = False,
        wait_for_disk: bool = True,
    ) -> int:
        if not rows:
            return 0
        alias = router.db_for_write(model)
        conn = connections[alias]
        if conn.vendor != "postgresql":  # no COPY: one prepared INSERT for every row
            return _insert_each(conn, alias, model, rows, ignore_conflicts=ignore_conflicts)
        # Within a caller's transaction, that transaction's commit decides whether it waits for the disk.
        if not wait_for_disk and not conn.in_atomic_block:
            with transaction.atomic(using=alias):
                with conn.cursor() as cursor:
                    cursor.execute("SET LOCAL synchronous_commit = off")
                return self.insert_rows(model, rows, ignore_conflicts=ignore_conflicts)
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
            cursor.execute(
                f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {staging} ON CONFLICT DO NOTHING"
            )
            return cursor.rowcount

    def versions_at(
        self, cluster: Cluster, kinds: Sequence[str], t: datetime, **hot: str
    ) -> list[EntityVersion]:
        """In one query on two ranges of the (cluster, kind, <hot column>, valid_to, valid_from) index
        (:func:`raw_sql.valid_at`); each entity carries its id, kind, namespace and name (the rest of its
        fields load on access) and ``cluster`` itself."""
        check_hot_columns(hot)
        at = raw_sql.db_time(t)
        sql = _VERSIONS_AT.format(
            kinds=raw_sql.in_list(kinds), where=" AND ".join(f"v.{col} = %s" for col in hot) or "1 = 1"
        )
        arm = [cluster.pk, *kinds, *hot.values()]
        out = []
        for row in raw_sql.fetch(sql, [*arm, at, *arm, at, at]):
            v = raw_sql.version(row)
            namespace, _, name = row[-1].partition("/")
            entity = raw_sql.instance(
                Entity, _ENTITY_LOADED, [v.entity_id, cluster.pk, v.kind, namespace, name]
            )
            entity.cluster = cluster
            v.entity = entity
            out.append(v)
        return out


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


def _plain_field(f: models.Field) -> bool:
    """Whether the value ``bulk_create`` writes for ``f`` is the instance's attribute as it was given (or its
    default): no value computed at save (``auto_now``, a custom ``pre_save``) and no database default."""
    if f.db_default is not models.NOT_PROVIDED:
        return False
    if isinstance(f, models.DateField):  # DateTimeField too: its pre_save only fills auto_now(_add)
        return not (f.auto_now or f.auto_now_add)
    return type(f).pre_save is models.Field.pre_save


def _insert_each(
    conn: Any, alias: str, model: type[models.Model], rows: Sequence[dict], *, ignore_conflicts: bool
) -> int:
    """``rows`` into ``model``'s table by one ``INSERT`` (``INSERT OR IGNORE`` with ``ignore_conflicts``) run
    for every row (``executemany``), in one transaction, each value as ``bulk_create`` prepares it: the
    field's default where the row has no key, then the field's ``get_db_prep_save``. ``bulk_create`` itself
    compiles a statement of many rows value by value, which is most of what a sweep's writes cost there.
    A model with a value computed at save, or a row holding an expression, goes through ``bulk_create``.
    Returns the count of rows given, as the ORM store does."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    unknown = set(rows[0]) - {f.attname for f in fields}
    if unknown:
        raise TypeError(f"{model.__name__} has no field {', '.join(sorted(unknown))}")
    if not all(_plain_field(f) for f in fields):
        return OrmStore().insert_rows(model, rows, ignore_conflicts=ignore_conflicts)
    params = []
    for row in rows:
        values = []
        for f in fields:
            value = row[f.attname] if f.attname in row else f.get_default()
            if hasattr(value, "resolve_expression"):
                return OrmStore().insert_rows(model, rows, ignore_conflicts=ignore_conflicts)
            values.append(f.get_db_prep_save(value, connection=conn))
        params.append(values)
    verb = conn.ops.insert_statement(on_conflict=OnConflict.IGNORE if ignore_conflicts else None)
    table = conn.ops.quote_name(model._meta.db_table)
    cols = ", ".join(conn.ops.quote_name(cast(str, f.column)) for f in fields)
    sql = f"{verb} {table} ({cols}) VALUES ({', '.join(['%s'] * len(fields))})"
    with transaction.atomic(using=alias, savepoint=False), conn.cursor() as cursor:
        cursor.executemany(sql, params)
    return len(rows)
