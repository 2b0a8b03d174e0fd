"""The evaluator of the PromQL subset over the DCGM exporter's series, at one time or step by step over a
range (``RangeReader`` reads each selector's series once for the whole range)."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import Any

from simulator.prometheus.promql import (
    Aggregation,
    Comparison,
    Expr,
    Number,
    RangeFunction,
    Selector,
    Time,
)
from simulator.prometheus.series import LOOKBACK_S, DcgmSource, Key, Points, Sample


class RangeReader:
    """What ``evaluate`` reads at each step of one range query, each selector's series read once for the range.

    The world is asked for every selector's samples over the whole range before the first step (each
    sample once, as Prometheus reads a series' chunks once for a range query); each step's ``select``
    then slices them. It answers each step exactly as ``DcgmSource.select`` would: the same samples of
    the same series, in the same order (within a GPU, the order the window first sees each label set).
    """

    def __init__(self, source: DcgmSource, expr: Expr, start: float, end: float) -> None:
        self.source = source
        self.read: dict[Selector, list[list[tuple[Key, list[float], Points]]]] = {}
        for selector, window in _selectors(expr).items():
            times = source.sample_times(start - selector.offset_s - window, end - selector.offset_s)
            self.read[selector] = [
                [(key, [t for t, _ in points], points) for key, points in group]
                for group in source.select_groups(selector, times)
            ]

    def by_series(self, expr: Expr, times: list[float]) -> dict[Key, list[list[Any]]] | None:
        """A range query of one metric's selector or of a range function over one, at each of ``times``, series
        by series: each series' window is found by bisection at every step, no step builds the vector of the
        whole fleet. The same answer as ``evaluate_keyed`` step by step (each series' points, its labels, the
        same value computed from the same samples in the same order); None for any other expression (an
        aggregation sums in the vector's order, a selector without a metric name may repeat a label set)."""
        if isinstance(expr, RangeFunction):
            selector, window, name = expr.selector, float(expr.range_s), expr.name
        elif isinstance(expr, Selector):
            selector, window, name = expr, float(LOOKBACK_S), ""
        else:
            return None
        if not selector.metric:
            return None
        windows: list[
            tuple[Any, float, float, float]
        ] = []  # (timestamp, first and last scrape, window start)
        for t in times:
            at = t - selector.offset_s
            scrapes = self.source.sample_times(at - window, at)
            if not name:  # an instant selector: the last scrape only (a series not in it is stale)
                scrapes = scrapes[-1:]
            if scrapes:
                windows.append((format_ts(t), scrapes[0], scrapes[-1], at))
        keep_name = name == "last_over_time"
        out: dict[Key, list[list[Any]]] = {}
        for group in self.read[selector]:
            for key, stamps, points in group:
                values = [v for _, v in points]
                answered: list[list[Any]] = []
                for ts, lo, hi, at in windows:
                    i, j = bisect_left(stamps, lo), bisect_right(stamps, hi)
                    if i >= j:
                        continue
                    if name:
                        value = over_time(name, points[i:j], values[i:j], at - window, at)
                        if value is None:
                            continue
                    else:
                        value = values[j - 1]
                    answered.append([ts, format_value(value)])
                if answered:
                    labels = key if keep_name or not name else tuple(p for p in key if p[0] != "__name__")
                    out[labels] = answered
        return out

    def select(
        self, selector: Selector, start: float, end: float, last_only: bool = False
    ) -> dict[tuple, Points]:
        times = self.source.sample_times(start, end)
        if last_only:
            times = times[-1:]
        out: dict[tuple, Points] = {}
        if not times:
            return out
        lo, hi = times[0], times[-1]
        for group in self.read[selector]:
            present = []
            for key, stamps, points in group:
                i, j = bisect_left(stamps, lo), bisect_right(stamps, hi)
                if i < j:
                    present.append((stamps[i], key, points[i:j]))
            if len(present) > 1:
                present.sort(key=lambda p: p[0])
            for _, key, points in present:
                out[key] = points
        return out


def _selectors(expr: Expr) -> dict[Selector, float]:
    """Each selector of an expression with the window one evaluation reads before its time (the widest)."""
    found: dict[Selector, float] = {}

    def walk(e: Expr) -> None:
        if isinstance(e, Selector):
            found[e] = max(found.get(e, 0.0), LOOKBACK_S)
        elif isinstance(e, RangeFunction):
            found[e.selector] = max(found.get(e.selector, 0.0), float(e.range_s))
        elif isinstance(e, Aggregation | Comparison):
            walk(e.expr)

    walk(expr)
    return found


def evaluate(source: DcgmSource | RangeReader, expr: Expr, t: float) -> list[Sample] | float:
    """An instant vector (list of (labels, value)) or a scalar, at time t."""
    result = evaluate_keyed(source, expr, t)
    if isinstance(result, float):
        return result
    return [(dict(key), v) for key, v in result]


def evaluate_keyed(source: DcgmSource | RangeReader, expr: Expr, t: float) -> list[tuple[Key, float]] | float:
    """``evaluate`` with each series' labels as their sorted (name, value) pairs: the order Prometheus sorts a
    result in and the key a range query collects its steps by, so neither rebuilds and sorts a label dict
    per series and step."""
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Time):
        return float(t)
    if isinstance(expr, Selector):
        at = t - expr.offset_s
        series = source.select(expr, at - LOOKBACK_S, at, last_only=True)
        return [(k, pts[-1][1]) for k, pts in series.items() if pts]
    if isinstance(expr, RangeFunction):
        at = t - expr.selector.offset_s
        name = expr.name
        if name == "last_over_time" and isinstance(source, DcgmSource):
            series = source.select(expr.selector, at - expr.range_s, at, last_per_series=True)
        else:
            series = source.select(expr.selector, at - expr.range_s, at)
        out: list[tuple[Key, float]] = []
        # Prometheus keeps the metric name of last_over_time only (it returns a sample, not a new value)
        keep_name = name == "last_over_time"
        for key, pts in series.items():
            if not pts:
                continue
            labels = key if keep_name else tuple(p for p in key if p[0] != "__name__")
            if keep_name:  # one sample a series when read from the source (last_per_series)
                value: float | None = pts[-1][1]
            else:
                value = over_time(name, pts, [v for _, v in pts], at - expr.range_s, at)
            if value is not None:
                out.append((labels, value))
        return out
    if isinstance(expr, Aggregation):
        inner = evaluate_keyed(source, expr.expr, t)
        if isinstance(inner, float):
            raise ValueError("expected an instant vector in aggregation, got a scalar")
        groups: dict[Key, list[float]] = defaultdict(list)
        for key, value in inner:
            named = dict(key)
            groups[tuple(sorted((n, named[n]) for n in set(expr.by) if named.get(n)))].append(value)
        result = []
        for group, values in groups.items():
            agg = {
                "sum": sum(values),
                "avg": sum(values) / len(values),
                "max": max(values),
                "min": min(values),
                "count": float(len(values)),
            }[expr.op]
            result.append((group, agg))
        return result
    if isinstance(expr, Comparison):
        inner = evaluate_keyed(source, expr.expr, t)
        if isinstance(inner, float):
            raise ValueError(
                "comparison between two scalars needs the bool modifier, which the subset does not support"
            )
        op = {
            ">": float.__gt__,
            "<": float.__lt__,
            ">=": float.__ge__,
            "<=": float.__le__,
            "==": float.__eq__,
            "!=": float.__ne__,
        }[expr.op]
        bound = float(t) if isinstance(expr.value, Time) else expr.value.value
        return [(key, v) for key, v in inner if op(float(v), bound)]
    raise TypeError(expr)


def over_time(name: str, pts: Points, values: list[float], start: float, end: float) -> float | None:
    """A range function over one series' samples in the window (start, end] (``values``: theirs, in order);
    None where Prometheus gives no sample (a rate of fewer than two)."""
    if name == "avg_over_time":
        return sum(values) / len(values)
    if name == "max_over_time":
        return max(values)
    if name == "min_over_time":
        return min(values)
    if name == "count_over_time":
        return float(len(values))
    if name in ("rate", "increase"):
        return extrapolated_rate(pts, start, end, is_rate=name == "rate")
    return values[-1]  # last_over_time


def extrapolated_rate(
    points: list[tuple[float, float]], range_start: float, range_end: float, *, is_rate: bool
) -> float | None:
    """rate()/increase() of a counter as Prometheus computes them (promql/functions.go extrapolatedRate).

    The increase between the first and last sample of the window, counter resets added back, then
    extrapolated towards the window's edges: all the way when the gap to an edge is under 1.1 times the
    average sample interval, else by half an interval; never below zero (a counter starts at 0). Fewer
    than two samples: no result.
    """
    if len(points) < 2:
        return None
    (first_t, first_v), (last_t, last_v) = points[0], points[-1]
    result = last_v - first_v
    prev = first_v
    for _, v in points[1:]:
        if v < prev:  # a counter reset: the value before it counted too
            result += prev
        prev = v
    sampled = last_t - first_t
    to_start, to_end = first_t - range_start, range_end - last_t
    average = sampled / (len(points) - 1)
    if result > 0 and first_v >= 0:
        to_zero = sampled * (first_v / result)
        to_start = min(to_start, to_zero)
    threshold = average * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    result *= interval / sampled
    if is_rate:
        result /= range_end - range_start
    return result


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def format_ts(t: float) -> float | int:
    return int(t) if float(t).is_integer() else round(t, 3)
