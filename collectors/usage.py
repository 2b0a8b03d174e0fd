"""Request vs usage, read now from the cluster's Prometheus: CPU and memory, GPUs and their SM activity.

The series are the ones every Kubernetes monitoring stack scrapes: kube-state-metrics'
``kube_pod_container_resource_requests`` (what the pod spec asks for), cAdvisor's
``container_cpu_usage_seconds_total`` and ``container_memory_working_set_bytes`` (through the kubelet), and
dcgm-exporter's ``DCGM_FI_PROF_SM_ACTIVE`` (``DCGM_FI_DEV_GPU_UTIL`` where profiling is off). They are
not stored: like a pod's log, they are read when a page asks, for the cursor's window ``(t - w, t]``, each
with a fixed number of queries whatever the number of pods (one selector names them all).

A series that does not answer is named, with why it may be absent, never shown as a zero: a use of 0 cores
and a cAdvisor that is not scraped are different answers. A query that fails is an ``error``, in words.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from collectors.models import Cluster
from collectors.sources.dcgm import dcgm_identity
from collectors.sources.errors import SourceError
from collectors.sources.prometheus import PrometheusSource, Series, short_history
from collectors.usage_series import MAX_PODS as MAX_PODS  # the pages bound their pod lists by it
from collectors.usage_series import (
    gpu_units,
    per_container,
    per_container_keyed,
    pod_selector,
    range_text,
    requested,
    requests_by_container,
    series_of_pods,
)

logger = logging.getLogger(__name__)

REQUESTS = "kube_pod_container_resource_requests"
CPU = "container_cpu_usage_seconds_total"
MEMORY = "container_memory_working_set_bytes"
SM = "DCGM_FI_PROF_SM_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
WHY_ABSENT = {
    REQUESTS: "kube-state-metrics is not scraped by this Prometheus, or the pods were gone before the window",
    CPU: "no container ran in the window, or the kubelets' /metrics/cadvisor is not scraped",
    MEMORY: "no container ran in the window, or the kubelets' /metrics/cadvisor is not scraped",
    SM: "profiling (DCGM_FI_PROF_*) counters are off in dcgm-exporter's default counter set",
    UTIL: "no GPU held by these pods reported to dcgm-exporter in the window (none bound yet, or not scraped)",
}
FLEET_STEP_MIN = 5  # the fleet reads SM activity as 5-minute means
FLEET_POINTS = 48  # at most this many per GPU, whatever the window (the step grows with it)


@dataclass
class Missing:
    """A series that gave nothing, and why it may be absent."""

    series: str
    why: str


@dataclass
class Resource:
    """One resource of a workload: what it asks for and what it used over the window (None: no series)."""

    name: str  # cpu | memory
    requested: float | None = None
    used: float | None = None  # the window's mean (cores; bytes)
    peak: float | None = None  # the highest sample (memory) or None

    @property
    def ratio(self) -> float | None:
        if self.requested and self.used is not None:
            return self.used / self.requested
        return None


@dataclass
class Usage:
    """Request vs usage of a set of pods (a job's, a pod, a namespace's) over the window ending at t."""

    at: datetime
    window: timedelta
    cpu: Resource = field(default_factory=lambda: Resource("cpu"))
    memory: Resource = field(default_factory=lambda: Resource("memory"))
    gpus: float | None = None  # GPUs the pods held in the window (whole GPUs; MIG instances by their slices)
    gpu_activity: float | None = None  # mean SM activity (0..1) of those GPUs
    gpu_metric: str = SM
    gpus_requested: float | None = None  # GPU devices and MIG instances the pod specs ask for (None: unknown)
    missing: list[Missing] = field(default_factory=list)
    error: str = ""
    history: str = ""  # "Prometheus holds only N min of history …" when the window starts before it
    queries: list[str] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return not self.error


def read_usage(cluster: Cluster, namespace: str, pods: list[str], at: datetime, window: timedelta) -> Usage:
    """Requests, CPU and memory use, GPUs and SM activity of ``pods`` (of ``namespace``) over ``(at - window, at]``.

    Use is the mean while the containers ran, not over the whole window (a pod that ran ten minutes of two hours
    used what it used then): CPU and memory are read as ``step``-long rates and means across the window (one
    range query each), averaged over the steps each container reported in. Five queries at most: requests, CPU,
    memory, then SM activity (and GPU utilisation only when SM activity has no series), each asked with both
    DCGM label spellings when the first finds nothing. Never raises: a failure is ``Usage.error``.
    """
    out = Usage(at=at, window=window)
    sel, rng = pod_selector(namespace, pods), range_text(window)
    step = min(fleet_step(window), max(window, timedelta(minutes=1)))
    minutes = int(step.total_seconds() // 60)
    resources = "cpu|memory|nvidia_com_gpu|nvidia_com_mig_.+"
    try:
        source = PrometheusSource(cluster.prometheus_url)
        requests = series_of_pods(
            _ask(source, f'max_over_time({REQUESTS}{{{sel},resource=~"{resources}"}}[{rng}])', at, out), pods
        )
        cpu = series_of_pods(
            _ask_range(source, f'rate({CPU}{{{sel},container!=""}}[{minutes}m])', at, window, step, out), pods
        )
        memory = series_of_pods(
            _ask_range(
                source, f'avg_over_time({MEMORY}{{{sel},container!=""}}[{minutes}m])', at, window, step, out
            ),
            pods,
        )
        if requests:
            asked = requested(requests)
            out.cpu.requested, out.memory.requested = asked.get("cpu"), asked.get("memory")
            out.gpus_requested = sum(v for k, v in asked.items() if k.startswith("nvidia_com_"))
        else:
            out.missing.append(Missing(REQUESTS, WHY_ABSENT[REQUESTS]))
        for metric, res, series in ((CPU, out.cpu, cpu), (MEMORY, out.memory, memory)):
            runs = per_container(series)
            if runs:
                res.used = sum(sum(v) / len(v) for v in runs)
                res.peak = sum(max(v) for v in runs)
            else:
                out.missing.append(Missing(metric, WHY_ABSENT[metric]))
        out.cpu.peak = None  # a 5-minute rate's highest is no peak worth showing beside a mean
        _gpus(source, namespace, pods, at, window, out)
        if out.missing:  # a window older than Prometheus' history has no series for that reason alone
            out.history = short_history(source.history_start(), at - window)
    except SourceError as exc:
        out.error = exc.message  # the query is listed with the others
    return out


def _ask(source: PrometheusSource, promql: str, at: datetime, out: Usage) -> list[Series]:
    out.queries.append(promql)
    return source.query(promql, at)


def _ask_range(
    source: PrometheusSource, promql: str, at: datetime, window: timedelta, step: timedelta, out: Usage
) -> list[Series]:
    """``promql`` every ``step`` across the window: the first step covers its start, the last ends at ``at``."""
    out.queries.append(f"{promql} every {int(step.total_seconds() // 60)}m")
    start = at - window + step
    return source.query_range(promql, min(start, at), at, step.total_seconds())


def _gpus(
    source: PrometheusSource, namespace: str, pods: list[str], at: datetime, window: timedelta, out: Usage
) -> None:
    """The GPUs the pods held and their mean activity: DCGM series carry the pod as ``pod`` or, after a scrape
    without honor_labels, ``exported_pod`` (collectors/sources/dcgm.py), so each metric is asked both ways."""
    rng = range_text(window)
    for metric in (SM, UTIL):
        found: list[Series] = []
        for prefix in ("", "exported_"):
            sel = pod_selector(namespace, pods, prefix)
            found = _ask(source, f"avg_over_time({metric}{{{sel}}}[{rng}])", at, out)
            if found:
                break
        held = series_of_pods(found, pods)
        if held:
            scale = 100.0 if metric == UTIL else 1.0
            weights = [gpu_units(s) for s in held]
            total = sum(weights)
            out.gpus = round(total, 3)
            out.gpu_activity = (
                sum(w * (s.last or 0.0) / scale for w, s in zip(weights, held, strict=True)) / total
            )
            out.gpu_metric = metric
            if metric == UTIL:  # GPUs report, but not their SM activity
                out.missing.append(Missing(SM, WHY_ABSENT[SM]))
            return
    if out.gpus_requested == 0:
        return  # no GPU asked for: no DCGM series is expected (a KAI share's GPU reports as its reservation pod)
    out.missing.append(Missing(f"{SM}, {UTIL}", WHY_ABSENT[UTIL]))


#
# The fleet: GPUs allocated but barely used
#


@dataclass
class Holding:
    """One pod's hold on GPUs over the window: GPU-hours held and their mean activity."""

    namespace: str
    pod: str
    gpu_hours: float = 0.0
    active_hours: float = 0.0  # GPU-hours weighted by activity: activity = active_hours / gpu_hours
    gpus: set[str] = field(default_factory=set)

    @property
    def activity(self) -> float:
        return self.active_hours / self.gpu_hours if self.gpu_hours else 0.0

    @property
    def wasted_hours(self) -> float:
        """GPU-hours held and not used: held x (1 - mean activity)."""
        return self.gpu_hours - self.active_hours


@dataclass
class FleetRead:
    holdings: list[Holding]
    metric: str
    step: timedelta
    missing: list[Missing] = field(default_factory=list)
    error: str = ""
    history: str = ""  # as Usage.history
    queries: list[str] = field(default_factory=list)


def fleet_step(window: timedelta) -> timedelta:
    """5 minutes, or longer for a long window: at most FLEET_POINTS points per GPU."""
    minutes = max(FLEET_STEP_MIN, -(-int(window.total_seconds() // 60) // FLEET_POINTS))
    return timedelta(minutes=minutes)


def read_holdings(cluster: Cluster, at: datetime, window: timedelta) -> FleetRead:
    """Every pod that held a GPU in ``(at - window, at]``, with the GPU-hours it held and how busy they were.

    One range query (two when SM activity has no series): each GPU series' mean activity per step, its pod
    from its labels; a step in which a GPU reported with a pod counts one step of that pod's hold.
    """
    step = fleet_step(window)
    read = FleetRead(holdings=[], metric=SM, step=step)
    start = at - window + step
    try:
        source = PrometheusSource(cluster.prometheus_url)
        for metric in (SM, UTIL):
            promql = f"avg_over_time({metric}[{int(step.total_seconds() // 60)}m])"
            read.queries.append(promql)
            series = source.query_range(promql, start, at, step.total_seconds()) if start <= at else []
            if series:
                read.metric = metric
                read.holdings = _holdings(series, step, 100.0 if metric == UTIL else 1.0)
                return read
            read.missing.append(Missing(metric, WHY_ABSENT[metric] if metric == SM else "no GPU reported"))
        read.history = short_history(source.history_start(), at - window)
    except SourceError as exc:
        read.error = exc.message
    return read


def _holdings(series: list[Series], step: timedelta, scale: float) -> list[Holding]:
    hours = step.total_seconds() / 3600
    by_pod: dict[tuple[str, str], Holding] = {}
    for s in series:
        ident = dcgm_identity(s.labels)
        if not ident["pod"] or not s.points:
            continue  # a free GPU
        key = (ident["namespace"], ident["pod"])
        h = by_pod.get(key)
        if h is None:
            h = by_pod[key] = Holding(*key)
        units = gpu_units(s)
        h.gpus.add(ident["uuid"] + (f"/{ident['gi_id']}" if ident["gi_id"] else ""))
        h.gpu_hours += units * hours * len(s.points)
        h.active_hours += units * hours * sum(min(1.0, max(0.0, v / scale)) for _, v in s.points)
    return list(by_pod.values())


#
# The fleet: CPU and memory requested but not used
#


@dataclass
class PodUse:
    """One pod that ran in the window: its CPU and memory requests, and its mean use while it ran."""

    namespace: str
    pod: str
    cpu_requested: float = 0.0
    cpu_used: float = 0.0
    memory_requested: float = 0.0
    memory_used: float = 0.0


@dataclass
class PodUses:
    pods: list[PodUse]
    missing: list[Missing] = field(default_factory=list)
    error: str = ""
    queries: list[str] = field(default_factory=list)


def read_pod_uses(cluster: Cluster, at: datetime, window: timedelta) -> PodUses:
    """Every pod whose containers ran in ``(at - window, at]``, with what it asked and used: three queries for the
    whole cluster (requests; CPU and memory in 5-minute steps, as :func:`read_usage`)."""
    out = PodUses(pods=[])
    probe = Usage(at=at, window=window)  # collects the queries asked
    step = min(fleet_step(window), max(window, timedelta(minutes=1)))
    minutes = int(step.total_seconds() // 60)
    try:
        source = PrometheusSource(cluster.prometheus_url)
        requests = _ask(
            source, f'max_over_time({REQUESTS}{{resource=~"cpu|memory"}}[{range_text(window)}])', at, probe
        )
        cpu = _ask_range(source, f'rate({CPU}{{container!=""}}[{minutes}m])', at, window, step, probe)
        memory = _ask_range(
            source, f'avg_over_time({MEMORY}{{container!=""}}[{minutes}m])', at, window, step, probe
        )
    except SourceError as exc:
        out.error = exc.message
        out.queries = probe.queries
        return out
    out.queries = probe.queries
    for metric, series in ((REQUESTS, requests), (CPU, cpu), (MEMORY, memory)):
        if not series:
            out.missing.append(Missing(metric, WHY_ABSENT[metric]))
    uses: dict[tuple[str, str], PodUse] = {}
    for attr, series in (("cpu_used", cpu), ("memory_used", memory)):
        for (ns, pod, _), values in per_container_keyed(series).items():
            use = uses.setdefault((ns, pod), PodUse(ns, pod))
            setattr(use, attr, getattr(use, attr) + sum(values) / len(values))
    # a pod that did not run (pending all along) used nothing it could be compared with: left out
    for (ns, pod, _, resource), value in requests_by_container(requests).items():
        ran = uses.get((ns, pod))
        if ran is not None and resource == "cpu":
            ran.cpu_requested += value
        elif ran is not None and resource == "memory":
            ran.memory_requested += value
    out.pods = list(uses.values())
    return out
