from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from hypothesis import given
from hypothesis import strategies as st

from rcaweb.cursor import Cursor, CursorError, format_t, parse_t
from rcaweb.durations import format_duration, parse_duration


def test_it_parses_utc_times_with_z_and_offset():
    assert parse_t("2026-11-29T03:12:00Z") == datetime(2026, 11, 29, 3, 12, tzinfo=UTC)
    assert parse_t("2026-11-29T03:12:00+00:00") == datetime(2026, 11, 29, 3, 12, tzinfo=UTC)
    assert parse_t("2026-11-29T03:12Z") == datetime(2026, 11, 29, 3, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    "bad", ["yesterday", "2026-11-29", "2026-11-29T03:12:00", "2026-11-29T03:12:00+02:00", "2026-13-01T00:00:00Z", "x" * 500, "1999-01-01T00:00:00Z"]
)
def test_it_rejects_malformed_t_with_the_expected_format(bad):
    with pytest.raises(CursorError, match="2026-11-29T03:12:00Z"):
        parse_t(bad)


@pytest.mark.parametrize("bad", ["0m", "2x", "", "40d", "h"])
def test_it_rejects_bad_windows(bad):
    with pytest.raises(CursorError):
        Cursor.from_params("2026-11-29T03:12:00Z", bad or "nonsense")


def test_it_reads_back_durations():
    assert parse_duration("1h30m") == timedelta(hours=1, minutes=30)
    assert format_duration(timedelta(hours=1, minutes=30)) == "1h30m"


@given(st.integers(min_value=1, max_value=30 * 86400))
def test_format_duration_round_trips(seconds):
    d = timedelta(seconds=seconds)
    assert parse_duration(format_duration(d)) == d


def test_it_is_live_without_t():
    with time_machine.travel(datetime(2026, 11, 29, 3, 12, 7, 500000, tzinfo=UTC), tick=False):
        cur = Cursor.from_params(None, None)
        assert cur.live
        assert cur.t == datetime(2026, 11, 29, 3, 12, 7, tzinfo=UTC)
        assert cur.link("/c/x/nodes/n1/") == "/c/x/nodes/n1/"


def test_it_links_carry_only_t_and_w():
    cur = Cursor.from_params("2026-11-29T03:12:00Z", "30m")
    assert cur.link("/c/x/jobs/?queue=a&t=2020-01-01T00:00:00Z") == "/c/x/jobs/?queue=a&t=2026-11-29T03%3A12%3A00Z&w=30m"
    assert format_t(cur.shifted(timedelta(minutes=-10)).t) == "2026-11-29T03:02:00Z"
    assert cur.start == datetime(2026, 11, 29, 2, 42, tzinfo=UTC)


@given(
    st.one_of(st.none(), st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))),
    st.integers(min_value=1, max_value=30 * 86400),
    st.booleans(),
)
def test_its_written_out_query_is_what_urlencode_makes(at, seconds, window_given):
    from urllib.parse import urlencode

    cur = Cursor(at=at, window=timedelta(seconds=seconds), window_given=window_given)
    assert cur.query() == urlencode(cur.params())
