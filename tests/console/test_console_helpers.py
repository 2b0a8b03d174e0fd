from __future__ import annotations

import statistics

import pytest

from rcaweb.durations import format_age
from web.console.condition_line import one_line
from web.console.percentile import percentile


def test_it_summarizes_a_kube_scheduler_message_without_its_preemption_tail() -> None:
    msg = (
        "0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6 node(s) had untolerated taint "
        "{maintenance: true}. preemption: 0/8 nodes are available: 8 No preemption victims found."
    )
    assert one_line("Unschedulable", msg) == (
        "Unschedulable: 0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6 node(s) had untolerated taint "
        "{maintenance: true}"
    )


def test_it_does_not_repeat_a_reason_the_message_starts_with() -> None:
    assert one_line("OverLimit", "OverLimit: vision quota has reached the allowable limit of GPUs") == (
        "OverLimit: vision quota has reached the allowable limit of GPUs"
    )


def test_it_unwraps_kai_fit_errors_and_bounds_the_line() -> None:
    msg = "PodSchedulingErrors: Resources were not found for pod research/exp-7-0-gc2dw due to: no nodes with enough resources"
    assert (
        one_line("Unschedulable", msg) == "Unschedulable: PodSchedulingErrors: no nodes with enough resources"
    )
    assert len(one_line("X", "y" * 500)) == 140 and one_line("", "") == "no reason reported"


def test_percentile_matches_statistics_inclusive_quantiles() -> None:
    xs = [3.0, 1.0, 40.0, 7.0, 7.5, 100.0, 0.0]
    q = statistics.quantiles(xs, n=100, method="inclusive")
    assert [percentile(xs, p) for p in (10, 50, 90, 99)] == pytest.approx(
        [q[9], statistics.median(xs), q[89], q[98]]
    )
    assert percentile([], 50) is None and percentile([4.0], 99) == 4.0


def test_ages_read_in_minutes_hours_and_days() -> None:
    assert [format_age(s) for s in (59, 600, 3 * 3600 + 5 * 60 + 59, 50 * 3600)] == [
        "0m",
        "10m",
        "3h05m",
        "2d02h",
    ]
