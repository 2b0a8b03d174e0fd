"""Container CPU and memory series: cAdvisor's usage (through the kubelet) and kube-state-metrics' requests.

What a Prometheus that scrapes the kubelets' ``/metrics/cadvisor`` (kube-prometheus' ServiceMonitor) and
kube-state-metrics stores, worked out from the world's pods at each scrape time:

- ``kube_pod_container_resource_requests`` (kube-state-metrics v2 labels ``namespace``, ``pod``, ``uid``,
  ``container``, ``node``, ``resource``, ``unit``; ``job="kube-state-metrics"``): one series per resource a
  pod's container asks for, from the pod's creation to its deletion, whatever its phase (kube-state-metrics
  reports every pod the API server holds). A pod not yet bound has no ``node`` label (kube-state-metrics
  writes it empty and Prometheus drops empty labels): binding starts a new series.
- ``container_cpu_usage_seconds_total`` (a counter) and ``container_memory_working_set_bytes``, labels
  ``container``, ``id``, ``image``, ``name``, ``namespace``, ``pod`` as cAdvisor writes them plus the kubelet
  target's ``endpoint``, ``instance``, ``job="kubelet"``, ``metrics_path``, ``node``, ``service``: only while
  the container runs on a node whose kubelet answers the scrape (a pending pod, a finished one, a pod on a
  NotReady node has none). Each pod also has its pod-level cgroup series (no ``container`` label), as
  cAdvisor reports every cgroup: sums over a pod must filter ``container!=""``.

Usage varies by workload and is not read from any answer the console gives: each job has a CPU and a memory
profile of its own (a stable hash of the seed and its name: most use a good part of what they ask, about one
in four asks for several times what it uses), a job that leaves its GPUs idle (``sm_activity`` below 0.1: a
notebook, a stalled loader) mostly waits on its CPUs too, memory grows over the first minutes and then
wanders, and CPU use wobbles around its level. KAI's reservation pods use almost nothing, as their pause
container does.
"""

from __future__ import annotations

import hashlib
import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from simulator.kube.object_fields import stable_uid
from simulator.prometheus.promql import Selector

CPU = "container_cpu_usage_seconds_total"
MEMORY = "container_memory_working_set_bytes"
REQUESTS = "kube_pod_container_resource_requests"
METRICS: tuple[tuple[str, str, str], ...] = (
    (CPU, "counter", "Cumulative cpu time consumed in seconds."),
    (MEMORY, "gauge", "Current working set in bytes."),
)
NAMES = frozenset({CPU, MEMORY, REQUESTS})
KSM_TARGET = {"instance": "10.0.0.2:8080", "job": "kube-state-metrics"}
WOBBLE = 0.15  # CPU use swings ±15 % around its level
WOBBLE_PERIOD_S = 900.0
MEMORY_RAMP_S = 600.0  # the working set grows to its level over the first 10 minutes
POD_OVERHEAD_CORES = 0.0005  # the pause container and the pod's own cgroup
POD_OVERHEAD_BYTES = 1 << 20
IDLE_SM = 0.1

Key = tuple[tuple[str, str], ...]
Points = list[tuple[float, float]]


def _unit(*parts: Any) -> float:
    """Uniform in [0, 1), stable for its parts."""
    digest = hashlib.blake2b("|".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def profile(seed: int, job: Any) -> tuple[float, float]:
    """(CPU, memory) the job's containers use, as fractions of what they request."""
    if job is None:  # KAI's reservation pod: a pause container
        return 0.05, 0.4
    u, v = _unit(seed, "cpu", job.name), _unit(seed, "memory", job.name)
    cpu = 0.02 + 0.1 * (u / 0.25) if u < 0.25 else 0.3 + 0.65 * (u - 0.25) / 0.75
    memory = 0.05 + 0.15 * (v / 0.2) if v < 0.2 else 0.35 + 0.6 * (v - 0.2) / 0.8
    if float(getattr(job, "sm_activity", 1.0) or 0.0) < IDLE_SM:
        cpu *= 0.25
    return cpu, memory


def _wander(phase: float, minute: int) -> float:
    """In [-0.5, 0.5), stable for (phase, minute) and unrelated from one minute to the next: the fractional part
    of a scaled sine (the classic shader hash), a hundred times cheaper than a digest at every sample."""
    x = math.sin(minute * 12.9898 + phase * 78.233) * 43758.5453
    return x - math.floor(x) - 0.5


def _resource(name: str) -> tuple[str, str]:
    unit = {"cpu": "core", "memory": "byte"}.get(name, "integer")
    return re.sub(r"[^a-zA-Z0-9_]", "_", name), unit


def requests_of(pod: Any) -> dict[str, float]:
    """What the pod's container asks for, as the pod spec shows it (simulator/kube/pods.py)."""
    out = {"cpu": pod.cpu_millis / 1000.0, "memory": float(pod.memory_bytes)}
    if pod.mig_profile:
        out[f"nvidia.com/mig-{pod.mig_profile}"] = float(pod.mig_count)
    elif not pod.shared and not pod.reservation_for and pod.gpus_requested:
        out["nvidia.com/gpu"] = float(int(pod.gpus_requested))
    elif pod.reservation_for:
        out["nvidia.com/gpu"] = 1.0
    return out


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


class ContainerSeries:
    """The series of every pod of the world at given scrape times (the caller holds the world lock)."""

    def __init__(self, world: Any, up: Any) -> None:
        self.world = world
        self.up = up  # (node, t) -> whether the node's kubelet answers a scrape at t
        self.seed = getattr(world, "seed", 0)
        self._known: dict[str, tuple[float, float, float]] = {}  # _levels, by pod uid
        self._up: dict[tuple[str, float], bool] = {}

    def pods(self) -> Iterator[Any]:
        seen: set[str] = set()
        groups: Iterable[Iterable[Any]] = (
            getattr(self.world, "pods", {}).values(),
            getattr(self.world, "reservations", {}).values(),
            getattr(self.world, "deleted_pods", []),
        )
        for group in groups:
            for pod in group:
                if pod.uid not in seen:
                    seen.add(pod.uid)
                    yield pod

    def _job(self, pod: Any) -> Any:
        return None if pod.reservation_for else getattr(self.world, "jobs", {}).get(pod.job)

    #
    # Labels
    #

    def _container_id(self, pod: Any) -> str:
        return stable_uid("ctr", pod.uid, str(pod.restart_count)).replace("-", "")

    def _cgroup(self, pod: Any) -> str:
        return f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod.uid.replace('-', '_')}.slice"

    def cadvisor_labels(self, pod: Any, container: bool) -> dict[str, str]:
        """The labels cAdvisor writes for the pod's container (``container``) or the pod's cgroup."""
        if not container:
            return {"container": "", "id": self._cgroup(pod), "image": "", "name": "",
                    "namespace": pod.namespace, "pod": pod.name}  # fmt: skip
        cid = self._container_id(pod)
        return {
            "container": "main",
            "id": f"{self._cgroup(pod)}/cri-containerd-{cid}.scope",
            "image": pod.image,
            "name": cid,
            "namespace": pod.namespace,
            "pod": pod.name,
        }

    @staticmethod
    def kubelet_target(node: str) -> dict[str, str]:
        digest = hashlib.sha256(f"node/{node}".encode()).digest()
        return {
            "endpoint": "https-metrics",
            "instance": f"10.0.{digest[0]}.{max(digest[1], 2)}:10250",
            "job": "kubelet",
            "metrics_path": "/metrics/cadvisor",
            "node": node,
            "service": "kubelet",
        }

    #
    # Values
    #

    def running(self, pod: Any, t: float) -> bool:
        start = _ts(pod.started_at)
        if pod.node is None or start is None or t < start:
            return False
        if "waiting" in (pod.container_state or {}):  # crash-looping or pulling: no container runs
            return False
        end = _ts(pod.finished_at) or _ts(pod.deleted_at)
        return end is None or t < end

    def _kubelet_up(self, node: str, t: float) -> bool:
        known = self._up.get((node, t))
        if known is None:
            known = self._up[(node, t)] = bool(self.up(node, t))
        return known

    def _levels(self, pod: Any) -> tuple[float, float, float]:
        """(cores used, working set bytes, wobble phase) of a pod's container: fixed for the pod (its requests
        and its job's profile do not change), worked out once rather than at every sample."""
        levels = self._known.get(pod.uid)
        if levels is None:
            if len(self._known) >= 100_000:  # a long live run: forgotten wholesale
                self._known.clear()
            asked, (cpu, memory) = requests_of(pod), profile(self.seed, self._job(pod))
            levels = self._known[pod.uid] = (
                asked["cpu"] * cpu,
                asked["memory"] * memory,
                2 * math.pi * _unit(self.seed, "phase", pod.uid),
            )
        return levels

    def cpu_seconds(self, pod: Any, t: float, container: bool) -> float:
        """The container's (or pod cgroup's) CPU counter at t: its level times the time run, plus the wobble."""
        start = _ts(pod.started_at) or t
        cores, _, phase = self._levels(pod)
        run = max(0.0, t - start)
        omega = 2 * math.pi / WOBBLE_PERIOD_S
        used = cores * run + cores * WOBBLE / omega * (math.cos(phase) - math.cos(omega * run + phase))
        return used + (0.0 if container else POD_OVERHEAD_CORES * run)

    def working_set(self, pod: Any, t: float, container: bool) -> float:
        start = _ts(pod.started_at) or t
        level = self._levels(pod)[1]
        ramp = min(1.0, 0.3 + 0.7 * max(0.0, t - start) / MEMORY_RAMP_S)
        noise = 1.0 + 0.08 * _wander(self._levels(pod)[2], int(t // 60))
        value = float(int(level * ramp * noise))
        return value if container else value + POD_OVERHEAD_BYTES

    #
    # Selection
    #

    def select_groups(
        self, metric: str, selector: Selector, times: list[float], last: bool = False
    ) -> list[list[tuple[Key, Points]]]:
        """The samples at ``times`` of every series of ``metric`` the selector matches, one group per series."""
        if not times:
            return []
        lo, hi = times[0], times[-1]
        self._up = {}  # (node, scrape time) -> whether its kubelet answered, for this selection
        groups: list[list[tuple[Key, Points]]] = []
        for pod in self.pods():
            created, gone = pod.created_at.timestamp(), _ts(pod.deleted_at)
            if created > hi or (gone is not None and gone <= lo):
                continue
            if metric == REQUESTS:
                groups.extend(self._requests(pod, selector, times, last))
            else:
                groups.extend(self._usage(metric, pod, selector, times, last))
        return groups

    def _requests(
        self, pod: Any, selector: Selector, times: list[float], last: bool
    ) -> Iterator[list[tuple[Key, Points]]]:
        created, gone = pod.created_at.timestamp(), _ts(pod.deleted_at)
        bound = _ts(pod.scheduled_at) or _ts(pod.started_at)
        for name, value in requests_of(pod).items():
            resource, unit = _resource(name)
            base = {"__name__": REQUESTS, "namespace": pod.namespace, "pod": pod.name, "uid": pod.uid,
                    "container": "main", "resource": resource, "unit": unit, **KSM_TARGET}  # fmt: skip
            # before binding no node label (kube-state-metrics writes it empty), after it the node's
            spans = [(base, created, gone)]
            if pod.node is not None and bound is not None:
                spans = [(base, created, bound), ({**base, "node": pod.node}, max(created, bound), gone)]
            for labels, since, until in spans:
                if not all(m.matches(labels) for m in selector.matchers):
                    continue
                lo = bisect_left(times, since)
                hi = len(times) if until is None else bisect_left(times, until)
                at = times[lo:hi]
                if at:
                    points = [(t, value) for t in (at[-1:] if last else at)]
                    yield [(tuple(sorted(labels.items())), points)]

    def _usage(
        self, metric: str, pod: Any, selector: Selector, times: list[float], last: bool
    ) -> Iterator[list[tuple[Key, Points]]]:
        start = _ts(pod.started_at)
        if pod.node is None or start is None or "waiting" in (pod.container_state or {}):
            return
        matched = []  # the pod's labels decide the selector's matchers before any sample is computed
        for container in (True, False):
            labels = {
                **self.cadvisor_labels(pod, container),
                **self.kubelet_target(pod.node),
                "__name__": metric,
            }
            labels = {k: v for k, v in labels.items() if v != ""}  # Prometheus drops empty labels
            if all(m.matches(labels) for m in selector.matchers):
                matched.append((container, tuple(sorted(labels.items()))))
        if not matched:
            return
        end = _ts(pod.finished_at) or _ts(pod.deleted_at)
        lo, hi = bisect_left(times, start), len(times) if end is None else bisect_left(times, end)
        at = [t for t in times[lo:hi] if self._kubelet_up(pod.node, t)]
        if not at:
            return
        if last:
            at = at[-1:]
        read = self.cpu_seconds if metric == CPU else self.working_set
        for container, key in matched:
            yield [(key, [(t, read(pod, t, container)) for t in at])]

    #
    # /nodes/<node>/metrics/cadvisor
    #

    def exposition(self, node: str, now: datetime) -> str:
        """The kubelet's cAdvisor text exposition for one node at ``now`` (labels before Prometheus)."""
        t = now.astimezone(UTC).timestamp()
        pods = sorted(
            (p for p in self.pods() if p.node == node and self.running(p, t)),
            key=lambda p: (p.namespace, p.name),
        )
        lines: list[str] = []
        for metric, kind, help_text in METRICS:
            lines.append(f"# HELP {metric} {help_text}")
            lines.append(f"# TYPE {metric} {kind}")
            read = self.cpu_seconds if metric == CPU else self.working_set
            for pod in pods:
                for container in (False, True):
                    labels = self.cadvisor_labels(pod, container)
                    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
                    value = read(pod, t, container)
                    shown = str(int(value)) if metric == MEMORY else f"{value:.6f}"
                    lines.append(f"{metric}{{{body}}} {shown}")
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
