"""Faster reading of PostgreSQL ``timestamptz`` values, as Django would read them.

Django (5.2, psycopg 3) reads every timestamptz through its own loader, a Python subclass of psycopg's
pure-Python ``TimestamptzLoader``: a regular expression and a dozen Python steps per value. psycopg's C
loader is not used because Django subclasses the Python class, and the C class cannot be subclassed. An
entity page reads 100-350 such values (every version's valid_from/valid_to, every change's time).

:class:`IsoTzLoader` parses PostgreSQL's ISO output (``2026-11-29 03:12:07.5+00``, the DateStyle Django
leaves) with ``datetime.fromisoformat`` (C) and gives the value Django's loader gives: the same instant, in the
session's time zone, with Django's tzinfo. Anything else (another DateStyle, BC dates, infinity) goes to Django's own loader, errors included.
"""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any

from django.db.backends.signals import connection_created


def install(**kwargs: Any) -> None:
    """``connection_created`` receiver: a new PostgreSQL connection reads timestamptz with :class:`IsoTzLoader`."""
    connection = kwargs["connection"]
    if connection.vendor != "postgresql":
        return
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if not is_psycopg3:
        return
    connection.connection.adapters.register_loader("timestamptz", iso_tz_loader(connection.timezone))


def iso_tz_loader(tz: tzinfo | None) -> type:
    """A loader class for ``tz`` (Django's connection time zone; ``timezone`` is what Django checks before it
    registers its own loader on a cursor, so the two must agree)."""
    from django.db.backends.postgresql.psycopg_any import BaseTzLoader

    class IsoTzLoader(BaseTzLoader):
        timezone = tz

        def load(self, data: Any) -> datetime:
            try:
                # as psycopg's loader: the instant, in the session's time zone; then Django's: its zone set
                return (
                    datetime.fromisoformat(bytes(data).decode()).astimezone(self._timezone).replace(tzinfo=tz)
                )
            except (ValueError, OverflowError):
                return super().load(data)

    return IsoTzLoader


def connect() -> None:
    connection_created.connect(install, dispatch_uid="rcaweb.timestamptz_loader")
