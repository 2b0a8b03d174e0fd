"""A DCGM series and what it shows written as observations: the ``dcgm_series`` itself, the points an on-call
would circle (``telemetry_anomaly``), and a failed query (``dcgm_series`` with ``error``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from rcaweb.timestamps import format_t, parse_timestamp

if TYPE_CHECKING:
    from incidents.observation_batch import Batch

TEMP_LIMIT_C = 85.0
MAX_ANOMALIES_PER_SERIES = 5


def record_series(
    batch: Batch,
    metric: str,
    uuid: str,
    node: str,
    entity: Any,
    locator: str,
    source: str,
    points: list[list[Any]],
    end: datetime,
    step: int,
    key_prefix: str = "dcgm",
    query: str = "",
    freshest: datetime | None = None,
) -> None:
    content: dict[str, Any] = {"metric": metric, "uuid": uuid, "node": node, "points": points}
    if query:
        content["query"] = query
    first = parse_timestamp(points[0][0]) if points else end
    summary = (
        f"{metric} on {uuid}: {len(points)} points"
        if points
        else f"{metric} on {uuid}: no data in the window"
    )
    batch.add(
        kind="dcgm_series",
        source=source,
        locator=locator,
        observed_at=first,
        content=content,
        key=f"{key_prefix}:{metric}:{uuid}",
        entity=entity,
        summary=summary,
    )
    for when, what, value in anomalies(metric, points, freshest or end, step, live=source == "prometheus"):
        batch.add(
            kind="telemetry_anomaly",
            source=source,
            locator=locator,
            observed_at=when,
            content={"metric": metric, "uuid": uuid, "node": node, "value": value, "what": what},
            key=f"anomaly:{metric}:{uuid}:{format_t(when)}:{what[:40]}",
            entity=entity,
            summary=f"GPU {uuid} on {node or '?'}: {what}",
        )


def anomalies(
    metric: str, points: list[list[Any]], freshest: datetime, step: int, *, live: bool
) -> list[tuple[datetime, str, float]]:
    """The points an on-call would circle: Xid raised, temperature over the limit, new DBE errors, silence.

    Silence is relative: a GPU whose series ends well before the freshest sibling series (``freshest``)
    stopped reporting (Xid 79: fell off the bus); if every GPU went quiet, the node's state says why.
    """
    out: list[tuple[datetime, str, float]] = []
    prev: float | None = None
    for t, v in points:
        when = parse_timestamp(t)
        if metric == "DCGM_FI_DEV_XID_ERRORS" and v and v != prev:
            out.append((when, f"Xid {int(v)} reported", v))
        elif metric == "DCGM_FI_DEV_GPU_TEMP" and v >= TEMP_LIMIT_C and (prev is None or prev < TEMP_LIMIT_C):
            out.append((when, f"temperature {v:.0f} °C (≥ {TEMP_LIMIT_C:.0f})", v))
        elif metric == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" and v and (prev is None or v > prev):
            out.append((when, f"double-bit ECC errors: {v:.0f}", v))
        prev = v
        if len(out) >= MAX_ANOMALIES_PER_SERIES:
            break
    if live and metric == "DCGM_FI_DEV_GPU_UTIL" and points:
        last = parse_timestamp(points[-1][0])
        if (freshest - last).total_seconds() > 4 * step:
            out.append((last, "stopped reporting (last sample)", float(points[-1][1])))
    return out


def merge_points(old: dict, new: dict) -> dict:
    """Union of points by timestamp: a rerun after retention expired must not lose what was frozen."""
    merged = {p[0]: p for p in (old or {}).get("points", [])}
    merged.update({p[0]: p for p in new.get("points", [])})
    return {**new, "points": [merged[k] for k in sorted(merged)]}


def record_error(batch: Batch, metric: str, call: str, at: datetime, message: str) -> None:
    batch.add(
        kind="dcgm_series",
        source="prometheus",
        locator=call,
        observed_at=at,
        content={"source": "prometheus", "call": f"query_range {call}"},
        key=f"dcgm-error:{metric}",
        summary=message,
        error=message,
    )
