"""One module parses and writes the simulator's durations: Prometheus' syntax exactly, the scenario's own."""

from __future__ import annotations

import pytest

from simulator import durations
from simulator.prometheus.promql import PromQLError, parse, parse_duration
from simulator.scenario import parse_duration as scenario_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1d", 86400.0),
        ("2w", 14 * 86400.0),
        ("1y", 365 * 86400.0),
        ("500ms", 0.5),
        ("1m30s500ms", 90.5),
        ("1y1w1d1h1m1s1ms", 365 * 86400 + 7 * 86400 + 86400 + 3600 + 60 + 1.001),
    ],
)
def test_prometheus_durations_read_as_prometheus_reads_them(text: str, seconds: float) -> None:
    assert durations.prometheus_seconds(text) == pytest.approx(seconds)
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "1.5h", "30m1h", "1h1h", "ms", "1H", " 5m", "-5m", "5mm"])
def test_what_prometheus_refuses_is_refused(text: str) -> None:
    assert durations.prometheus_seconds(text) is None
    with pytest.raises(PromQLError, match="bad duration"):
        parse_duration(text)


def test_a_range_selector_keeps_milliseconds() -> None:
    expr = parse("rate(DCGM_FI_DEV_XID_ERRORS[1500ms])")
    assert getattr(expr, "range_s", None) == 1.5


def test_scenario_durations_are_whole_seconds_in_days_hours_minutes_seconds() -> None:
    assert scenario_duration("1d2h3m4s") == 93784
    assert scenario_duration(" 90s ") == 90
    assert scenario_duration("1w") is None and scenario_duration("500ms") is None
    assert scenario_duration("") is None and scenario_duration("5") is None


@pytest.mark.parametrize(
    ("seconds", "go", "compact"),
    [
        (0, "0s", "0s"),
        (10, "10s", "10s"),
        (160, "2m40s", "2m40s"),
        (300, "5m0s", "5m"),
        (5400, "1h30m0s", "1h30m"),
    ],
)
def test_written_forms(seconds: int, go: str, compact: str) -> None:
    assert durations.go(seconds) == go
    assert durations.compact(seconds) == compact
