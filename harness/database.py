"""The database the driver shares with its web server's threads: a file or a server, never in memory; SQLite
set up for a demo served while it sweeps, or for a throw-away scenario run."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import OperationalError, connections
from django.db.backends.signals import connection_created

logger = logging.getLogger(__name__)


def refuse_in_memory_database() -> None:
    """The webhook's request threads open their own connections: an in-memory SQLite database is invisible to
    them (or, shared-cache, fails with "table is locked"). Say so rather than lose every alert."""
    for conn in connections.all():
        if conn.vendor == "sqlite" and conn.is_in_memory_db():  # type: ignore[attr-defined]  # sqlite's own
            raise ImproperlyConfigured(
                f"database {conn.alias!r} is an in-memory SQLite database, which the webhook's server threads "
                "cannot share: use a file (run_scenario's default --database temp does)"
            )


def sqlite_wal() -> None:
    """SQLite in WAL mode: pages read while sweeps write.

    Only for the process that calls it (every connection it opens; the demo's); PostgreSQL is left alone.
    The settings' own SQLite options ask for WAL too (``rcaweb.settings.SQLITE_OPTIONS``); this covers a
    database configured without them. Sync stays FULL: the webhook answers 200 only once its alerts are on
    disk (docs/intake.md).
    """

    def pragmas(sender: Any, connection: Any, **kwargs: Any) -> None:
        if connection.vendor != "sqlite" or connection.in_atomic_block:
            return  # (inside a transaction SQLite refuses; tests run there)
        try:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA journal_mode=WAL")
        except OperationalError as exc:
            logger.info("sqlite pragmas not applied: %s", exc)

    connection_created.connect(pragmas, weak=False, dispatch_uid="rcaweb-demo-sqlite")
    for conn in connections.all():
        if conn.vendor == "sqlite" and conn.connection is not None:
            pragmas(None, conn)


def use_temp_database() -> str:
    """Point the default database at a new temporary SQLite file and migrate it; returns the directory."""
    tmp = tempfile.mkdtemp(prefix="rcaweb-scenario-")
    connections.close_all()
    db = connections.settings["default"]
    db.update(
        {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(Path(tmp) / "scenario.sqlite3"),
            # IMMEDIATE: the inline worker and the sweeps queue for SQLite's one writer instead of failing
            # with "database is locked" when a read transaction would upgrade (rcaweb.settings.SQLITE_OPTIONS).
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    )
    for key in ("HOST", "PORT", "USER", "PASSWORD"):
        db[key] = ""
    # A connection object created before the switch keeps its own copy of the settings: drop it.
    with contextlib.suppress(AttributeError, KeyError):
        del connections["default"]
    connection_created.connect(_throwaway_sqlite, dispatch_uid="rcaweb-run-scenario-sqlite")
    call_command("migrate", verbosity=0, interactive=False)
    return tmp


def _throwaway_sqlite(sender: Any, connection: Any, **kwargs: Any) -> None:
    """A throw-away database needs no durability: no fsync on every commit."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cur:
            cur.execute("PRAGMA synchronous=OFF")
            cur.execute("PRAGMA journal_mode=MEMORY")
