"""DCGM exporter series as Prometheus stores them (the PromQL subset is evaluated over them in ``evaluate``).

Samples exist at multiples of the scrape interval, from the node's creation
to ``world.now`` and inside the retention; the labels of a GPU's series at a
sample time follow the scenario's ``dcgm_labels`` variant and the pod that
held the GPU then (``world.gpu_pod_at``).
"""
# size: the DCGM series store and its selection with their caches: one class

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from simulator.prometheus import containers
from simulator.prometheus.dcgm import (
    DRIVER_VERSION,
    EXPORTER_NAMESPACE,
    METRICS,
    MigView,
    dynamic_label,
    exporter_pod,
    node_ip,
    telemetry_key,
)
from simulator.prometheus.promql import (
    Selector,
)

LOOKBACK_S = 300
KEYS_MAX = 100_000  # pods' label pairs kept per source (DcgmSource._series_key)
Labels = dict[str, str]
Sample = tuple[Labels, float]
Points = list[tuple[float, float]]  # (scrape time, value), ascending
Key = tuple[tuple[str, str], ...]  # a series' labels as sorted (name, value) pairs
# One GPU's (or one target's) series: (label key, points) in the order they first appear.
Group = list[tuple[Key, Points]]


def _key(labels: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


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
        labels = {"instance": f"{node_ip(node.name)}:9400", "job": "dcgm-exporter"}
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
                if m.name in base or not dynamic_label(m.name, self.variant)
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

    # length: every query's samples pass here: one frame, lookups in locals
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
                    [
                        m
                        for m in selector.matchers
                        if m.name not in base and dynamic_label(m.name, self.variant)
                    ]
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
