"""Rows read with hand-written SQL, for the entity pages' hot queries (the reads of the tuned store).

An entity page runs six to ten small queries. Through the ORM most of their time is Python before the
database sees them (filter building, SQL compilation) and after (turning rows into model instances), not
the database's answer (``bench/model_rows.py``, ``bench/asof.py``). The statements here are written
once as text, with ``%s`` parameters for both backends, and their rows become model
instances (as ``Model.from_db`` builds them) after the same conversions the fields would apply
(:class:`Reader`, :func:`instance`).

Only what the SQL needs differs by backend: datetime parameters (:func:`db_time`), naive datetimes
read back from SQLite (:func:`aware`), and JSON text (:func:`load_json`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from django.db import DEFAULT_DB_ALIAS, connection, models
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from collectors.models import Change, Cluster, Entity, EntityVersion, KubeEvent, SourceRun

EV = EntityVersion._meta.db_table
ENTITY = Entity._meta.db_table
CLUSTER = Cluster._meta.db_table
CHANGE = Change._meta.db_table
EVENT = KubeEvent._meta.db_table
SOURCE_RUN = SourceRun._meta.db_table


class Reader:
    """The columns of a model's table under an alias (``select``), and rows of them as model instances.

    ``reader(row, start)`` turns ``row[start:start + width]`` into an instance after the conversions its
    fields would apply: every DateTimeField made aware, every JSONField decoded.
    """

    def __init__(self, model: type[models.Model], alias: str) -> None:
        fields = model._meta.concrete_fields
        self.model, self.width = model, len(fields)
        self.fields = [f.attname for f in fields]
        self.select = ", ".join(
            f"{alias}.{connection.ops.quote_name(f.column)}"  # type: ignore[arg-type]  # a concrete field has a column
            for f in fields
        )
        self._times = [i for i, f in enumerate(fields) if f.get_internal_type() == "DateTimeField"]
        self._jsons = [i for i, f in enumerate(fields) if f.get_internal_type() == "JSONField"]

    def __call__(self, row: Sequence[Any], start: int = 0) -> Any:
        values = list(row[start : start + self.width])
        for i in self._times:  # text where SQLite lost the column's type (a UNION arm of NULLs)
            values[i] = time_value(values[i])
        for i in self._jsons:
            values[i] = load_json(values[i])
        return instance(self.model, self.fields, values)


def instance(model: type[models.Model], attnames: Sequence[str], values: Sequence[Any]) -> Any:
    """``model.from_db(connection.alias, attnames, values)`` for values already converted, built directly.

    ``from_db`` runs ``Model.__init__``: a setattr per field through its descriptor, signals, and the
    connection proxy's thread-local lookup, for each row; a node page builds 60 such instances
    (``bench/model_rows.py`` measures the difference).
    What it leaves behind is the same: the field values in the instance's ``__dict__`` (fields not read
    stay deferred, loaded on access) and a ModelState saying the row came from the default database.
    A model with pre/post_init receivers (none here today) still goes through ``from_db``.
    """
    if pre_init.has_listeners(model) or post_init.has_listeners(model):
        return model.from_db(DEFAULT_DB_ALIAS, list(attnames), list(values))
    obj = model.__new__(model)
    obj.__dict__.update(zip(attnames, values, strict=True))
    state = obj._state = ModelState()
    state.adding, state.db = False, DEFAULT_DB_ALIAS
    return obj


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


def valid_at(arm: str) -> str:
    """The versions valid at t, as two ranges of an index ending in (valid_to, valid_from).

    ``arm`` selects from EntityVersion ``v`` with ``VALID_TO`` in its WHERE where the end condition goes
    (and ``v.valid_from <= %s`` after it). The result is the open versions, UNION ALL the closed ones ending
    after t; the second arm takes one more parameter, t, at the marker. One condition "valid_to IS NULL OR
    valid_to > t" cannot bound an index range: both backends then read every version started by t from
    the table, the history before t, which keeps growing.
    """
    return f"{arm.replace('VALID_TO', 'v.valid_to IS NULL')}\nUNION ALL{arm.replace('VALID_TO', 'v.valid_to > %s')}"


def id_rows(ids: Sequence[int]) -> tuple[str, list[Any], str]:
    """A FROM item with one row per id (not empty): (its SQL, its parameters, its id column)."""
    return f"(VALUES {', '.join(['(%s)'] * len(ids))}) AS ids", list(ids), "ids.column1"


version = Reader(EntityVersion, "v")
entity = Reader(Entity, "e")
cluster = Reader(Cluster, "c")
change = Reader(Change, "ch")
event = Reader(KubeEvent, "ev")
source_run = Reader(SourceRun, "sr")
EV_SELECT, ENTITY_SELECT, CLUSTER_SELECT = version.select, entity.select, cluster.select
CHANGE_SELECT, EVENT_SELECT, SOURCE_RUN_SELECT = change.select, event.select, source_run.select
