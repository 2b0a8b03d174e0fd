"""Gather what one chart needs (samples, versions, changes, alerts) and build its figure.

Each chart is a handful of bounded queries. A chart with nothing to draw returns
``why`` ("Prometheus failed at 03:10:05Z (query_range …): connection refused"), which the
fragment shows as "no data: <why>", never an error page.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg, Q
from django.http import Http404

from collectors.models import Change, Cluster, Entity, EntityVersion, SourceRun, TelemetrySample
from incidents.models import Alert
from rcaweb import kinds
from rcaweb.cursor import Cursor, format_t
from web.console import charts

logger = logging.getLogger(__name__)

TELEMETRY = tuple(charts.METRIC_CHARTS)  # utilization, memory, power, temperature
# Which charts each kind's page has (the registry of kinds, rcaweb/kinds.py), and the fleet page's.
CHARTS_BY_KIND: dict[str, tuple[str, ...]] = {
    **{k.name: tuple(ch.name for ch in k.charts) for k in kinds.with_charts()},
    kinds.FLEET: kinds.FLEET_CHARTS,
}
TITLES = {
    "utilization": "GPU utilization / SM activity",
    "memory": "GPU memory used",
    "power": "Power",
    "temperature": "Temperature",
    "allocation": "GPUs allocated vs quota",
    "queue_length": "Queue length",
}
SAMPLE_LIMIT = 50_000
VERSION_LIMIT = 50_000
MAX_POINTS = 288


@dataclass
class ChartResult:
    name: str
    title: str
    fig: dict[str, Any] | None = None
    why: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class Scope:
    cluster: Cluster
    kind: str
    entity: Entity | None  # None for the fleet
    start: datetime
    end: datetime
    t: datetime


def resolve(cluster_name: str, kind: str, ident: str, name: str) -> tuple[Cluster, Entity | None]:
    """404 for an unknown cluster, kind, chart name or entity (bad URLs are the caller's error)."""
    if kind not in CHARTS_BY_KIND or name not in CHARTS_BY_KIND[kind]:
        raise Http404(f"no chart {name!r} for {kind!r}; charts: {CHARTS_BY_KIND.get(kind, ())}")
    try:
        cluster = Cluster.objects.get(name=cluster_name)
    except Cluster.DoesNotExist:
        raise Http404(f"unknown cluster {cluster_name!r}")
    if kind == kinds.FLEET:
        return cluster, None
    namespace, ent_name = kinds.get(kind).split_ident(ident)
    try:
        return cluster, Entity.objects.select_related("cluster").get(
            cluster=cluster, kind=kind, namespace=namespace, name=ent_name
        )
    except Entity.DoesNotExist:
        raise Http404(f"no {kind} {ident!r} in cluster {cluster_name}")


def chart_range(cursor: Cursor) -> tuple[datetime, datetime]:
    """The window before t, plus a quarter of it after t (context to click forward into), never past now."""
    from django.utils import timezone

    end = min(cursor.t + cursor.window / 4, max(timezone.now(), cursor.t))
    return cursor.start, end


def build(cluster: Cluster, kind: str, entity: Entity | None, name: str, cursor: Cursor) -> ChartResult:
    start, end = chart_range(cursor)
    scope = Scope(cluster, kind, entity, start, end, cursor.t)
    result = ChartResult(name=name, title=TITLES[name])
    if name in TELEMETRY:
        _telemetry(scope, name, result)
    elif name == "allocation":
        _allocation(scope, result)
    else:
        _queue_length(scope, result)
    return result


#
# Telemetry charts (DCGM samples)
#


def _gpus_of(scope: Scope) -> dict[int, str]:
    """GPU entity id -> label, for the GPUs a gpu/node/job page is about within the range."""
    ent = scope.entity
    assert ent is not None
    if ent.kind == "gpu":
        return {ent.pk: ""}
    gpus = EntityVersion.objects.overlapping(scope.start, scope.end).filter(cluster=scope.cluster, kind="gpu")
    if ent.kind == "node":
        gpus = gpus.filter(node=ent.name)
    else:  # job: the GPUs its pods held at some time in the range
        pods = (
            EntityVersion.objects.overlapping(scope.start, scope.end)
            .filter(cluster=scope.cluster, kind="pod", job=ent.name, namespace=ent.namespace)
            .values_list("entity__name", flat=True)
            .distinct()[:2000]
        )
        gpus = gpus.filter(pod__in=[f"{ent.namespace}/{p}" for p in pods])
    labels: dict[int, str] = {}
    for v in gpus.order_by("valid_from")[:VERSION_LIMIT].values("entity_id", "node", "state__index"):
        idx = v["state__index"]
        labels[v["entity_id"]] = f"GPU {idx}" if ent.kind == "node" else f"{v['node']}/GPU {idx}"
    return labels


def _telemetry(scope: Scope, name: str, result: ChartResult) -> None:
    _title, _y, metrics, _scale, _yr = charts.METRIC_CHARTS[name]
    wanted = list(metrics) + ([] if scope.entity is None else list(charts.ERROR_METRICS))
    base = TelemetrySample.objects.filter(cluster=scope.cluster, time__gte=scope.start, time__lte=scope.end)
    per_gpu: dict[str, dict[str, list[tuple[datetime, float]]]] = defaultdict(lambda: defaultdict(list))
    n = 0
    labels: dict[int, str] = {}
    if scope.entity is None:  # fleet: mean over every GPU, per point
        rows = (
            base.filter(metric__in=metrics).values("time", "metric").annotate(v=Avg("value")).order_by("time")
        )
        for r in rows[:SAMPLE_LIMIT]:
            per_gpu["fleet mean"][r["metric"]].append((r["time"], r["v"]))
            n += 1
    else:
        labels = _gpus_of(scope)
        if labels:
            samples = (
                base.filter(gpu_id__in=list(labels), metric__in=wanted)
                .order_by("time")
                .values_list("gpu_id", "metric", "time", "value")
            )
            for gpu_id, metric, t, v in samples[:SAMPLE_LIMIT]:
                per_gpu[labels[gpu_id]][metric].append((t, v))
                n += metric in metrics
    failures = _source_failures(scope, ("prometheus",))
    if scope.entity is not None and not labels:
        held = "held no GPU" if scope.kind == "job" else "reported no GPU"
        result.why = failures or (
            f"this {scope.kind} {held} between {format_t(scope.start)} and {format_t(scope.end)}"
        )
        return
    if n == 0:
        what = (
            "this GPU"
            if scope.kind == "gpu"
            else f"the GPUs of this {scope.kind}"
            if scope.entity
            else "the fleet"
        )
        result.why = failures or (
            f"no {'/'.join(charts.METRIC_LABELS[m] for m in metrics)} samples for {what} "
            f"between {format_t(scope.start)} and {format_t(scope.end)}"
        )
        return
    if failures:
        result.notes.append(f"gaps possible: {failures}")
    result.fig = charts.gpu_metric_figure(
        name,
        {k: dict(v) for k, v in per_gpu.items()},
        start=scope.start,
        end=scope.end,
        cursor_t=scope.t,
        markers=_markers(scope),
    )


#
# Inventory charts (versions over time)
#


def _grid(scope: Scope) -> list[datetime]:
    """Points from the range start to its end, but never past the last inventory sweep: an open version
    says "still true at the last look", not "true forever", so the line stops where knowledge stops."""
    last = (
        SourceRun.objects.filter(cluster=scope.cluster, source="k8s", ok=True, time__lte=scope.end)
        .order_by("-time")
        .values_list("time", flat=True)
        .first()
    )
    stop = max(min(scope.end, last), scope.t) if last is not None else scope.end
    span = scope.end - scope.start
    step = max(timedelta(minutes=1), span / MAX_POINTS)
    out, g = [], scope.start
    while g <= stop:
        out.append(g)
        g += step
    if scope.t not in out and scope.start <= scope.t <= scope.end:
        out = sorted([*out, scope.t])
    return out


def _versions(
    scope: Scope, kind: str, **filters: Any
) -> list[tuple[datetime, datetime | None, int | None, int | None]]:
    rows = (
        EntityVersion.objects.overlapping(scope.start, scope.end)
        .filter(cluster=scope.cluster, kind=kind, **filters)
        .values_list("valid_from", "valid_to", "gpus", "gpus_allocatable")[:VERSION_LIMIT]
    )
    return list(rows)


def _owner_filter(scope: Scope) -> dict[str, str]:
    ent = scope.entity
    if ent is None:
        return {}
    return {"project": ent.name} if ent.kind == "project" else {"queue": ent.name}


def _allocation(scope: Scope, result: ChartResult) -> None:
    grid = _grid(scope)
    pods = (
        EntityVersion.objects.overlapping(scope.start, scope.end)
        .filter(cluster=scope.cluster, kind="pod", phase__in=["Pending", "Running"], **_owner_filter(scope))
        .exclude(node="")
        .values_list("valid_from", "valid_to", "gpus")[:VERSION_LIMIT]
    )
    allocated = charts.step_series(((a, b, g or 0) for a, b, g in pods), grid)
    if scope.entity is None:
        nodes = _versions(scope, "node")
        quota: list[tuple[datetime, float | None]] = list(
            charts.step_series(((a, b, alloc or 0) for a, b, _g, alloc in nodes), grid)
        )
        limit: list[tuple[datetime, float | None]] = []
        label = "allocatable"
        has_policy = bool(nodes)
    else:
        own = list(
            EntityVersion.objects.filter(entity=scope.entity)
            .overlapping(scope.start, scope.end)
            .values_list("valid_from", "valid_to", "gpus", "gpus_allocatable")
        )
        quota = charts.value_series(((a, b, q) for a, b, q, _l in own), grid)
        limit = charts.value_series(((a, b, lim) for a, b, _q, lim in own), grid)
        label = "quota"
        has_policy = any(q is not None for _a, _b, q, _l in own)
    if not pods and not has_policy:
        failures = _source_failures(scope, ("k8s", "kai", "kueue", "runai"))
        result.why = (
            failures
            or f"no GPU pods and no quota recorded between {format_t(scope.start)} and {format_t(scope.end)}"
        )
        return
    result.fig = charts.allocation_figure(
        allocated,
        quota,
        limit,
        start=scope.start,
        end=scope.end,
        cursor_t=scope.t,
        markers=_markers(scope),
        quota_label=label,
    )
    if scope.entity is None:
        result.title = "GPUs allocated vs allocatable"


def _queue_length(scope: Scope, result: ChartResult) -> None:
    grid = _grid(scope)
    jobs = _versions(scope, "job", phase="Pending", **_owner_filter(scope))
    if not jobs:
        failures = _source_failures(scope, ("k8s", "kai", "kueue"))
        result.why = (
            failures or f"no job was pending between {format_t(scope.start)} and {format_t(scope.end)}"
        )
        return
    count = charts.step_series(((a, b, 1) for a, b, _g, _x in jobs), grid)
    gpus = charts.step_series(((a, b, g or 0) for a, b, g, _x in jobs), grid)
    result.fig = charts.queue_length_figure(
        count, gpus, start=scope.start, end=scope.end, cursor_t=scope.t, markers=_markers(scope)
    )


#
# Markers and failures
#


def _markers(scope: Scope) -> list[charts.Marker]:
    """Changes of the entity (and of its GPUs for a node) and alerts naming it, within the range."""
    ch = Change.objects.filter(cluster=scope.cluster, time__gte=scope.start, time__lte=scope.end)
    ent = scope.entity
    if ent is None:
        ch = ch.filter(Q(kind__in=["node", "queue", "project"]) | Q(source="external"))
    elif ent.kind == "node":
        ch = ch.filter(Q(entity=ent) | Q(kind="gpu", entity__versions__node=ent.name)).distinct()
    else:
        ch = ch.filter(entity=ent)
    out = [
        charts.Marker(
            c.time,
            "change",
            c.summary
            or f"{c.kind} {c.entity.name if c.entity else ''} {c.field}: {_short(c.old)} → {_short(c.new)}"
            + (f" by {c.actor}" if c.actor else ""),
        )
        for c in ch.select_related("entity").order_by("time")[:200]
    ]
    alerts = Alert.objects.filter(starts_at__gte=scope.start, starts_at__lte=scope.end).filter(
        Q(cluster_name=scope.cluster.name) | Q(cluster_name="")
    )
    for a in alerts.order_by("starts_at")[:500]:
        if _alert_names(a, ent):
            out.append(charts.Marker(a.starts_at, "alert", f"{a.name} ({a.severity or 'alert'})"))
    return out


def _alert_names(alert: Alert, ent: Entity | None) -> bool:
    if ent is None:
        return True
    labels = alert.labels or {}
    if ent.kind == "node":
        return ent.name in (labels.get("node"), labels.get("Hostname"), labels.get("hostname"))
    if ent.kind == "gpu":
        return ent.name in (labels.get("UUID"), labels.get("uuid"), labels.get("gpu_uuid"))
    if ent.kind == "job":
        return labels.get("job_name") == ent.name and labels.get("namespace", ent.namespace) == ent.namespace
    return labels.get(ent.kind) == ent.name or (ent.kind == "project" and labels.get("namespace") == ent.name)


def _source_failures(scope: Scope, sources: tuple[str, ...]) -> str:
    runs = list(
        SourceRun.objects.filter(
            cluster=scope.cluster,
            source__in=sources,
            ok=False,
            time__gte=scope.start - timedelta(minutes=10),
            time__lte=scope.end,
        ).order_by("-time")[:50]
    )
    # A real failure explains a blank chart before a gap does (a counter not exported, a short history).
    run = next((r for r in runs if not r.is_gap), None) or next(iter(runs), None)
    if run is None:
        return ""
    if run.is_gap:  # it answered with no data: say why, not "failed" (the fragment prefixes "no data: ")
        return run.error.removeprefix("no data: ")[:300]
    return f"{run.source} failed at {format_t(run.time)} ({run.call}): {run.error[:200] or 'no error text'}"


def _short(value: Any) -> str:
    text = "∅" if value is None else str(value)
    return text if len(text) <= 40 else text[:39] + "…"
