"""DCGM exporter series as Prometheus stores them, and the evaluator of the PromQL subset over them.

Samples exist at multiples of the scrape interval, from the node's creation
to ``world.now`` and inside the retention; the labels of a GPU's series at a
sample time follow the scenario's ``dcgm_labels`` variant and the pod that
held the GPU then (``world.gpu_pod_at``).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from simulator.prometheus import containers
from simulator.prometheus.promql import (
    Aggregation,
    Comparison,
    Expr,
    Number,
    RangeFunction,
    Selector,
    Time,
)

LOOKBACK_S = 300
KEYS_MAX = 100_000  # pods' label pairs kept per source (DcgmSource._series_key)
DRIVER_VERSION = "550.127.08"
EXPORTER_NAMESPACE = "gpu-operator"
# (name, type, help) as dcgm-exporter's counters CSV describes them.
METRICS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
)
Labels = dict[str, str]
Sample = tuple[Labels, float]
Points = list[tuple[float, float]]  # (scrape time, value), ascending
Key = tuple[tuple[str, str], ...]  # a series' labels as sorted (name, value) pairs
# One GPU's (or one target's) series: (label key, points) in the order they first appear.
Group = list[tuple[Key, Points]]


def _key(labels: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


@functools.lru_cache(maxsize=65536)
def _node_ip(name: str) -> str:
    digest = hashlib.sha256(f"node/{name}".encode()).digest()
    return f"10.0.{digest[0]}.{max(digest[1], 2)}"


# Under MIG, dcgm-exporter reports every GPU instance as its own series (labels GPU_I_PROFILE, GPU_I_ID, the
# parent GPU's UUID and index); profiling and framebuffer fields are the instance's own, device-level fields
# (temperature, power, clocks, Xid, ECC, NVLink) are the parent GPU's.
PER_INSTANCE = frozenset(
    {
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
    }
)


class MigView:
    """One MIG GPU instance seen as a DCGM entity: the parent GPU's identity plus the instance."""

    __slots__ = ("gpu", "instance")

    def __init__(self, gpu: Any, instance: Any) -> None:
        self.gpu = gpu
        self.instance = instance

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gpu, name)

    @property
    def key(self) -> tuple[int, int]:
        return (self.gpu.index, self.instance.gi_id)


def telemetry_key(gpu: Any, metric: str | None = None) -> Any:
    if isinstance(gpu, MigView) and (metric is None or metric in PER_INSTANCE):
        return gpu.key
    return gpu.index


class DcgmSource:
    """Reads telemetry from the world (the caller holds the world lock)."""

    def __init__(
        self,
        world: Any,
        variant: str = "classic",
        disabled: Iterable[str] = (),
        scrape_interval_s: int = 30,
        retention_s: int = 15 * 86400,
    ) -> None:
        self.world = world
        self.variant = variant
        self.disabled = set(disabled)
        self.interval = scrape_interval_s
        self.retention = retention_s
        self.metrics = tuple(m for m in METRICS if m[0] not in self.disabled)
        self.metric_names = {m[0] for m in self.metrics}
        # cAdvisor's and kube-state-metrics' container series (a name in ``disabled``: that exporter is not scraped)
        self.container_names = containers.NAMES - self.disabled
        self.containers = containers.ContainerSeries(world, self._kubelet_up)
        self.cache: dict[tuple[Any, ...], Any] | None = None  # per query: range steps overlap
        self._static: dict[tuple[Any, ...], Labels] = {}  # static_labels, per GPU (they never change)
        self._base_keys: dict[
            tuple[Any, ...], tuple[Key, frozenset[str]]
        ] = {}  # _series_key: per GPU, metric
        self._held_keys: dict[str | None, Key] = {}  # _series_key: per pod
        self._merged_keys: dict[tuple[Any, ...], Key] = {}  # _series_key: per GPU, metric and pod
        self._label_maps: dict[Key, Labels] = {}  # label_map: a series' labels as the answer's "metric" map
        # pods_at of every GPU at one set of scrape times, while the world stays at one moment: a sweep's
        # queries (the four instant ones, the seven range ones) share their window.
        self._pods_window: tuple[Any, ...] | None = None
        self._pods_seen: dict[tuple[str, Any], list[str | None]] = {}
        # The world's bulk reads, where it has them (a range query's samples of a GPU in one call).
        self._bulk_values = getattr(world, "gpu_metric_series", None)
        self._bulk_pods = getattr(world, "gpu_pods_at", None)

    def begin(self) -> None:
        """Start memoising world reads for one query (the caller holds the world lock throughout)."""
        self.cache = {}

    def end(self) -> None:
        self.cache = None

    # Labels

    def gpus(self) -> list[tuple[Any, Any]]:
        nodes = self.world.nodes.values() if isinstance(self.world.nodes, dict) else self.world.nodes
        out: list[tuple[Any, Any]] = []
        for node in sorted(nodes, key=lambda n: n.name):
            for gpu in node.gpus:
                instances = getattr(gpu, "mig", None)
                if instances:
                    out.extend((node, MigView(gpu, inst)) for inst in instances)
                else:
                    out.append((node, gpu))
        return out

    def exporter_labels(self, node: Any, gpu: Any) -> Labels:
        """The labels dcgm-exporter itself writes (without pod attribution)."""
        host = "hostname" if self.variant == "current" else "Hostname"
        return {
            "gpu": str(gpu.index),
            "UUID": gpu.uuid,
            "pci_bus_id": gpu.pci_bus_id,
            "device": f"nvidia{gpu.index}",
            "modelName": node.gpu_product.replace("-", " "),
            host: node.name,
            "DCGM_FI_DRIVER_VERSION": DRIVER_VERSION,
            **(
                {"GPU_I_PROFILE": gpu.instance.profile, "GPU_I_ID": str(gpu.instance.gi_id)}
                if isinstance(gpu, MigView)
                else {}
            ),
        }

    def target_labels(self, node: Any) -> Labels:
        """What Prometheus attaches to everything scraped from the node's exporter (and to its ``up``)."""
        labels = {"instance": f"{_node_ip(node.name)}:9400", "job": "dcgm-exporter"}
        if self.variant == "scraped":  # a ServiceMonitor scrape: the exporter pod's own labels
            labels.update(
                {
                    "namespace": EXPORTER_NAMESPACE,
                    "pod": exporter_pod(node.name),
                    "container": "nvidia-dcgm-exporter",
                    "service": "nvidia-dcgm-exporter",
                    "endpoint": "gpu-metrics",
                }
            )
        return labels

    def static_labels(self, node: Any, gpu: Any) -> Labels:
        """The exporter's and the target's labels of a GPU (a new dict: callers add to it). They never change
        for a GPU (or a MIG instance of a profile): worked out once per source."""
        instance = gpu.instance if isinstance(gpu, MigView) else None
        key = (
            node.name,
            gpu.uuid,
            gpu.index,
            None if instance is None else (instance.gi_id, instance.profile),
        )
        labels = self._static.get(key)
        if labels is None:
            labels = self._static[key] = {**self.exporter_labels(node, gpu), **self.target_labels(node)}
        return dict(labels)

    def _kubelet_up(self, node_name: str, t: float) -> bool:
        """Whether the node's kubelet answered the scrape at t: down with the node, as its exporter is."""
        nodes = self.world.nodes
        node = nodes.get(node_name) if isinstance(nodes, dict) else None
        return node is not None and self.exporter_up(node, t)

    def exporter_up(self, node: Any, t: float) -> bool:
        """Whether the node's exporter answered the scrape at t (a NotReady node's does not)."""
        when = datetime.fromtimestamp(t, UTC)
        if when < node.created_at:
            return False
        fn = getattr(self.world, "exporter_up", None)
        if fn is None:  # a world without history: its current readiness
            return bool(getattr(node, "ready", True))
        if self.cache is not None:
            key = ("up", node.name, t)
            if key not in self.cache:
                self.cache[key] = fn(node.name, when)
            return bool(self.cache[key])
        return bool(fn(node.name, when))

    def pod_labels(self, node: Any, gpu: Any, t: datetime) -> Labels:
        tk = telemetry_key(gpu)
        if self.cache is not None:
            key = ("pod", node.name, tk, t)
            if key not in self.cache:
                self.cache[key] = self.world.gpu_pod_at(node.name, tk, t)
            held = self.cache[key]
        else:
            held = self.world.gpu_pod_at(node.name, tk, t)
        return self.held_labels(held)

    def held_labels(self, held: str | None) -> Labels:
        """The pod attribution labels for ``namespace/name`` (none for a free GPU)."""
        if not held:
            return {}
        namespace, _, pod = held.partition("/")
        prefix = "exported_" if self.variant == "scraped" else ""
        return {f"{prefix}container": "main", f"{prefix}namespace": namespace, f"{prefix}pod": pod}

    # Samples

    def sample_times(self, start: float, end: float) -> list[float]:
        """Scrape times in (start, end], clipped to [now - retention, now]."""
        now = self.world.now.timestamp()
        end = min(end, now)
        start = max(start, now - self.retention - 1e-9)
        first = math.floor(start / self.interval) * self.interval + self.interval
        if first <= start:
            first += self.interval
        return [float(t) for t in range(int(first), int(end) + 1, self.interval)] if first <= end else []

    def value(self, node: Any, gpu: Any, metric: str, t: float) -> float | None:
        when = datetime.fromtimestamp(t, UTC)
        if when < node.created_at:
            return None
        tk = telemetry_key(gpu, metric)
        if self.cache is not None:
            key = (node.name, tk, metric, t)
            if key not in self.cache:
                self.cache[key] = self.world.gpu_metric(node.name, tk, metric, when)
            value = self.cache[key]
        else:
            value = self.world.gpu_metric(node.name, tk, metric, when)
        return None if value is None else float(value)

    def _static_matches(self, metric: str, selector: Selector) -> list[tuple[Any, Any, Labels]]:
        """The GPUs whose static labels pass the selector's matchers (those labels decide most matchers
        before any sample is computed), with those labels; memoised for the query, as Prometheus' index
        answers ``UUID=~"a|b"`` once, not once per step of a range query."""
        key = ("static", metric, selector.matchers)
        if self.cache is not None and key in self.cache:
            return self.cache[key]
        # Matchers on the labels that identify a GPU (its UUID, index, host) are tried on those alone first,
        # as Prometheus' postings narrow a selector before any series is read: a fleet's other GPUs cost a
        # comparison each, not a label set. The whole label set still decides below.
        host = "hostname" if self.variant == "current" else "Hostname"
        probes = [m for m in selector.matchers if m.name in ("UUID", "gpu", host)]
        found = []
        for node, gpu in self.gpus():
            if probes:
                cheap = {"UUID": gpu.uuid, "gpu": str(gpu.index), host: node.name}
                if not all(m.matches(cheap) for m in probes):
                    continue
            base = self.static_labels(node, gpu)
            base["__name__"] = metric
            if all(
                m.matches(base)
                for m in selector.matchers
                if m.name in base or not _dynamic(m.name, self.variant)
            ):
                found.append((node, gpu, base))
        if self.cache is not None:
            self.cache[key] = found
        return found

    def select(
        self,
        selector: Selector,
        start: float,
        end: float,
        last_only: bool = False,
        last_per_series: bool = False,
    ) -> dict[tuple, Points]:
        """Samples in (start, end] of every series the selector matches, keyed by its label set.

        ``last_only`` (an instant selector): only the samples of the last scrape in the window. A series
        that is not in that scrape is stale, as Prometheus marks a series that vanished from its target
        (or whose target failed) at the next scrape, instead of answering its old sample for 5 minutes.
        ``last_per_series`` (``last_over_time``, which reads nothing else): each series' last sample in the
        window only, the same series as without it.
        """
        times = self.sample_times(start, end)
        if last_only:
            times = times[-1:]
        out: dict[tuple, Points] = defaultdict(list)
        for group in self.select_groups(selector, times, last=last_per_series):
            out.update(group)
        return out

    def select_groups(self, selector: Selector, times: list[float], last: bool = False) -> list[Group]:
        """The samples at the given scrape times (ascending) of every series the selector matches, by GPU
        (``up``: by node), each group's series in the order they first appear. ``last``: of each series only
        its last sample (a GPU held by one pod all along is then read at the last scrape alone, where it
        reports: an instant ``last_over_time`` over the fleet reads a sample per GPU, not a window's)."""
        names = (
            [selector.metric]
            if selector.metric
            else [*sorted(self.metric_names), *sorted(self.container_names), "up"]
        )
        groups: list[Group] = []
        if not times:
            return groups
        for metric in names:
            if metric == "up":
                groups.extend(self._select_up(selector, times))
                continue
            if metric in self.container_names:
                groups.extend(self.containers.select_groups(metric, selector, times, last=last))
                continue
            if metric not in self.metric_names:
                continue
            seen = self._window_pods(times)
            for node, gpu, base in self._static_matches(metric, selector):
                held_at = seen.get((node.name, telemetry_key(gpu)))
                if held_at is None:
                    held_at = seen[(node.name, telemetry_key(gpu))] = self.pods_at(node, gpu, times)
                first = held_at[0]
                one_pod = held_at.count(first) == len(held_at)
                # _static_matches tried every matcher but those on the pod attribution labels: only these are
                # left to try on each pod's label set (most selectors have none).
                dynamic = (
                    [m for m in selector.matchers if m.name not in base and _dynamic(m.name, self.variant)]
                    if selector.matchers
                    else []
                )
                if last and one_pod:
                    tail = self.values(node, gpu, metric, times[-1:])[0]
                    if tail is not None:  # reporting at the last scrape: that sample is the series' last
                        if self._held_matches(dynamic, base, first):
                            key = self._series_key(metric, node, gpu, base, first)
                            groups.append([(key, [(times[-1], float(tail))])])
                        continue
                # (not reporting at the last scrape: its last sample is earlier, if any)
                values = self.values(node, gpu, metric, times)
                # The pod holding a GPU changes rarely: its label set (and the matchers' verdict) is worked
                # out once per pod, not once per sample.
                if one_pod:  # one pod (or none) all along: one series
                    if self._held_matches(dynamic, base, first):
                        points = [(t, float(v)) for t, v in zip(times, values, strict=True) if v is not None]
                        if last:
                            points = points[-1:]
                        if points:
                            groups.append([(self._series_key(metric, node, gpu, base, first), points)])
                    continue
                keys: dict[str | None, tuple[Key, bool]] = {}
                found: dict[Key, Points] = {}
                end = 0
                for held, run in itertools.groupby(held_at):  # each stretch one pod held the GPU
                    start, end = end, end + len(list(run))
                    points = [
                        (t, float(v))
                        for t, v in zip(times[start:end], values[start:end], strict=True)
                        if v is not None
                    ]
                    if not points:
                        continue
                    known = keys.get(held)
                    if known is None:
                        known = keys[held] = (
                            self._series_key(metric, node, gpu, base, held),
                            self._held_matches(dynamic, base, held),
                        )
                    if known[1]:
                        series = found.get(known[0])
                        if series is None:
                            found[known[0]] = points
                        else:
                            series.extend(points)
                if found:
                    groups.append([(k, pts[-1:] if last else pts) for k, pts in found.items()])
        return groups

    def _window_pods(self, times: list[float]) -> dict[tuple[str, Any], list[str | None]]:
        """Each GPU's ``pods_at`` over these scrape times, by (node name, telemetry key), kept for the next query
        over the same scrape times at the same moment (the lists are shared: callers only read them)."""
        window = (self.world.now, times[0], times[-1], len(times))
        if window != self._pods_window:
            self._pods_window, self._pods_seen = window, {}
        return self._pods_seen

    def label_map(self, key: Key) -> Labels:
        """A series' labels as a dict (the answer's ``metric``), one per label set: a sweep asks the same
        fleet's series every few minutes. Shared: callers only serialize it."""
        labels = self._label_maps.get(key)
        if labels is None:
            if len(self._label_maps) >= KEYS_MAX:
                self._label_maps.clear()
            labels = self._label_maps[key] = dict(key)
        return labels

    def _held_matches(self, dynamic: list[Any], base: Labels, held: str | None) -> bool:
        if not dynamic:
            return True
        labels = {**base, **self.held_labels(held)}
        return all(m.matches(labels) for m in dynamic)

    def _series_key(self, metric: str, node: Any, gpu: Any, base: Labels, held: str | None) -> Key:
        """The sorted label pairs of a GPU's series while ``held`` holds it: the GPU's own pairs (sorted once
        per source: a sweep asks the same fleet the same queries every few minutes, and sorting 1,600 label
        sets each time was a fifth of an instant query) merged with the pod's."""
        profile = gpu.instance.profile if isinstance(gpu, MigView) else None
        index = (metric, node.name, gpu.uuid, telemetry_key(gpu), profile)
        merged = self._merged_keys.get((index, held))
        if merged is not None:
            return merged
        if len(self._merged_keys) >= KEYS_MAX:  # a long live run: forgotten wholesale
            self._merged_keys.clear()
        merged = self._merged_keys[(index, held)] = self._merge_key(index, base, held)
        return merged

    def _merge_key(self, index: tuple[Any, ...], base: Labels, held: str | None) -> Key:
        known = self._base_keys.get(index)
        if known is None:
            own = _key(base)
            known = self._base_keys[index] = (own, frozenset(name for name, _ in own))
        own, names = known
        pod = self._held_keys.get(held)
        if pod is None:
            if len(self._held_keys) >= KEYS_MAX:  # a long live run: forgotten wholesale
                self._held_keys.clear()
            pod = self._held_keys[held] = _key(self.held_labels(held))
        if not pod:
            return own
        if any(name in names for name, _ in pod):  # the pod's labels override the GPU's (no variant does)
            return _key({**base, **self.held_labels(held)})
        return tuple(sorted(own + pod))

    def values(self, node: Any, gpu: Any, metric: str, times: list[float]) -> list[float | None]:
        """``value`` at each scrape time (ascending), in one read of the world's series where it offers one
        (a query reads each GPU's series once: ``RangeReader`` reads a range query's whole span up front)."""
        bulk = self._bulk_values
        if bulk is None:
            return [self.value(node, gpu, metric, t) for t in times]
        created = node.created_at.timestamp()
        if times[0] >= created:
            return bulk(node.name, telemetry_key(gpu, metric), metric, times)
        later = bisect_left(times, created)
        head: list[float | None] = [None] * later
        return (
            head + bulk(node.name, telemetry_key(gpu, metric), metric, times[later:])
            if later < len(times)
            else head
        )

    def pods_at(self, node: Any, gpu: Any, times: list[float]) -> list[str | None]:
        """``namespace/name`` of the pod holding the GPU at each scrape time (None: free)."""
        bulk = self._bulk_pods
        if bulk is None:
            return [
                self.world.gpu_pod_at(node.name, telemetry_key(gpu), datetime.fromtimestamp(t, UTC))
                for t in times
            ]
        return bulk(node.name, telemetry_key(gpu), times)

    def _select_up(self, selector: Selector, times: list[float]) -> list[Group]:
        """``up`` of each node's exporter target (and, when cAdvisor is scraped, its kubelet's): 1 when its
        scrape succeeded, 0 when it failed (both fail with the node)."""
        nodes = self.world.nodes.values() if isinstance(self.world.nodes, dict) else self.world.nodes
        kubelets = bool(self.container_names & {containers.CPU, containers.MEMORY})
        groups: list[Group] = []
        for node in sorted(nodes, key=lambda n: n.name):
            targets = [self.target_labels(node)]
            if kubelets:
                targets.append(containers.ContainerSeries.kubelet_target(node.name))
            for target in targets:
                labels = {**target, "__name__": "up"}
                if not all(m.matches(labels) for m in selector.matchers):
                    continue
                points = [
                    (t, 1.0 if self.exporter_up(node, t) else 0.0)
                    for t in times
                    if datetime.fromtimestamp(t, UTC) >= node.created_at
                ]
                if points:
                    groups.append([(_key(labels), points)])
        return groups


class RangeReader:
    """What ``evaluate`` reads at each step of one range query, each selector's series read once for the range.

    The world is asked for every selector's samples over the whole range before the first step (each
    sample once, as Prometheus reads a series' chunks once for a range query); each step's ``select``
    then slices them. It answers each step exactly as ``DcgmSource.select`` would: the same samples of
    the same series, in the same order (within a GPU, the order the window first sees each label set).
    """

    def __init__(self, source: DcgmSource, expr: Expr, start: float, end: float) -> None:
        self.source = source
        self.read: dict[Selector, list[list[tuple[Key, list[float], Points]]]] = {}
        for selector, window in _selectors(expr).items():
            times = source.sample_times(start - selector.offset_s - window, end - selector.offset_s)
            self.read[selector] = [
                [(key, [t for t, _ in points], points) for key, points in group]
                for group in source.select_groups(selector, times)
            ]

    def by_series(self, expr: Expr, times: list[float]) -> dict[Key, list[list[Any]]] | None:
        """A range query of one metric's selector or of a range function over one, at each of ``times``, series
        by series: each series' window is found by bisection at every step, no step builds the vector of the
        whole fleet. The same answer as ``evaluate_keyed`` step by step (each series' points, its labels, the
        same value computed from the same samples in the same order); None for any other expression (an
        aggregation sums in the vector's order, a selector without a metric name may repeat a label set)."""
        if isinstance(expr, RangeFunction):
            selector, window, name = expr.selector, float(expr.range_s), expr.name
        elif isinstance(expr, Selector):
            selector, window, name = expr, float(LOOKBACK_S), ""
        else:
            return None
        if not selector.metric:
            return None
        windows: list[
            tuple[Any, float, float, float]
        ] = []  # (timestamp, first and last scrape, window start)
        for t in times:
            at = t - selector.offset_s
            scrapes = self.source.sample_times(at - window, at)
            if not name:  # an instant selector: the last scrape only (a series not in it is stale)
                scrapes = scrapes[-1:]
            if scrapes:
                windows.append((format_ts(t), scrapes[0], scrapes[-1], at))
        keep_name = name == "last_over_time"
        out: dict[Key, list[list[Any]]] = {}
        for group in self.read[selector]:
            for key, stamps, points in group:
                values = [v for _, v in points]
                answered: list[list[Any]] = []
                for ts, lo, hi, at in windows:
                    i, j = bisect_left(stamps, lo), bisect_right(stamps, hi)
                    if i >= j:
                        continue
                    if name:
                        value = over_time(name, points[i:j], values[i:j], at - window, at)
                        if value is None:
                            continue
                    else:
                        value = values[j - 1]
                    answered.append([ts, format_value(value)])
                if answered:
                    labels = key if keep_name or not name else tuple(p for p in key if p[0] != "__name__")
                    out[labels] = answered
        return out

    def select(
        self, selector: Selector, start: float, end: float, last_only: bool = False
    ) -> dict[tuple, Points]:
        times = self.source.sample_times(start, end)
        if last_only:
            times = times[-1:]
        out: dict[tuple, Points] = {}
        if not times:
            return out
        lo, hi = times[0], times[-1]
        for group in self.read[selector]:
            present = []
            for key, stamps, points in group:
                i, j = bisect_left(stamps, lo), bisect_right(stamps, hi)
                if i < j:
                    present.append((stamps[i], key, points[i:j]))
            if len(present) > 1:
                present.sort(key=lambda p: p[0])
            for _, key, points in present:
                out[key] = points
        return out


def _selectors(expr: Expr) -> dict[Selector, float]:
    """Each selector of an expression with the window one evaluation reads before its time (the widest)."""
    found: dict[Selector, float] = {}

    def walk(e: Expr) -> None:
        if isinstance(e, Selector):
            found[e] = max(found.get(e, 0.0), LOOKBACK_S)
        elif isinstance(e, RangeFunction):
            found[e.selector] = max(found.get(e.selector, 0.0), float(e.range_s))
        elif isinstance(e, Aggregation | Comparison):
            walk(e.expr)

    walk(expr)
    return found


def exporter_pod(node_name: str) -> str:
    """The dcgm-exporter DaemonSet pod on a node (gpu-operator names it nvidia-dcgm-exporter-<5 chars>)."""
    return f"nvidia-dcgm-exporter-{hashlib.sha256(node_name.encode()).hexdigest()[:5]}"


def _dynamic(name: str, variant: str) -> bool:
    if variant == "scraped":
        return name.startswith("exported_")
    return name in ("pod", "namespace", "container")


#
# Evaluation
#


def evaluate(source: DcgmSource | RangeReader, expr: Expr, t: float) -> list[Sample] | float:
    """An instant vector (list of (labels, value)) or a scalar, at time t."""
    result = evaluate_keyed(source, expr, t)
    if isinstance(result, float):
        return result
    return [(dict(key), v) for key, v in result]


def evaluate_keyed(source: DcgmSource | RangeReader, expr: Expr, t: float) -> list[tuple[Key, float]] | float:
    """``evaluate`` with each series' labels as their sorted (name, value) pairs: the order Prometheus sorts a
    result in and the key a range query collects its steps by, so neither rebuilds and sorts a label dict
    per series and step."""
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Time):
        return float(t)
    if isinstance(expr, Selector):
        at = t - expr.offset_s
        series = source.select(expr, at - LOOKBACK_S, at, last_only=True)
        return [(k, pts[-1][1]) for k, pts in series.items() if pts]
    if isinstance(expr, RangeFunction):
        at = t - expr.selector.offset_s
        name = expr.name
        if name == "last_over_time" and isinstance(source, DcgmSource):
            series = source.select(expr.selector, at - expr.range_s, at, last_per_series=True)
        else:
            series = source.select(expr.selector, at - expr.range_s, at)
        out: list[tuple[Key, float]] = []
        # Prometheus keeps the metric name of last_over_time only (it returns a sample, not a new value)
        keep_name = name == "last_over_time"
        for key, pts in series.items():
            if not pts:
                continue
            labels = key if keep_name else tuple(p for p in key if p[0] != "__name__")
            if keep_name:  # one sample a series when read from the source (last_per_series)
                value: float | None = pts[-1][1]
            else:
                value = over_time(name, pts, [v for _, v in pts], at - expr.range_s, at)
            if value is not None:
                out.append((labels, value))
        return out
    if isinstance(expr, Aggregation):
        inner = evaluate_keyed(source, expr.expr, t)
        if isinstance(inner, float):
            raise ValueError("expected an instant vector in aggregation, got a scalar")
        groups: dict[Key, list[float]] = defaultdict(list)
        for key, value in inner:
            named = dict(key)
            groups[tuple(sorted((n, named[n]) for n in set(expr.by) if named.get(n)))].append(value)
        result = []
        for group, values in groups.items():
            agg = {
                "sum": sum(values),
                "avg": sum(values) / len(values),
                "max": max(values),
                "min": min(values),
                "count": float(len(values)),
            }[expr.op]
            result.append((group, agg))
        return result
    if isinstance(expr, Comparison):
        inner = evaluate_keyed(source, expr.expr, t)
        if isinstance(inner, float):
            raise ValueError(
                "comparison between two scalars needs the bool modifier, which the subset does not support"
            )
        op = {
            ">": float.__gt__,
            "<": float.__lt__,
            ">=": float.__ge__,
            "<=": float.__le__,
            "==": float.__eq__,
            "!=": float.__ne__,
        }[expr.op]
        bound = float(t) if isinstance(expr.value, Time) else expr.value.value
        return [(key, v) for key, v in inner if op(float(v), bound)]
    raise TypeError(expr)


def over_time(name: str, pts: Points, values: list[float], start: float, end: float) -> float | None:
    """A range function over one series' samples in the window (start, end] (``values``: theirs, in order);
    None where Prometheus gives no sample (a rate of fewer than two)."""
    if name == "avg_over_time":
        return sum(values) / len(values)
    if name == "max_over_time":
        return max(values)
    if name == "min_over_time":
        return min(values)
    if name == "count_over_time":
        return float(len(values))
    if name in ("rate", "increase"):
        return extrapolated_rate(pts, start, end, is_rate=name == "rate")
    return values[-1]  # last_over_time


def extrapolated_rate(
    points: list[tuple[float, float]], range_start: float, range_end: float, *, is_rate: bool
) -> float | None:
    """rate()/increase() of a counter as Prometheus computes them (promql/functions.go extrapolatedRate).

    The increase between the first and last sample of the window, counter resets added back, then
    extrapolated towards the window's edges: all the way when the gap to an edge is under 1.1 times the
    average sample interval, else by half an interval; never below zero (a counter starts at 0). Fewer
    than two samples: no result.
    """
    if len(points) < 2:
        return None
    (first_t, first_v), (last_t, last_v) = points[0], points[-1]
    result = last_v - first_v
    prev = first_v
    for _, v in points[1:]:
        if v < prev:  # a counter reset: the value before it counted too
            result += prev
        prev = v
    sampled = last_t - first_t
    to_start, to_end = first_t - range_start, range_end - last_t
    average = sampled / (len(points) - 1)
    if result > 0 and first_v >= 0:
        to_zero = sampled * (first_v / result)
        to_start = min(to_start, to_zero)
    threshold = average * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    result *= interval / sampled
    if is_rate:
        result /= range_end - range_start
    return result


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def format_ts(t: float) -> float | int:
    return int(t) if float(t).is_integer() else round(t, 3)
