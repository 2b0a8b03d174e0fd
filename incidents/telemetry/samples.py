"""The inventory's 5-minute GPU samples as an incident's series, when Prometheus is not configured or did not
answer."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from collectors.models import TelemetrySample
from incidents.telemetry.metrics import METRICS
from incidents.telemetry.series import record_series
from rcaweb.timestamps import format_t

if TYPE_CHECKING:
    from incidents.observation_batch import Batch


def from_samples(
    batch: Batch, gpus: list[tuple[str, Any]], node_of: dict[str, str], start: datetime, end: datetime
) -> None:
    """The inventory's downsampled points, when Prometheus is not configured or did not answer."""
    rows = (
        TelemetrySample.objects.filter(
            gpu__in=[e for _, e in gpus], metric__in=METRICS, time__gte=start, time__lte=end
        )
        .order_by("time")
        .values_list("gpu__name", "metric", "time", "value")
    )
    grouped: dict[tuple[str, str], list[list[Any]]] = {}
    for uuid, metric, t, v in rows:
        grouped.setdefault((metric, uuid), []).append([format_t(t), v])
    entities = dict(gpus)
    for (metric, uuid), points in grouped.items():
        locator = f'TelemetrySample {metric}{{UUID="{uuid}"}} (5m averages)'
        record_series(
            batch,
            metric,
            uuid,
            node_of.get(uuid, ""),
            entities[uuid],
            locator,
            "inventory",
            points,
            end,
            300,
            key_prefix="dcgm-inv",
        )
