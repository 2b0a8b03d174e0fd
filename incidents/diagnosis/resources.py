"""CPU and memory beside GPUs, as KAI's proportion plugin weighs them: each queue's deserved quota, limit and
over-quota weight per resource, what it holds, and its fair share of the cluster's CPU and memory.

KAI divides every resource alike (deserved first, then the spare by priority and over-quota weight, never past
what a queue asks nor its limit); a queue's standing is its *dominant* share, the largest of allocated /
allocatable over GPU, CPU and memory. A CPU or memory quota left unset is unlimited (KAI's -1): the queue
deserves whatever it asks of it, and its share of it is counted against the whole cluster's. A quota of 0 is
one: the queue may use it only as others leave it free, and holding it anyway weighs 1000 × what it holds.

Where the inventory carries them (queue, project and department states):
``quota_cpu_cores``, ``limit_cpu_cores``, ``quota_memory_bytes``, ``limit_memory_bytes`` (absent, null or
negative: unlimited) and ``over_quota_weight_cpu`` / ``over_quota_weight_memory`` (default 1). CPU is carried
here in millicores (KAI divides it so), memory in bytes.

Pure: reads the ``DiagnosisInput`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from incidents.diagnosis.allocation import ACTIVE_POD_PHASES, pod_preemptible
from incidents.diagnosis.node_resources import requested_on
from incidents.diagnosis.request import Request, pod_requests
from incidents.diagnosis.types import READS, DiagnosisInput, EntityState

CPU = "cpu"
MEMORY = "memory"
DIMS = (CPU, MEMORY)
EPS = 1e-6
NO_SHARE_FACTOR = 1000.0  # KAI: a resource a queue may not hold, held anyway, weighs 1000 × what it holds
_KEYS = {
    CPU: ("quota_cpu_cores", "limit_cpu_cores", "over_quota_weight_cpu", 1000.0),
    MEMORY: ("quota_memory_bytes", "limit_memory_bytes", "over_quota_weight_memory", 1.0),
}
WORDS = {CPU: "CPU", MEMORY: "memory"}

Vector = tuple[float, float]  # (CPU millicores, memory bytes)
ZERO: Vector = (0.0, 0.0)


def _amount(value: Any, scale: float) -> float | None:
    """A quota field in this module's units: None when absent, unreadable or negative (unlimited)."""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return None
    return round(n * scale, 3) if math.isfinite(n) and n >= 0 else None


@dataclass
class Dim:
    """One queue's (or department's) standing in one resource: CPU millicores or memory bytes."""

    deserved: float | None = None  # None: unlimited (KAI's -1)
    limit: float | None = None  # None: no limit
    weight: float = 1.0
    used: float = 0.0
    demand: float = 0.0  # held plus what its waiting jobs ask
    fair: float = 0.0

    def allocatable(self, total: float) -> float:
        """What KAI lets the queue hold before it counts as saturated: the larger of deserved and fair share,
        never past its limit; an unlimited deserved quota: its limit, else the cluster's whole amount."""
        if self.deserved is None:
            return total if self.limit is None else self.limit
        top = max(self.deserved, self.fair)
        return top if self.limit is None else min(top, self.limit)

    def share(self, total: float, extra: float = 0.0) -> float:
        held = self.used + extra
        room = self.allocatable(total)
        return held * NO_SHARE_FACTOR if room <= EPS else held / room

    def within(self, extra: float = 0.0) -> bool:
        return self.deserved is None or self.used + extra <= self.deserved + EPS

    def over_fair(self) -> bool:
        return self.used > self.fair + EPS


def dims_of(state: EntityState | None) -> dict[str, Dim]:
    """The CPU and memory quota, limit and weight a queue, project or department state carries (module doc)."""
    out: dict[str, Dim] = {}
    for dim, (quota, limit, weight, scale) in _KEYS.items():
        w = _amount(state.get(weight), 1.0) if state is not None else None
        out[dim] = Dim(
            deserved=_amount(state.get(quota), scale) if state is not None else None,
            limit=_amount(state.get(limit), scale) if state is not None else None,
            weight=1.0 if w is None else w,
        )
    return out


def bounded(state: EntityState | None) -> bool:
    """Whether the state sets a CPU or memory quota or limit (else every resource check passes)."""
    if state is None:
        return False
    return any(_amount(state.get(k), 1.0) is not None for dim in _KEYS.values() for k in dim[:2])


def vector(cpu_cores: float | None, memory_bytes: float | None, times: int = 1) -> Vector:
    return (round((cpu_cores or 0.0) * 1000.0 * times, 3), float(memory_bytes or 0) * times)


def request_vector(req: Request) -> Vector:
    """What the job's unplaced pods ask of CPU and memory."""
    return vector(req.cpu_per_pod, req.memory_per_pod, req.pods)


def job_vector(di: DiagnosisInput, job: EntityState) -> Vector:
    """What a waiting job's pods ask of CPU and memory: its state's per-pod requests, else its first pod's."""
    cache = di.memo("job_cpu_memory", dict)  # per indexed block: every order built in it reads each job once
    got = cache.get(id(job)) if cache is not None else None
    if got is not None:
        return got
    st = job.state
    asked = st.get("requests_per_pod")
    if asked is None:  # not recorded on the job: its first pod's
        pods = di.pods_of_job(job)
        asked = (pods[0].get("requests") if pods else None) or {}
    cpu, mem = pod_requests(asked) if asked else (None, None)
    got = vector(cpu, mem, int(st.get("pods") or 1)) if asked else ZERO
    if cache is not None:
        cache[id(job)] = got
    return got


def pod_vector(p: EntityState) -> Vector:
    cpu, mem = pod_requests(p.get("requests") or {})
    return vector(cpu, mem)


def _held_index(di: DiagnosisInput, preemptible: bool) -> dict[tuple[Any, Any], list[float]]:
    out: dict[tuple[Any, Any], list[float]] = {}
    for p in di.pods:
        if not p.get("node") or p.get("phase") not in ACTIVE_POD_PHASES:
            continue
        if preemptible and not pod_preemptible(di, p):
            continue
        c, m = pod_vector(p)
        if c or m:
            row = out.setdefault((p.get("project"), p.get("queue")), [0.0, 0.0])
            row[0] += c
            row[1] += m
    return out


def held(di: DiagnosisInput, project: str, queue: str, *, preemptible: bool = False) -> Vector:
    """CPU millicores and memory bytes the bound, unfinished pods of the project (or queue) request at t
    (``preemptible``: those of its preemptible jobs only)."""
    name = "cpu_memory_held_preemptible" if preemptible else "cpu_memory_held"
    index = di.memo(name, lambda: _held_index(di, preemptible))
    if index is None:
        index = _held_index(di, preemptible)
    cpu = mem = 0.0
    for (p, q), (c, m) in index.items():
        if (project and p == project) or (queue and q == queue):
            cpu += c
            mem += m
    return (round(cpu, 3), mem)


def totals(di: DiagnosisInput) -> Vector:
    """Allocatable CPU millicores and memory bytes of the nodes that take pods: Ready and not cordoned (read once
    per indexed block: every ``QueueOrder`` divides them)."""
    got = di.memo("cpu_memory_totals", lambda: _totals(di))
    return got if got is not None else _totals(di)


READS["cpu_memory_totals"] = ("nodes",)


def _totals(di: DiagnosisInput) -> Vector:
    cpu = mem = 0.0
    for n in di.nodes:
        if n.get("ready") is False or n.get("unschedulable"):
            continue
        c, m = pod_requests(n.get("allocatable") or {})
        cpu += (c or 0.0) * 1000.0
        mem += m or 0
    return (round(cpu, 3), mem)


def node_room(di: DiagnosisInput, node: str) -> list[float | None]:
    """[cores, bytes] of the node's allocatable CPU and memory its bound pods leave unrequested (None: the node
    does not report it)."""
    st = di.find("node", node)
    cpu, mem = pod_requests((st.get("allocatable") or {}) if st is not None else {})
    used_cpu, used_mem = requested_on(di, node)
    return [
        None if cpu is None else max(cpu - used_cpu, 0.0),
        None if mem is None else max(float(mem) - used_mem, 0.0),
    ]


__all__ = [
    "CPU",
    "DIMS",
    "MEMORY",
    "WORDS",
    "ZERO",
    "Dim",
    "Vector",
    "bounded",
    "dims_of",
    "held",
    "job_vector",
    "node_room",
    "pod_vector",
    "request_vector",
    "totals",
    "vector",
]
