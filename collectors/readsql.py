"""Read rows with hand-written SQL, for the entity pages' hot queries; the counterpart of :mod:`collectors.bulk`.

An entity page runs six to ten small queries. Through the ORM each one costs about 0.5 ms of Python
before the database sees it (filter building, SQL compilation) and as much again turning rows into
model instances; the database answers most of them in 0.05-0.3 ms. The statements here are written
once as text, with ``%s`` parameters for both backends, and their rows become model instances through
``Model.from_db`` after the same conversions the fields would apply (:func:`version`, :func:`change`).

Only what the SQL needs differs by backend: datetime parameters (:func:`db_time`), naive datetimes
read back from SQLite (:func:`aware`), and JSON text (:func:`load_json`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from django.db import connection

from collectors.models import Change, Cluster, Entity, EntityVersion, KubeEvent, SourceRun

EV = EntityVersion._meta.db_table
ENTITY = Entity._meta.db_table
CLUSTER = Cluster._meta.db_table
CHANGE = Change._meta.db_table
EVENT = KubeEvent._meta.db_table
SOURCE_RUN = SourceRun._meta.db_table


def _columns(model: type, alias: str) -> tuple[list[str], str]:
    """(attnames, "alias.col, alias.col, …") of a model's concrete fields, in field order."""
    fields = model._meta.concrete_fields
    return [f.attname for f in fields], ", ".join(
        f"{alias}.{connection.ops.quote_name(f.column)}" for f in fields
    )


EV_FIELDS, EV_SELECT = _columns(EntityVersion, "v")
ENTITY_FIELDS, ENTITY_SELECT = _columns(Entity, "e")
CLUSTER_FIELDS, CLUSTER_SELECT = _columns(Cluster, "c")
CHANGE_FIELDS, CHANGE_SELECT = _columns(Change, "ch")
EVENT_FIELDS, EVENT_SELECT = _columns(KubeEvent, "ev")
SOURCE_RUN_FIELDS, SOURCE_RUN_SELECT = _columns(SourceRun, "sr")

# The as-of condition of an EntityVersion aliased v, with the same t twice: valid_from <= t < valid_to.
AS_OF = "v.valid_from <= %s AND (v.valid_to IS NULL OR v.valid_to > %s)"


def fetch(sql: str, params: Sequence[Any]) -> list[tuple]:
    """All rows of one statement, logged and counted like every ORM query (``assertNumQueries``, query budgets)."""
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def db_time(t: datetime) -> Any:
    """A datetime parameter as the backend compares it (SQLite stores naive UTC text)."""
    return connection.ops.adapt_datetimefield_value(t)


def aware(v: datetime | None) -> datetime | None:
    """A datetime column's value, timezone-aware UTC (SQLite's converter gives naive UTC)."""
    if v is None or v.tzinfo is not None:
        return v
    return v.replace(tzinfo=UTC)


def time_value(v: datetime | str | None) -> datetime | None:
    """A datetime computed by SQL (MIN/MAX): SQLite returns it as text, with no declared type to convert it."""
    if isinstance(v, str):
        v = datetime.fromisoformat(v)
    return aware(v)


def load_json(v: Any) -> Any:
    """A JSON column's value decoded (both backends hand JSON over as text; SQL NULL stays None).

    orjson is strict JSON; what it refuses (NaN, integers past 64 bits) goes to the json module,
    which is what ``JSONField`` itself decodes with.
    """
    if not isinstance(v, (str, bytes)):
        return v
    try:
        return orjson.loads(v)
    except orjson.JSONDecodeError:
        return json.loads(v)


def in_list(values: Sequence[Any]) -> str:
    """``%s, %s, …`` for an IN list of len(values) (callers make sure it is not empty)."""
    return ", ".join(["%s"] * len(values))


def id_rows(ids: Sequence[int]) -> tuple[str, list[Any], str]:
    """A FROM item with one row per id (not empty): (its SQL, its parameters, its id column)."""
    if connection.vendor == "postgresql":
        return "unnest(%s::bigint[]) AS ids(id)", [list(ids)], "ids.id"
    return f"(VALUES {', '.join(['(%s)'] * len(ids))}) AS ids", list(ids), "ids.column1"


def any_of(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """SQL and parameters for "column is one of values" (not empty): on PostgreSQL one array parameter,
    so the statement's text (and its prepared plan) does not change with the number of values."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [list(values)]
    return f"{column} IN ({in_list(values)})", list(values)


_EV_VALID_FROM = EV_FIELDS.index("valid_from")
_EV_VALID_TO = EV_FIELDS.index("valid_to")
_EV_STATE = EV_FIELDS.index("state")


def version(row: Sequence[Any], start: int = 0) -> EntityVersion:
    """An EntityVersion from ``row[start:start + len(EV_FIELDS)]`` (columns of ``EV_SELECT``)."""
    values = list(row[start : start + len(EV_FIELDS)])
    values[_EV_VALID_FROM] = aware(values[_EV_VALID_FROM])
    values[_EV_VALID_TO] = aware(values[_EV_VALID_TO])
    values[_EV_STATE] = load_json(values[_EV_STATE])
    return EntityVersion.from_db(connection.alias, EV_FIELDS, values)


_E_FIRST, _E_LAST = ENTITY_FIELDS.index("first_seen"), ENTITY_FIELDS.index("last_seen")


def entity(row: Sequence[Any], start: int = 0) -> Entity:
    values = list(row[start : start + len(ENTITY_FIELDS)])
    values[_E_FIRST], values[_E_LAST] = aware(values[_E_FIRST]), aware(values[_E_LAST])
    return Entity.from_db(connection.alias, ENTITY_FIELDS, values)


_C_CREATED = CLUSTER_FIELDS.index("created")


def cluster(row: Sequence[Any], start: int = 0) -> Cluster:
    values = list(row[start : start + len(CLUSTER_FIELDS)])
    values[_C_CREATED] = aware(values[_C_CREATED])
    return Cluster.from_db(connection.alias, CLUSTER_FIELDS, values)


_CH_TIME, _CH_OLD, _CH_NEW = (CHANGE_FIELDS.index(f) for f in ("time", "old", "new"))


def change(row: Sequence[Any], start: int = 0) -> Change:
    values = list(row[start : start + len(CHANGE_FIELDS)])
    values[_CH_TIME] = aware(values[_CH_TIME])
    values[_CH_OLD], values[_CH_NEW] = load_json(values[_CH_OLD]), load_json(values[_CH_NEW])
    return Change.from_db(connection.alias, CHANGE_FIELDS, values)


_EVENT_TIMES = [EVENT_FIELDS.index("first_time"), EVENT_FIELDS.index("last_time")]


def event(row: Sequence[Any], start: int = 0) -> KubeEvent:
    values = list(row[start : start + len(EVENT_FIELDS)])
    for i in _EVENT_TIMES:
        values[i] = aware(values[i])
    return KubeEvent.from_db(connection.alias, EVENT_FIELDS, values)


_SR_TIME = SOURCE_RUN_FIELDS.index("time")


def source_run(row: Sequence[Any], start: int = 0) -> SourceRun:
    values = list(row[start : start + len(SOURCE_RUN_FIELDS)])
    values[_SR_TIME] = aware(values[_SR_TIME])
    return SourceRun.from_db(connection.alias, SOURCE_RUN_FIELDS, values)
