"""GPU telemetry: 5-minute averages per GPU and DCGM field, from Prometheus into ``TelemetrySample``.

Each run fills the 5-minute points from the last stored one (or ``backfill`` back) up to ``at``. A field
Prometheus has no series for is recorded as "no data" with the reason (profiling/ECC counters are off in
dcgm-exporter's default set), never as zero.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from django.db.models import Max

from collectors.bulk import insert_rows
from collectors.models import Cluster, Entity, TelemetrySample
from collectors.sources import promql
from collectors.sources.dcgm import dcgm_uuid
from collectors.sources.prometheus import PrometheusSource, Series
from collectors.sources.prometheus import short_history as describe_short_history
from collectors.sweep.common import Runner, SweepSummary, cluster_lock, resolve

logger = logging.getLogger(__name__)

STEP = timedelta(seconds=promql.TELEMETRY_STEP_S)
DEFAULT_BACKFILL = timedelta(hours=1)


def _floor(t: datetime) -> datetime:
    epoch = int(t.timestamp())
    return datetime.fromtimestamp(epoch - epoch % promql.TELEMETRY_STEP_S, tz=UTC)


def sweep_telemetry(
    cluster_name: str,
    at: datetime | None = None,
    *,
    backfill: timedelta = DEFAULT_BACKFILL,
    metrics: tuple[str, ...] = promql.TELEMETRY_METRICS,
    since: datetime | None = None,
) -> SweepSummary:
    """Fill 5-minute points up to ``at``: from the last stored point, at most ``backfill`` back. With ``since``,
    exactly (since, at] whatever is stored (existing points are kept): to backfill older history."""
    cluster, at = resolve(cluster_name, at)
    summary = SweepSummary(cluster=cluster.name, at=at, kind="telemetry")
    started = time.monotonic()
    if not cluster.prometheus_url:
        return summary
    with cluster_lock(cluster.name, "telemetry") as got:
        if not got:
            summary.skipped = True
            return summary
        runner = Runner(cluster, at, summary)
        try:
            _sweep(cluster, at, runner, summary, backfill, metrics, since)
        finally:
            runner.save()
    summary.duration_s = time.monotonic() - started
    return summary


def _sweep(
    cluster: Cluster,
    at: datetime,
    runner: Runner,
    summary: SweepSummary,
    backfill: timedelta,
    metrics: tuple[str, ...],
    since: datetime | None = None,
) -> None:
    gpus = dict(Entity.objects.filter(cluster=cluster, kind="gpu").values_list("name", "pk"))
    if not gpus:
        return  # GPUs come from the inventory sweep; nothing to attach samples to yet
    prom = PrometheusSource(cluster.prometheus_url)
    history: list[tuple[datetime, datetime] | None] = []  # asked once, when a query comes back empty
    end = _floor(at)
    # One MAX per metric: each is answered from the end of the (cluster, metric, time) index, where a
    # GROUP BY metric over the cluster reads every stored point.
    stored = TelemetrySample.objects.filter(cluster=cluster)
    last = {m: t for m in metrics if (t := stored.filter(metric=m).aggregate(t=Max("time"))["t"]) is not None}
    plan: list[tuple[str, datetime]] = []
    for metric in metrics:
        earliest = _floor(end - backfill) + STEP  # (end - backfill, end]: a 1 h backfill is 12 points
        start = max(last[metric] + STEP, earliest) if metric in last else earliest
        if since is not None:
            start = _floor(since) + STEP
        if start <= end:
            plan.append((metric, start))

    def ask(metric: str, start: datetime) -> list[Series] | None:
        query = promql.telemetry(metric)
        return runner.call(
            "prometheus",
            _call(metric),
            functools.partial(prom.query_range, query, start, end, promql.TELEMETRY_STEP_S),
        )

    # The next metric is asked for while this one is mapped and written (Prometheus evaluates while the
    # database writes); only HTTP happens in the worker thread.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="telemetry-ask") as pool:
        ahead = pool.submit(ask, *plan[0]) if plan else None
        for i, (metric, start) in enumerate(plan):
            assert ahead is not None
            series = ahead.result()
            ahead = pool.submit(ask, *plan[i + 1]) if i + 1 < len(plan) else None
            if series is None:
                continue
            if not series:
                summary.no_data.append(metric)
                # a point at ``start`` averages the 5 min before
                gap = short_history(prom, history, start - STEP)
                if gap:
                    message = f"no data: {gap}; {metric} has no 5-minute point from {start:%H:%M} to {end:%H:%M} UTC yet"
                else:
                    why = promql.ABSENT_WHY.get(metric, "the exporter does not export it")
                    message = (
                        f"no data: {metric} has no series from {start:%H:%M} to {end:%H:%M} UTC ({why}); "
                        "shown as missing, not as zero"
                    )
                runner.note("prometheus", f"no data {metric}", message)
                continue
            _store(cluster, metric, series, gpus, runner, summary)


def _store(
    cluster: Cluster,
    metric: str,
    series: list[Series],
    gpus: dict[str, int],
    runner: Runner,
    summary: SweepSummary,
) -> None:
    rows = _samples(cluster, metric, series, gpus)
    # COPY, not bulk_create: a first sweep of a few thousand GPUs writes ~10^5 points, whose model
    # instances and per-value field preparation cost more than the query. A point already stored
    # (only with ``since``) is kept.
    insert_rows(TelemetrySample, rows, ignore_conflicts=True)
    summary.samples_written += len(rows)
    runner.set_rows(_call(metric), len(rows))


def _call(metric: str) -> str:
    """The SourceRun call of a metric's query (its rows count is set once the points are written)."""
    return f"query_range {promql.telemetry(metric)}"


def short_history(prom: PrometheusSource, history: list, start: datetime) -> str:
    """Prometheus' history begins after ``start`` ("holds only N min of history"), else "" (also when unknown)."""
    if not history:
        try:
            history.append(prom.history_start())
        except Exception as exc:  # the query itself answered: an unknown history is no failure
            logger.info("prometheus history unknown: %s", exc)
            history.append(None)
    return describe_short_history(history[0], start)


def _samples(
    cluster: Cluster, metric: str, series: list[Series], gpus: dict[str, int]
) -> list[dict[str, object]]:
    """One point per GPU and time (rows for ``insert_rows``): series of one GPU with different pod labels
    are averaged."""
    acc: dict[tuple[int, datetime], list[float]] = defaultdict(list)
    for s in series:
        gpu_id = gpus.get(dcgm_uuid(s.labels))
        if gpu_id is None:
            continue
        for t, v in s.points:
            acc[(gpu_id, t)].append(v)
    cluster_id = cluster.pk
    return [
        {"cluster_id": cluster_id, "gpu_id": gpu_id, "metric": metric, "time": t, "value": sum(vs) / len(vs)}
        for (gpu_id, t), vs in acc.items()
    ]
