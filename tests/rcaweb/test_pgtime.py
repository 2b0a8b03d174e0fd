"""rcaweb.pgtime reads a timestamptz exactly as Django's own loader does, only faster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

psycopg = pytest.importorskip("psycopg")

from django.db.backends.postgresql.psycopg_any import BaseTzLoader  # noqa: E402
from psycopg.postgres import types  # noqa: E402

from rcaweb.pgtime import iso_tz_loader  # noqa: E402

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
