"""Plotly figures as plain dicts, from series, markers and the cursor (pure: no queries, no Django).

Every figure draws the cursor as a vertical line shape named ``cursor``, and puts changes,
alerts and GPU error events as clickable markers on a hidden second y axis (0..1), so
``static/js/charts.js`` can move the cursor to any of them. Times are written as naive UTC
strings (``2026-11-29 03:12:00``): plotly.js has no time zones, and each title says "(UTC)".
"""

from __future__ import annotations

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


def spanned_range(
    series: Sequence[Series], min_span: float, *, from_zero: bool = False
) -> list[float] | None:
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
