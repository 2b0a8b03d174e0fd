"""rcaweb.timestamps: the one module that reads times written as text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from rcaweb.timestamps import TimestampError, parse_rfc3339, parse_timestamp, timestamp_or_none


def test_rfc3339_keeps_the_offset_and_cuts_nanoseconds_to_microseconds():
    t = parse_rfc3339("2023-03-25T14:41:06.68943305+08:00")
    assert t == datetime(2023, 3, 25, 14, 41, 6, 689433, tzinfo=timezone(timedelta(hours=8)))
    assert parse_rfc3339("2026-11-29t03:12:00z") == datetime(2026, 11, 29, 3, 12, tzinfo=UTC)
    assert parse_rfc3339("0001-01-01T00:00:00Z").year == 1  # Go's zero time, as written


@pytest.mark.parametrize(
    "text, message",
    [
        ("2026-11-29", "'2026-11-29' is not an RFC 3339 time such as 2026-11-29T03:12:00Z"),
        ("2026-11-29T03:12:00", "is not an RFC 3339 time"),  # no zone
        ("2026-02-30T03:12:00Z", "'2026-02-30T03:12:00Z' is not a valid date/time"),
        ("2026-11-29T03:12:00.1234567890Z", "is not an RFC 3339 time"),  # past nanoseconds
    ],
)
def test_rfc3339_names_the_bad_value(text, message):
    with pytest.raises(TimestampError, match=message):
        parse_rfc3339(text)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29T03:12:07Z",
        "2026-11-29T03:12:07+00:00",
        "2026-11-29T04:12:07+01:00",
        "2026-11-29T03:12:07.000000001Z",
    ],
)
def test_timestamps_in_the_forms_rcaweb_and_its_sources_write(text):
    assert parse_timestamp(text) == datetime(2026, 11, 29, 3, 12, 7, tzinfo=UTC)


def test_a_timestamp_needs_a_zone_and_the_error_names_the_value():
    with pytest.raises(TimestampError, match="'2026-11-29T03:12:07' has no time zone"):
        parse_timestamp("2026-11-29T03:12:07")
    with pytest.raises(TimestampError, match="'yesterday' is not a time"):
        parse_timestamp("yesterday")
    with pytest.raises(ValueError, match="'7' is not a time"):
        parse_timestamp(7)  # type: ignore[arg-type]  # a caller's bad input, typed wrong on purpose


def test_times_in_states_are_read_leniently():
    when = datetime(2026, 11, 29, 3, 12, tzinfo=UTC)
    assert timestamp_or_none("2026-11-29T03:12:00Z") == when
    assert timestamp_or_none("2026-11-29T03:12:00.123456789Z") == when.replace(microsecond=123456)
    assert timestamp_or_none(when) is when
    assert timestamp_or_none("2026-11-29T03:12:00") == datetime(2026, 11, 29, 3, 12)  # naive, as written
    for bad in (None, "", "soon", 5, ["2026-11-29T03:12:00Z"]):
        assert timestamp_or_none(bad) is None


def test_the_one_formatter_writes_utc_seconds_with_z_and_takes_naive_as_utc() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from rcaweb.timestamps import format_t, format_t_or_none

    paris = timezone(timedelta(hours=1))
    assert format_t(datetime(2026, 11, 29, 4, 12, 7, 999999, tzinfo=paris)) == "2026-11-29T03:12:07Z"
    assert format_t(datetime(2026, 11, 29, 3, 12, 7)) == "2026-11-29T03:12:07Z"
    assert format_t_or_none(None) is None
    assert format_t_or_none(datetime(2026, 11, 29, tzinfo=UTC)) == "2026-11-29T00:00:00Z"
