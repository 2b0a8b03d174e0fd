"""The named charts of the entity and fleet pages (a GPU's metrics, a queue's allocation and length, a
histogram), built from samples on the figures of :mod:`web.console.figures`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from web.console.figures import PALETTE, Marker, Series, line_figure, series_trace

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
