"""An incident's DCGM series asked of Prometheus, metric by metric: a rerun asks only what it has not frozen yet,
a Prometheus that does not answer is asked no more in this collection, and an answer without data says why
when Prometheus' own history is shorter than the window."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from collectors.sources import prometheus
from incidents.telemetry.metrics import METRICS, promql
from incidents.telemetry.series import merge_points, record_error, record_series
from incidents.telemetry.shared_range import shared_range
from rcaweb.timestamps import format_t, parse_timestamp

if TYPE_CHECKING:
    from incidents.observation_batch import Batch

logger = logging.getLogger(__name__)

Frozen = dict[tuple[str, str], list[list[Any]]]  # the points of each (metric, GPU) an earlier run froze


def from_prometheus(
    batch: Batch,
    url: str,
    gpus: list[tuple[str, Any]],
    node_of: dict[str, str],
    start: datetime,
    end: datetime,
    step: int,
) -> bool:
    """True when Prometheus answered every query; each failed query is recorded as an error observation."""
    try:
        source = prometheus.PrometheusSource(url)
    except Exception as exc:
        record_error(batch, "(client)", "configure", end, f"Prometheus client unavailable: {exc}")
        return False
    live = LiveCollection(batch, source, url, gpus, node_of, start, end, step)
    for metric in METRICS:
        live.collect(metric)
    live.finish()
    return live.ok


class LiveCollection:
    """What one collection asked Prometheus so far, and what the answers say together."""

    def __init__(
        self,
        batch: Batch,
        source: Any,
        url: str,
        gpus: list[tuple[str, Any]],
        node_of: dict[str, str],
        start: datetime,
        end: datetime,
        step: int,
    ) -> None:
        self.batch, self.source, self.url = batch, source, url
        self.gpus, self.node_of = gpus, node_of
        self.start, self.end, self.step = start, end, step
        self.uuids = [u for u, _ in gpus]
        self.ok = True
        self.answered = False
        self.earliest: datetime | None = None  # the oldest point any whole-window query returned
        self.whole_window = False
        self.history: list[Any] = []  # once asked: Prometheus' (oldest, newest) sample time, or None
        self.absent: list[tuple[str, str]] = []  # (metric, query) answered with no series at all
        # Once Prometheus timed out or refused, the other queries are skipped (bounded collection time).
        self.down = ""
        self.labels_seen: list[str] = []  # the label spelling this exporter uses, once one query found series
        self.frozen = frozen_points(batch, self.uuids)

    def collect(self, metric: str) -> None:
        """The series of ``metric`` for every GPU, or the error that kept them away."""
        query = promql(metric, self.uuids, self.labels_seen[0] if self.labels_seen else "UUID")
        if self.down:
            record_error(
                self.batch,
                metric,
                query,
                self.end,
                f"Prometheus not queried: it did not answer earlier in this collection ({self.down})",
            )
            return
        since = resume_from(self.frozen, metric, self.uuids, self.start, self.step)
        try:
            series, query, label = fetch(
                self.source, metric, self.uuids, since, self.end, self.step, self.labels_seen
            )
            if not series and since > self.start:  # nothing recent: the whole window says whether it exists
                since = self.start
                series, query, label = fetch(
                    self.source, metric, self.uuids, since, self.end, self.step, self.labels_seen
                )
        except Exception as exc:
            # A real failure (no answer, an HTTP error, a malformed answer): an error observation, which the
            # diagnosis reads as "prometheus failed". An answer with little or no data is not one (below).
            self.ok = False
            message = getattr(exc, "message", None) or str(exc)
            status = getattr(exc, "status", None)
            what = "did not answer" if status is None else "failed"
            record_error(self.batch, metric, query, self.end, f"Prometheus {what}: {message}")
            if status is None:  # no HTTP status: timeout or connection refused
                self.down = message[:200]
            return
        self.answered = True
        if since <= self.start:
            self.whole_window = True
            firsts = [s.points[0][0] for s in series if s.points]
            if firsts and (self.earliest is None or min(firsts) < self.earliest):
                self.earliest = min(firsts)
        if series and label not in self.labels_seen:
            self.labels_seen.append(label)
        self.record(metric, series, query, label, since)
        if not series:
            self.absent.append((metric, query))

    def record(self, metric: str, series: list[Any], query: str, label: str, since: datetime) -> None:
        """One ``dcgm_series`` per GPU from an answer (a rerun's with the points it froze before)."""
        by_uuid: dict[str, list[list[Any]]] = {}
        for s in series:
            labels = s.labels
            uuid = labels.get("UUID") or labels.get("uuid") or ""
            by_uuid.setdefault(uuid, []).extend([format_t(t), v] for t, v in s.points)
        lasts = [s.points[-1][0] for s in series if s.points]
        freshest = max(lasts) if lasts else None
        for uuid, entity in self.gpus:
            if uuid not in by_uuid and not series:
                continue  # the metric is not exported at all (counter set): one "no series" fact is enough
            points = sorted(by_uuid.get(uuid, []))
            if since > self.start:  # a rerun fetched only the recent part: the frozen points are the rest
                old = {"points": self.frozen.get((metric, uuid)) or []}
                points = merge_points(old, {"points": points})["points"]
            # The locator is the selector that reproduces this one series; the batched query that fetched it
            # (all the incident's GPUs at once) is kept in content["query"].
            one = promql(metric, [uuid], label)
            record_series(
                self.batch,
                metric,
                uuid,
                self.node_of.get(uuid, ""),
                entity,
                one,
                "prometheus",
                points,
                self.end,
                self.step,
                query=query,
                freshest=freshest,
            )

    def finish(self) -> None:
        """What did not answer with data, worded once every query is in (the history check needs them all)."""
        for metric, query in self.absent:
            gap = self.short_history()
            self.batch.add(
                kind="dcgm_series",
                source="prometheus",
                locator=query,
                observed_at=self.start,
                content={"metric": metric, "uuid": "", "node": "", "points": [], **({"gap": gap} if gap else {})},
                key=f"dcgm-absent:{metric}",
                summary=f"{metric}: no data: {gap}"
                if gap
                else f"{metric}: no series for these GPUs in the window",
            )
        late = self.earliest is None or (self.earliest - self.start).total_seconds() > 2 * self.step
        if self.answered and self.whole_window and late:
            gap = self.short_history()
            if gap:
                history_gap(self.batch, gap, self.start, self.end)

    def short_history(self) -> str:
        """Why the window has no data before some point, when the reason is Prometheus' short history.

        Only when what the queries returned agrees: the head block's minTime is not the oldest sample of
        a Prometheus that also keeps older blocks, and then some series reach back before it.
        """
        if not self.history:
            try:
                self.history.append(self.source.history_start())
            except Exception as exc:  # the data queries answered: an unknown history is no failure
                logger.info("prometheus history unknown (%s): %s", self.url, exc)
                self.history.append(None)
        held = self.history[0]
        if held is None or (
            self.earliest is not None and (held[0] - self.earliest).total_seconds() > 2 * self.step
        ):
            return ""
        return prometheus.short_history(held, self.start, slack_s=2 * self.step)


def history_gap(batch: Batch, gap: str, start: datetime, end: datetime) -> None:
    """Prometheus answered, but its history begins after the window does: a gap, not a failure (no ``error``)."""
    batch.add(
        kind="dcgm_series",
        source="prometheus",
        locator="/api/v1/status/tsdb (headStats.minTime)",
        observed_at=start,
        content={"metric": "", "uuid": "", "node": "", "points": [], "gap": gap, "window_start": format_t(start)},
        key="dcgm-history",
        summary=f"no data: {gap}; the window starts at {start:%H:%M}Z",
    )


def fetch(
    source: Any,
    metric: str,
    uuids: list[str],
    start: datetime,
    end: datetime,
    step: int,
    labels_seen: list[str],
) -> tuple[list[Any], str, str]:
    """One range query for all the GPUs; the other label spelling only while none is known to work."""
    tried = labels_seen[:1] or ["UUID", "uuid"]  # dcgm-exporter spelled the label "uuid" in some releases
    query, label, series = promql(metric, uuids, tried[0]), tried[0], []
    for lab in tried:
        q = promql(metric, uuids, lab)
        series = shared_range(source, q, start, end, step)
        if series or lab == tried[0]:
            query, label = q, lab
        if series:
            break
    return series, query, label


def frozen_points(batch: Batch, uuids: list[str]) -> Frozen:
    """Points of the live series an earlier collection of this incident froze, by (metric, GPU)."""
    keys = [f"dcgm:{m}:{u}" for m in METRICS for u in uuids]
    if batch.incident.pk is None:
        return {}
    rows = batch.incident.observations.filter(dedup_key__in=keys, error="").values_list(
        "dedup_key", "content"
    )
    out: Frozen = {}
    for key, content in rows:
        _, metric, uuid = key.split(":", 2)
        out[(metric, uuid)] = list((content or {}).get("points") or [])
    return out


def resume_from(
    frozen: Frozen, metric: str, uuids: list[str], start: datetime, step: int
) -> datetime:
    """Where a rerun's query may start: shortly before the freshest frozen point, on the query's step grid.

    Points before it are already frozen (and Prometheus answers the same for the same grid); a GPU without
    a frozen series, or no point at all, means the whole window again.
    """
    if any((metric, u) not in frozen for u in uuids):
        return start
    lasts = [pts[-1][0] for pts in (frozen[(metric, u)] for u in uuids) if pts]
    if not lasts:
        return start
    freshest = parse_timestamp(max(lasts))
    steps = int(max((freshest - start).total_seconds() - 2 * step, 0) // step)
    return start + timedelta(seconds=steps * step)
