"""DCGM series for an incident's GPUs: live from Prometheus, else the inventory's 5-minute samples.

Each (metric, GPU) becomes one ``dcgm_series`` observation whose points are
merged across reruns (retention may have dropped the oldest ones since the
first collection: what we had is kept). A failed query is a ``dcgm_series``
observation with ``error``. Points that matter on a timeline (an Xid, a
temperature crossing, new double-bit ECC errors, a GPU that stopped
reporting) are also written as ``telemetry_anomaly`` observations.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings

from collectors.models import Cluster, EntityVersion, TelemetrySample
from collectors.sources import prometheus
from incidents.models import IncidentSubject
from rcaweb.timestamps import format_t, parse_timestamp
from rcaweb.ttlcache import TtlCache

if TYPE_CHECKING:
    from incidents.evidence import Batch

logger = logging.getLogger(__name__)

METRICS = (
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_SM_CLOCK",
)
MAX_GPUS = 32
MAX_POINTS = 240
TEMP_LIMIT_C = 85.0
MAX_ANOMALIES_PER_SERIES = 5




def promql(metric: str, uuids: list[str], label: str = "UUID") -> str:
    """One selector for the incident's GPUs, and only those (UUIDs are hex and dashes: no regex escaping
    needed); in sorted order, so incidents about the same GPUs ask the same query (``_shared_range``)."""
    safe = sorted({u for u in uuids if all(ch.isalnum() or ch == "-" for ch in u)})
    return f'{metric}{{{label}=~"{"|".join(safe)}"}}'


def pick_gpus(links: list[IncidentSubject]) -> list[tuple[str, Any]]:
    """The GPUs worth series, most relevant first: subject GPUs, GPUs of subject nodes, then those the pods used.

    GPUs linked only because their node is a candidate for a pending job are left out: a pending job has
    no GPU telemetry of its own (the node fit table says why it waits; the inventory's GPU states and
    samples stay available to the diagnosis), and on a fleet those candidates are hundreds of GPUs, an
    arbitrary 32 of which would cost the collection seconds and tell the on-call nothing.
    """
    subject_nodes = {s.entity.name for s in links if s.entity.kind == "node" and s.role == "subject"}
    gpus = [s for s in links if s.entity.kind == "gpu"]
    if not gpus:
        return []
    # A GPU's node is its newest version's (a GPU never leaves the inventory: a missing one stays open as
    # "missing"). Its open version alone is read: a busy GPU has a version per pod that held it, and a
    # pending job links hundreds of candidate GPUs. Only a GPU without one (deleted) is read in full.
    ids = [s.entity.pk for s in gpus]
    nodes = dict(
        EntityVersion.objects.filter(entity_id__in=ids, valid_to__isnull=True).values_list(
            "entity_id", "node"
        )
    )
    closed = [pk for pk in ids if pk not in nodes]
    if closed:
        nodes.update(
            EntityVersion.objects.filter(entity_id__in=closed)
            .order_by("entity_id", "valid_from")
            .values_list("entity_id", "node")
        )
    pods = [s.entity for s in links if s.entity.kind == "pod"]
    pod_nodes = (
        set(EntityVersion.objects.filter(entity__in=pods).exclude(node="").values_list("node", flat=True))
        if pods
        else set()
    )

    def rank(s: IncidentSubject) -> tuple[int, str]:
        if s.role == "subject":
            return (0, s.entity.name)
        return (1 if nodes.get(s.entity.pk) in subject_nodes else 2, s.entity.name)

    wanted = [
        s
        for s in gpus
        if s.role == "subject"
        or nodes.get(s.entity.pk) in subject_nodes
        or nodes.get(s.entity.pk) in pod_nodes
    ]
    return [(s.entity.name, s.entity) for s in sorted(wanted, key=rank)[:MAX_GPUS]]


def collect_dcgm(
    batch: Batch,
    cluster: Cluster | None,
    links: list[IncidentSubject],
    start: datetime,
    end: datetime,
    *,
    gpus: list[tuple[str, Any]],
) -> None:
    """Series of ``gpus``, what ``pick_gpus(links)`` picked (the collection picks them once)."""
    if cluster is None or not gpus:
        return
    node_of = dict(
        EntityVersion.objects.filter(entity__in=[e for _, e in gpus]).values_list("entity__name", "node")
    )
    span = max((end - start).total_seconds(), 60.0)
    step = max(30, int(span // MAX_POINTS // 30 * 30) or 30)
    live_failed = True
    if cluster.prometheus_url:
        live_failed = not _from_prometheus(batch, cluster.prometheus_url, gpus, node_of, start, end, step)
    if live_failed:
        _from_samples(batch, gpus, node_of, start, end)


def _from_prometheus(
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
        _error(batch, "(client)", "configure", end, f"Prometheus client unavailable: {exc}")
        return False
    uuids = [u for u, _ in gpus]
    ok = True
    answered = False
    earliest: datetime | None = None  # the oldest point any whole-window query returned
    whole_window = False
    history: list[Any] = []  # once asked: Prometheus' (oldest, newest) sample time, or None
    absent: list[tuple[str, str]] = []  # (metric, query) answered with no series at all

    def short_history() -> str:
        """Why the window has no data before some point, when the reason is Prometheus' short history.

        Only when what the queries returned agrees: the head block's minTime is not the oldest sample of
        a Prometheus that also keeps older blocks, and then some series reach back before it.
        """
        if not history:
            try:
                history.append(source.history_start())
            except Exception as exc:  # the data queries answered: an unknown history is no failure
                logger.info("prometheus history unknown (%s): %s", url, exc)
                history.append(None)
        held = history[0]
        if held is None or (earliest is not None and (held[0] - earliest).total_seconds() > 2 * step):
            return ""
        return prometheus.short_history(held, start, slack_s=2 * step)

    down = ""  # once Prometheus timed out or refused, the other queries are skipped (bounded collection time)
    labels_seen: list[str] = []  # the label spelling this exporter uses, once one query found series
    frozen = _frozen(batch, uuids)
    for metric in METRICS:
        query = promql(metric, uuids, labels_seen[0] if labels_seen else "UUID")
        label = labels_seen[0] if labels_seen else "UUID"
        if down:
            _error(
                batch,
                metric,
                query,
                end,
                f"Prometheus not queried: it did not answer earlier in this collection ({down})",
            )
            continue
        since = _resume_from(frozen, metric, uuids, start, step)
        try:
            series, query, label = _fetch(source, metric, uuids, since, end, step, labels_seen)
            if not series and since > start:  # nothing recent: the whole window says whether it exists
                since = start
                series, query, label = _fetch(source, metric, uuids, since, end, step, labels_seen)
        except Exception as exc:
            # A real failure (no answer, an HTTP error, a malformed answer): an error observation, which the
            # diagnosis reads as "prometheus failed". An answer with little or no data is not one (below).
            ok = False
            message = getattr(exc, "message", None) or str(exc)
            status = getattr(exc, "status", None)
            what = "did not answer" if status is None else "failed"
            _error(batch, metric, query, end, f"Prometheus {what}: {message}")
            if status is None:  # no HTTP status: timeout or connection refused
                down = message[:200]
            continue
        answered = True
        if since <= start:
            whole_window = True
            firsts = [s.points[0][0] for s in series if s.points]
            if firsts and (earliest is None or min(firsts) < earliest):
                earliest = min(firsts)
        if series and label not in labels_seen:
            labels_seen.append(label)
        by_uuid: dict[str, list[list[Any]]] = {}
        for s in series:
            labels = s.labels
            uuid = labels.get("UUID") or labels.get("uuid") or ""
            by_uuid.setdefault(uuid, []).extend([format_t(t), v] for t, v in s.points)
        lasts = [s.points[-1][0] for s in series if s.points]
        freshest = max(lasts) if lasts else None
        for uuid, entity in gpus:
            if uuid not in by_uuid and not series:
                continue  # the metric is not exported at all (counter set): one "no series" fact is enough
            points = sorted(by_uuid.get(uuid, []))
            if since > start:  # a rerun fetched only the recent part: the frozen points are the rest
                points = merge_points({"points": frozen.get((metric, uuid)) or []}, {"points": points})[
                    "points"
                ]
            # The locator is the selector that reproduces this one series; the batched query that fetched it
            # (all the incident's GPUs at once) is kept in content["query"].
            one = promql(metric, [uuid], label)
            _series(
                batch,
                metric,
                uuid,
                node_of.get(uuid, ""),
                entity,
                one,
                "prometheus",
                points,
                end,
                step,
                query=query,
                freshest=freshest,
            )
        if not series:
            absent.append((metric, query))
    # What did not answer with data is worded once every query is in (the history check needs them all).
    for metric, query in absent:
        gap = short_history()
        batch.add(
            kind="dcgm_series",
            source="prometheus",
            locator=query,
            observed_at=start,
            content={"metric": metric, "uuid": "", "node": "", "points": [], **({"gap": gap} if gap else {})},
            key=f"dcgm-absent:{metric}",
            summary=f"{metric}: no data: {gap}"
            if gap
            else f"{metric}: no series for these GPUs in the window",
        )
    if answered and whole_window and (earliest is None or (earliest - start).total_seconds() > 2 * step):
        gap = short_history()
        if gap:
            _history_gap(batch, gap, start, end)
    return ok


def _history_gap(batch: Batch, gap: str, start: datetime, end: datetime) -> None:
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


def _fetch(
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
        series = _shared_range(source, q, start, end, step)
        if series or lab == tried[0]:
            query, label = q, lab
        if series:
            break
    return series, query, label


# Incidents of one problem (the GPUs of one node, a job and its pods' GPUs) collected within a short time ask
# Prometheus the same queries: the answer is shared for SHARE_S. Queries run on the step grid (start rounded
# up, end down to a multiple of the step, as Prometheus evaluates a range query at start + k·step anyway), so
# two collections a few seconds apart ask the very same range. 0 turns it off (tests: every test its own).
SHARE_S = float(getattr(settings, "RCAWEB_EVIDENCE_SHARE_S", 60))
shared: TtlCache[list[Any]] = TtlCache(max_entries=512)


def _grid(start: datetime, end: datetime, step: int) -> tuple[datetime, datetime]:
    lo, hi = start.timestamp(), end.timestamp()
    qs = math.ceil(lo / step) * step
    qe = max(math.floor(hi / step) * step, qs)
    if qs > hi:  # a window shorter than one step: ask it as it is
        return start, end
    return datetime.fromtimestamp(qs, tz=UTC), datetime.fromtimestamp(qe, tz=UTC)


def _shared_range(source: Any, query: str, start: datetime, end: datetime, step: int) -> list[Any]:
    """``source.query_range`` on the step grid, answered from a recent identical query when there is one."""
    start, end = _grid(start, end, step)
    ttl = float(getattr(settings, "RCAWEB_EVIDENCE_SHARE_S", SHARE_S))
    key = (getattr(source, "url", ""), query, start, end, step)
    hit = shared.get(key, ttl)
    if hit is not None:
        return hit
    series: list[Any] = source.query_range(query, start, end, step)  # a failure raises: nothing is shared
    shared.put(key, series, ttl)
    return series


def _frozen(batch: Batch, uuids: list[str]) -> dict[tuple[str, str], list[list[Any]]]:
    """Points of the live series an earlier collection of this incident froze, by (metric, GPU)."""
    keys = [f"dcgm:{m}:{u}" for m in METRICS for u in uuids]
    if batch.incident.pk is None:
        return {}
    rows = batch.incident.observations.filter(dedup_key__in=keys, error="").values_list(
        "dedup_key", "content"
    )
    out: dict[tuple[str, str], list[list[Any]]] = {}
    for key, content in rows:
        _, metric, uuid = key.split(":", 2)
        out[(metric, uuid)] = list((content or {}).get("points") or [])
    return out


def _resume_from(
    frozen: dict[tuple[str, str], list[list[Any]]], metric: str, uuids: list[str], start: datetime, step: int
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


def _from_samples(
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
        _series(
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


def _series(
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


def _error(batch: Batch, metric: str, call: str, at: datetime, message: str) -> None:
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
