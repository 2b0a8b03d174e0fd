"""Plotly figures as plain dicts, from samples and the cursor (pure: no queries, no Django).

Every figure draws the cursor as a vertical line shape named ``cursor``, and puts changes,
alerts and GPU error events as clickable markers on a hidden second y axis (0..1), so
``static/js/charts.js`` can move the cursor to any of them. Times are written as naive UTC
strings (``2026-11-29 03:12:00``): plotly.js has no time zones, and each title says "(UTC)".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

CURSOR_COLOR = "#c0392b"
# Eight colours told apart at a glance (a node's eight GPUs), none the cursor's red.
PALETTE = ["#2f5fa7", "#2e7d4f", "#b7791f", "#8a6fbf", "#16a085", "#d35400", "#5d6d7e", "#c2185b"]
MARKER_ROWS = {
    "change": (0.96, "diamond", "#6b7385"),
    "alert": (0.9, "triangle-down", "#c0392b"),
    "xid": (0.84, "x", "#8e44ad"),
    "ecc": (0.84, "x-thin", "#d35400"),
}


@dataclass
class Series:
    """One line: ``points`` are (time, value); ``step`` draws it as a step function (inventory counts)."""

    name: str
    points: Sequence[tuple[datetime, float | None]]
    step: bool = False
    dash: str = ""
    color: str = ""
    group: str = ""  # legend group: one legend entry per group (a GPU), its other lines share the colour
    legend: bool = True


@dataclass
class Marker:
    """Something that happened at a moment: a change, an alert, an Xid or ECC event."""

    time: datetime
    kind: str  # change | alert | xid | ecc
    text: str
    extra: dict[str, Any] = field(default_factory=dict)


def px(value: datetime) -> str:
    """Plotly's date string for a UTC datetime (naive, seconds precision)."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def cursor_shape(t: datetime) -> dict[str, Any]:
    return {
        "type": "line",
        "name": "cursor",
        "xref": "x",
        "yref": "paper",
        "x0": px(t),
        "x1": px(t),
        "y0": 0,
        "y1": 1,
        "line": {"color": CURSOR_COLOR, "width": 2, "dash": "dot"},
    }


def base_layout(
    title: str,
    start: datetime,
    end: datetime,
    cursor_t: datetime,
    y_title: str = "",
    y_range: Sequence[float] | None = None,
    *,
    from_zero: bool = False,
) -> dict[str, Any]:
    yaxis: dict[str, Any] = {"title": {"text": y_title}, "zeroline": False, "gridcolor": "#eceff4"}
    if y_range is not None:
        yaxis["range"] = list(y_range)
    elif from_zero:
        yaxis["rangemode"] = "tozero"  # counts and allocations: a bar from 7 to 8 must not look like 0 to 8
    lo, hi = min(start, cursor_t), max(end, cursor_t)
    return {
        "title": {
            "text": f"{title} <span style='font-size:10px;color:#6b7385'>(UTC)</span>",
            "font": {"size": 13},
            "x": 0.01,
            "xanchor": "left",
        },
        "height": 270,
        "margin": {"l": 50, "r": 12, "t": 30, "b": 20},
        "xaxis": {
            "type": "date",
            "range": [px(lo), px(hi)],
            "gridcolor": "#eceff4",
            "hoverformat": "%H:%M:%S UTC",
        },
        "yaxis": yaxis,
        "yaxis2": {"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True},
        "shapes": [cursor_shape(cursor_t)],
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top", "font": {"size": 10}},
        "hovermode": "x",  # a click anywhere in the plot picks the points at that time
        "clickmode": "event",
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "font": {"family": "system-ui, sans-serif", "size": 11},
    }


def series_trace(s: Series, i: int) -> dict[str, Any]:
    trace: dict[str, Any] = {
        "type": "scatter",
        "mode": "lines",
        "name": s.name,
        "x": [px(t) for t, _ in s.points],
        "y": [v for _, v in s.points],
        "line": {"width": 1.6, "color": s.color or PALETTE[i % len(PALETTE)]},
        "connectgaps": False,
        "hovertemplate": "%{x}Z<br>%{y}<extra>" + s.name.replace("%", "%%") + "</extra>",
    }
    if s.step:
        trace["line"]["shape"] = "hv"
    if s.dash:
        trace["line"]["dash"] = s.dash
    if s.group:
        trace["legendgroup"] = s.group
    if not s.legend:
        trace["showlegend"] = False
    return trace


def marker_traces(markers: Iterable[Marker]) -> list[dict[str, Any]]:
    """One trace per marker kind, on the hidden y2 axis, hover text naming what happened."""
    by_kind: dict[str, list[Marker]] = {}
    for m in markers:
        by_kind.setdefault(m.kind, []).append(m)
    out = []
    names = {"change": "changes", "alert": "alerts", "xid": "Xid errors", "ecc": "ECC errors"}
    for kind, ms in by_kind.items():
        y, symbol, color = MARKER_ROWS.get(kind, (0.78, "circle", "#6b7385"))
        out.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": names.get(kind, kind),
                "yaxis": "y2",
                "x": [px(m.time) for m in ms],
                "y": [y] * len(ms),
                "text": [m.text for m in ms],
                "marker": {"symbol": symbol, "size": 9, "color": color},
                "hovertemplate": "%{x}Z<br>%{text}<extra></extra>",
            }
        )
    return out


def line_figure(
    title: str,
    series: Sequence[Series],
    *,
    start: datetime,
    end: datetime,
    cursor_t: datetime,
    y_title: str = "",
    markers: Iterable[Marker] = (),
    y_range: Sequence[float] | None = None,
    from_zero: bool = False,
    min_span: float = 0.0,
) -> dict[str, Any]:
    """A time chart: lines (or steps), the cursor line, and event markers.

    Only what falls inside the drawn range is drawn: a marker before the window is dropped, never pinned
    to its edge. ``from_zero`` starts the y axis at zero (counts, allocations); ``min_span`` keeps the axis
    at least that tall around the data, so noise of a fraction of a unit does not fill the chart.
    """
    lo, hi = min(start, cursor_t), max(end, cursor_t)
    inside = [m for m in markers if lo <= m.time <= hi]
    data = [series_trace(s, i) for i, s in enumerate(series)] + marker_traces(inside)
    if y_range is None and min_span > 0:
        y_range = spanned_range(series, min_span, from_zero=from_zero)
    layout = base_layout(title, start, end, cursor_t, y_title, y_range, from_zero=from_zero)
    entries = sum(1 for s in series if s.legend) + len({m.kind for m in inside})
    if entries > 6:  # a horizontal legend wraps at about six entries: grow the chart, never hide one
        layout["height"] += 18 * ((entries - 1) // 6)
    return {"data": data, "layout": layout}


def spanned_range(series: Sequence[Series], min_span: float, *, from_zero: bool = False) -> list[float] | None:
    """A y range around the data at least ``min_span`` tall (centred on it; never below zero when the
    quantity cannot be negative), or None for no data (plotly's autorange)."""
    values = [v for s in series for _, v in s.points if v is not None]
    if not values:
        return None
    lo, hi = min(values), max(values)
    if from_zero:
        lo = min(lo, 0.0)
    if hi - lo >= min_span:
        pad = (hi - lo) * 0.05
        return [lo - pad if not from_zero else lo, hi + pad]
    mid = (lo + hi) / 2
    a, b = mid - min_span / 2, mid + min_span / 2
    if min(values) >= 0 and a < 0:  # a non-negative quantity: shift up rather than show negative values
        a, b = 0.0, min_span
    return [round(a, 3), round(b, 3)]


#
# The named charts of entity and fleet pages
#

METRIC_CHARTS: dict[str, tuple[str, str, tuple[str, ...], float, Sequence[float] | None]] = {
    # name: (title, y title, DCGM metrics, scale, y range); the y axis of the others: METRIC_AXES
    "utilization": (
        "GPU utilization / SM activity",
        "%",
        ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE"),
        1.0,
        (0, 105),
    ),
    "memory": ("GPU memory used", "MiB", ("DCGM_FI_DEV_FB_USED",), 1.0, None),
    "power": ("Power", "W", ("DCGM_FI_DEV_POWER_USAGE",), 1.0, None),
    "temperature": ("Temperature", "°C", ("DCGM_FI_DEV_GPU_TEMP",), 1.0, None),
}
METRIC_LABELS = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU util",
    "DCGM_FI_PROF_SM_ACTIVE": "SM active",
    "DCGM_FI_DEV_FB_USED": "memory used",
    "DCGM_FI_DEV_POWER_USAGE": "power",
    "DCGM_FI_DEV_GPU_TEMP": "temperature",
}
# name: (from zero, minimum span): memory and power are quantities read from zero; a temperature axis is
# at least 20 °C tall, so a 0.2 °C wobble stays a flat line.
METRIC_AXES: dict[str, tuple[bool, float]] = {
    "memory": (True, 1024.0),
    "power": (True, 50.0),
    "temperature": (False, 20.0),
}
ERROR_METRICS = ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")


def metric_value(metric: str, value: float) -> float:
    """SM activity is a 0..1 ratio in DCGM; the utilization chart shows both it and GPU util in percent."""
    return round(value * 100.0, 2) if metric == "DCGM_FI_PROF_SM_ACTIVE" else round(value, 2)


def error_markers(samples: dict[str, Sequence[tuple[datetime, float]]], label: str = "") -> list[Marker]:
    """Xid codes and double-bit ECC increases as markers (from the error metrics' points)."""
    out: list[Marker] = []
    prefix = f"{label}: " if label else ""
    last = 0.0
    for t, v in samples.get("DCGM_FI_DEV_XID_ERRORS", ()):
        if v and v != last:
            out.append(Marker(t, "xid", f"{prefix}Xid {int(v)}"))
        last = v
    prev: float | None = None
    for t, v in samples.get("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", ()):
        if prev is not None and v > prev or prev is None and v > 0:
            out.append(Marker(t, "ecc", f"{prefix}ECC double-bit errors: {int(v)}"))
        prev = v
    return out


def _natural(label: str) -> list[Any]:
    """ "GPU 2" before "GPU 10"; "h100-02/GPU 3" by node then index."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", label)]


def gpu_metric_figure(
    name: str,
    per_gpu: dict[str, dict[str, Sequence[tuple[datetime, float]]]],
    *,
    start: datetime,
    end: datetime,
    cursor_t: datetime,
    markers: Iterable[Marker] = (),
) -> dict[str, Any]:
    """One of METRIC_CHARTS for one GPU (one line per metric) or several (one line per GPU and metric).

    ``per_gpu`` maps a label ("GPU 3", or "" for a single GPU) to metric -> points.
    """
    title, y_title, metrics, _scale, y_range = METRIC_CHARTS[name]
    from_zero, min_span = METRIC_AXES.get(name, (False, 0.0))
    series: list[Series] = []
    all_markers = list(markers)
    several = len(per_gpu) > 1
    for i, (label, by_metric) in enumerate(sorted(per_gpu.items(), key=lambda kv: _natural(kv[0]))):
        shown = False
        for metric in metrics:
            pts = by_metric.get(metric)
            if not pts:
                continue
            mname = METRIC_LABELS[metric]
            series.append(
                Series(
                    # several GPUs: one legend entry per GPU (its colour); the line style tells the metric
                    label if several else f"{label} {mname}".strip(),
                    [(t, metric_value(metric, v)) for t, v in pts],
                    dash="dot" if metric == "DCGM_FI_DEV_GPU_UTIL" and len(metrics) > 1 else "",
                    color=PALETTE[i % len(PALETTE)] if several else "",
                    group=label if several else "",
                    legend=not (several and shown),
                )
            )
            shown = True
        all_markers += error_markers(by_metric, label)
    if several and len(metrics) > 1:
        styles = " · ".join(
            f"{'dotted' if m == 'DCGM_FI_DEV_GPU_UTIL' else 'solid'}: {METRIC_LABELS[m]}" for m in metrics
        )
        title = f"{title} <span style='font-size:10px;color:#6b7385'>{styles}</span>"
    return line_figure(
        title,
        series,
        start=start,
        end=end,
        cursor_t=cursor_t,
        y_title=y_title,
        markers=all_markers,
        y_range=y_range,
        from_zero=from_zero,
        min_span=min_span,
    )


def allocation_figure(
    allocated: Sequence[tuple[datetime, float | None]],
    quota: Sequence[tuple[datetime, float | None]],
    limit: Sequence[tuple[datetime, float | None]] = (),
    *,
    start: datetime,
    end: datetime,
    cursor_t: datetime,
    markers: Iterable[Marker] = (),
    quota_label: str = "quota",
) -> dict[str, Any]:
    series = [Series("GPUs allocated", allocated, step=True, color=PALETTE[0])]
    if any(v is not None for _, v in quota):
        series.append(Series(quota_label, quota, step=True, dash="dash", color=PALETTE[2]))
    if any(v is not None for _, v in limit):
        series.append(Series("limit", limit, step=True, dash="dot", color=PALETTE[7]))
    return line_figure(
        "GPUs allocated vs " + quota_label,
        series,
        start=start,
        end=end,
        cursor_t=cursor_t,
        y_title="GPUs",
        markers=markers,
        from_zero=True,
    )


def queue_length_figure(
    pending_jobs: Sequence[tuple[datetime, float | None]],
    pending_gpus: Sequence[tuple[datetime, float | None]],
    *,
    start: datetime,
    end: datetime,
    cursor_t: datetime,
    markers: Iterable[Marker] = (),
) -> dict[str, Any]:
    """Jobs waiting (left axis) and the GPUs they ask for (right axis: ten times larger, it would flatten jobs)."""
    fig = line_figure(
        "Queue length",
        [Series("jobs pending", pending_jobs, step=True, color=PALETTE[0])],
        start=start,
        end=end,
        cursor_t=cursor_t,
        y_title="jobs",
        markers=markers,
        from_zero=True,
    )
    gpus = series_trace(
        Series("GPUs requested (right axis)", pending_gpus, step=True, dash="dash", color=PALETTE[3]), 1
    )
    gpus["yaxis"] = "y3"
    fig["data"].insert(1, gpus)
    fig["layout"]["yaxis3"] = {
        "overlaying": "y",
        "side": "right",
        "title": {"text": "GPUs"},
        "rangemode": "tozero",
        "showgrid": False,
    }
    fig["layout"]["margin"]["r"] = 45
    return fig


def histogram_figure(
    buckets: Sequence[tuple[str, int]], *, title: str = "Queue time", target_label: str = ""
) -> dict[str, Any]:
    """Queue-time histogram (pre-bucketed, so the page table and the chart agree exactly)."""
    return {
        "data": [
            {
                "type": "bar",
                "name": "jobs",
                "x": [b[0] for b in buckets],
                "y": [b[1] for b in buckets],
                "marker": {"color": PALETTE[0]},
                "hovertemplate": "%{x}: %{y} jobs<extra></extra>",
            }
        ],
        "layout": {
            "title": {
                "text": title + (f" (target {target_label})" if target_label else ""),
                "font": {"size": 13},
                "x": 0.01,
                "xanchor": "left",
            },
            "height": 220,
            "margin": {"l": 40, "r": 12, "t": 30, "b": 40},
            "xaxis": {"type": "category", "title": {"text": "waited"}},
            "yaxis": {"title": {"text": "jobs"}, "gridcolor": "#eceff4"},
            "showlegend": False,
            "paper_bgcolor": "#ffffff",
            "plot_bgcolor": "#ffffff",
            "font": {"family": "system-ui, sans-serif", "size": 11},
        },
    }


def step_series(
    intervals: Iterable[tuple[datetime, datetime | None, float]], grid: Sequence[datetime]
) -> list[tuple[datetime, float]]:
    """Sum of the values of the [from, to) intervals covering each grid point (inventory versions -> counts).

    A sweep over sorted start/end deltas: O((versions + points) log n), so a fleet chart over
    tens of thousands of pod versions stays cheap.
    """
    deltas: list[tuple[datetime, float]] = []
    for a, b, v in intervals:
        deltas.append((a, v))
        if b is not None:
            deltas.append((b, -v))
    deltas.sort(key=lambda d: d[0])
    out: list[tuple[datetime, float]] = []
    total, i = 0.0, 0
    for g in sorted(grid):
        while i < len(deltas) and deltas[i][0] <= g:
            total += deltas[i][1]
            i += 1
        out.append((g, round(total, 6)))
    return out


def value_series(
    intervals: Iterable[tuple[datetime, datetime | None, float | None]], grid: Sequence[datetime]
) -> list[tuple[datetime, float | None]]:
    """The value of the interval covering each grid point (a quota over time), None where none does."""
    items = list(intervals)
    out: list[tuple[datetime, float | None]] = []
    for g in grid:
        v = next((val for a, b, val in items if a <= g and (b is None or b > g)), None)
        out.append((g, v))
    return out
