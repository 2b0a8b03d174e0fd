"""rcaweb.timestamptz_loader reads a timestamptz exactly as Django's own loader does, only faster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

psycopg = pytest.importorskip("psycopg")

from django.db.backends.postgresql.psycopg_any import BaseTzLoader  # noqa: E402
from psycopg.postgres import types  # noqa: E402

from rcaweb.timestamptz_loader import iso_tz_loader  # noqa: E402

OID = types["timestamptz"].oid


def loaders(tz):
    class Django(BaseTzLoader):
        timezone = tz

    return Django(OID, None), iso_tz_loader(tz)(OID, None)


def both(tz, text: bytes):
    out = []
    for loader in loaders(tz):
        try:
            out.append(("value", loader.load(text)))
        except Exception as e:  # noqa: BLE001 - the same error is part of the contract
            out.append(("error", type(e).__name__))
    return out


@given(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.integers(min_value=-15 * 3600, max_value=15 * 3600).map(lambda s: s - s % 60),
    st.sampled_from([0, 1, 3, 6]),
    st.sampled_from([UTC, None, timezone(timedelta(hours=2))]),
)
def test_it_reads_what_django_reads(when, offset, digits, tz):
    sign = "+" if offset >= 0 else "-"
    hh, mm = divmod(abs(offset) // 60, 60)
    frac = f".{when.microsecond:06d}"[: digits + 1] if digits else ""
    text = f"{when:%Y-%m-%d %H:%M:%S}{frac}{sign}{hh:02d}" + (f":{mm:02d}" if mm else "")
    django, ours = both(tz, text.encode())
    assert ours == django
    if ours[0] == "value":
        assert ours[1].tzinfo is django[1].tzinfo


@pytest.mark.parametrize(
    "text", [b"infinity", b"-infinity", b"0099-01-01 00:00:00+00 BC", b"nonsense", b"9999-12-31 23:59:59-10"]
)
def test_what_it_cannot_parse_goes_to_djangos_loader(text):
    django, ours = both(UTC, text)
    assert ours == django


@pytest.mark.django_db
def test_it_is_installed_on_every_new_connection():
    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("the loader is PostgreSQL's (DATABASE_URL=postgres://…; .ci/run runs the suite there too)")
    from psycopg.pq import Format

    other = connections.create_connection("default")
    try:
        other.ensure_connection()  # a new connection: connection_created installs the loader
        for conn in (connection, other):
            conn.ensure_connection()
            assert conn.connection.adapters.get_loader(OID, Format.TEXT).__name__ == "IsoTzLoader"
            with conn.cursor() as cur:  # and Django does not put its own back on a cursor
                assert cur.cursor.adapters.get_loader(OID, Format.TEXT).__name__ == "IsoTzLoader"
                cur.execute("SELECT '2026-11-29 03:12:07.5+00'::timestamptz")
                assert cur.fetchone()[0] == datetime(2026, 11, 29, 3, 12, 7, 500000, tzinfo=UTC)
    finally:
        other.close()
