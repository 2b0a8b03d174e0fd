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
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from django.db.models import Max

from collectors.models import Cluster, Entity, TelemetrySample
from collectors.sources import promql
from collectors.sources.dcgm import dcgm_uuid
from collectors.sources.prometheus import PrometheusSource, Series
from collectors.sources.prometheus import short_history as describe_short_history
from collectors.storage import insert_rows
from collectors.sweep.cluster_lock import cluster_lock
from collectors.sweep.runner import Runner
from collectors.sweep.summary import SweepSummary
from collectors.sweep.target import resolve

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
    asked: Asked | None = None,
) -> SweepSummary:
    """Fill 5-minute points up to ``at``: from the last stored point, at most ``backfill`` back. With ``since``,
    exactly (since, at] whatever is stored (existing points are kept): to backfill older history.

    ``asked``: the sweep's queries, sent earlier (:func:`ask_telemetry`, with the same arguments): only the
    answers are stored here."""
    cluster, at = resolve(cluster_name, at)
    summary = asked.runner.summary if asked is not None else SweepSummary(cluster.name, at, "telemetry")
    started = time.monotonic()
    if not cluster.prometheus_url:
        if asked is not None:
            asked.close()
        return summary
    with cluster_lock(cluster.name, "telemetry") as got:
        if not got:
            summary.skipped = True
            if asked is not None:
                asked.close()
            return summary
        if asked is None:
            if not Entity.objects.filter(cluster=cluster, kind="gpu").exists():
                return summary  # GPUs come from the inventory sweep; nothing to attach samples to yet
            asked = Asked(cluster, at, Runner(cluster, at, summary), backfill, metrics, since)
        try:
            _store_answers(cluster, asked, summary)
        finally:
            asked.close()
            asked.runner.save()
    summary.duration_s = time.monotonic() - started
    return summary


def ask_telemetry(
    cluster_name: str,
    at: datetime,
    *,
    backfill: timedelta = DEFAULT_BACKFILL,
    metrics: tuple[str, ...] = promql.TELEMETRY_METRICS,
    since: datetime | None = None,
) -> Asked | None:
    """Send a telemetry sweep's queries now, in the background; ``sweep_telemetry(…, asked=…)`` stores the
    answers later. What the queries ask depends only on the points stored so far (read here), and what
    Prometheus answers for a past window does not change: a driver sends them while other work runs (the
    simulation harness, while the inline worker finishes and the inventory is swept) and stores them at
    the same point as if asked then. None without a Prometheus."""
    cluster, at = resolve(cluster_name, at)
    if not cluster.prometheus_url:
        return None
    summary = SweepSummary(cluster=cluster.name, at=at, kind="telemetry")
    return Asked(cluster, at, Runner(cluster, at, summary), backfill, metrics, since)


class Asked:
    """One telemetry sweep's queries, in flight: one at a time in a worker thread, in the plan's order (only
    HTTP happens there; the plan is read from the database by the caller)."""

    def __init__(
        self,
        cluster: Cluster,
        at: datetime,
        runner: Runner,
        backfill: timedelta,
        metrics: tuple[str, ...],
        since: datetime | None,
    ) -> None:
        self.cluster, self.at, self.runner, self.since = cluster, at, runner, since
        self.end = _floor(at)
        self.prom = PrometheusSource(cluster.prometheus_url)
        self.plan = _plan(cluster, self.end, backfill, metrics, since)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="telemetry-ask")
        self.answers: list[Future[list[Series] | None]] = [
            self._pool.submit(self._ask, metric, start) for metric, start in self.plan
        ]

    def _ask(self, metric: str, start: datetime) -> list[Series] | None:
        query = promql.telemetry(metric)
        return self.runner.call(
            "prometheus",
            _call(metric),
            functools.partial(self.prom.query_range, query, start, self.end, promql.TELEMETRY_STEP_S),
        )

    def close(self) -> None:
        for answer in self.answers:
            answer.cancel()
        self._pool.shutdown(wait=True)


def _plan(
    cluster: Cluster, end: datetime, backfill: timedelta, metrics: tuple[str, ...], since: datetime | None
) -> list[tuple[str, datetime]]:
    """(metric, first point to fill) for each metric with points to fill up to ``end``."""
    # One MAX per metric: each is answered from the end of the (cluster, metric, time) index, where a
    # GROUP BY metric over the cluster reads every stored point.
    last = {m: t for m in metrics if (t := _last_point(cluster, m)) is not None}
    plan: list[tuple[str, datetime]] = []
    for metric in metrics:
        earliest = _floor(end - backfill) + STEP  # (end - backfill, end]: a 1 h backfill is 12 points
        start = max(last[metric] + STEP, earliest) if metric in last else earliest
        if since is not None:
            start = _floor(since) + STEP
        if start <= end:
            plan.append((metric, start))
    return plan


def _store_answers(cluster: Cluster, asked: Asked, summary: SweepSummary) -> None:
    """Each answer as it comes, in the plan's order: the next query is answered while this one is written
    (Prometheus evaluates while the database writes)."""
    runner, end = asked.runner, asked.end
    # Read when storing, not when asking: GPUs come from the inventory sweep, which may run in between.
    gpus = dict(Entity.objects.filter(cluster=cluster, kind="gpu").values_list("name", "pk"))
    history: list[tuple[datetime, datetime] | None] = []  # asked once, when a query comes back empty
    for (metric, start), answer in zip(asked.plan, asked.answers, strict=True):
        series = answer.result()
        if series is None or not gpus:  # no GPUs yet: nothing to attach samples to
            continue
        if not series:
            summary.no_data.append(metric)
            # a point at ``start`` averages the 5 min before
            gap = short_history(asked.prom, history, start - STEP)
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
        # Points after the last stored one cannot collide: copied straight in. Asked outside the lock (the
        # harness asks early), another sweep may have stored some since: then each is checked.
        last = _last_point(cluster, metric)
        fresh = asked.since is None and (last is None or last < start)
        _store(cluster, metric, series, gpus, runner, summary, fresh=fresh)


def _last_point(cluster: Cluster, metric: str) -> datetime | None:
    """The metric's newest stored point, from the end of the (cluster, metric, time) index."""
    return TelemetrySample.objects.filter(cluster=cluster, metric=metric).aggregate(t=Max("time"))["t"]


def _store(
    cluster: Cluster,
    metric: str,
    series: list[Series],
    gpus: dict[str, int],
    runner: Runner,
    summary: SweepSummary,
    *,
    fresh: bool = False,
) -> None:
    rows = _samples(cluster, metric, series, gpus)
    # COPY, not bulk_create: a first sweep of a few thousand GPUs writes ~10^5 points, whose model
    # instances and per-value field preparation cost more than the query. Unless ``fresh`` (all after the
    # last stored point), a point already stored is kept. The points are Prometheus' to give again: the
    # commit does not wait for the disk (a crash loses at most the last sweep's, which the next one refills).
    insert_rows(TelemetrySample, rows, ignore_conflicts=not fresh, wait_for_disk=False)
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
