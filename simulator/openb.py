"""A scenario file from Alibaba's public GPU cluster trace ``cluster-trace-gpu-v2023`` (the "openb" trace).

The trace (github.com/alibaba/clusterdata, ``cluster-trace-gpu-v2023/csv/``; Weng et al., "Beware of
Fragmentation", USENIX ATC '23) lists a production GPU cluster's nodes (``openb_node_list_gpu_node.csv``:
``sn,cpu_milli,memory_mib,gpu,model``) and 8,152 pods (``openb_pod_list_default.csv``:
``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,
scheduled_time``). ``bench/trace.py`` reads them from disk (nothing is fetched) and this module turns them
into a format 1 scenario (docs/scenarios.md):

- **Nodes**: one node pool per node shape (GPU model, GPUs, CPU, memory), ``sharing: true``, with the
  shape's real ``cpu`` and ``memory``. ``fraction`` keeps that share of every shape's nodes (rounded half
  up, at least one), so a quarter of the cluster has the whole cluster's mix.
- **GPU products**: the trace's model codes as GPU feature discovery names them (``PRODUCTS``). G1/G2/G3
  are undisclosed internal GPUs: their names keep the code and carry an assumed memory (the loader needs
  one for ``nvidia.com/gpu.memory``; no request of the trace depends on it, shares are ``gpu_milli``).
- **Pods**: every pod is a one-pod job, in creation order (``fraction`` keeps every n-th), with its real
  request: ``num_gpu`` whole GPUs, or on one GPU ``gpu_milli`` / 1000 as ``gpus_per_pod`` below 1 (a KAI
  share), ``cpu_milli`` as ``cpu_per_pod`` and ``memory_mib`` as ``memory_per_pod`` (a request of 0 is
  written as the smallest quantity, ``1m`` / ``1Mi``: the format has no zero request). Pods without GPUs
  are jobs with ``gpus_per_pod: 0``: they take CPU and memory of the GPU nodes.
- **Time**: the trace spans about 150 days; the scenario spans ``hours``. Creation times from the moment
  the trace's observation starts (its earliest ``deletion_time``: every listed pod was alive then) to the
  last creation map linearly onto the scenario, ending ``tail`` before its end so the last arrivals can
  still raise their alerts; pods created before that moment arrive at the start, in creation order. As in
  the ATC '23 replay, a pod stays once placed (no ``runtime``): the cluster fills up to the trace's demand.
- Not carried over: ``gpu_spec`` (empty throughout the default list), ``qos`` and ``pod_phase`` (the
  simulator decides what runs; all jobs are preemptible training work of one project, as the replay has
  no queues).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
# The trace's model codes as GPU feature discovery names the product (nvidia.com/gpu.product).
PRODUCTS = {
    "A10": "NVIDIA-A10",
    "T4": "Tesla-T4",
    "P100": "Tesla-P100-PCIE-16GB",
    "V100M16": "Tesla-V100-SXM2-16GB",
    "V100M32": "Tesla-V100-SXM2-32GB",
    # Undisclosed (the trace's README): the code kept, the memory assumed.
    "G1": "Alibaba-G1-32GB",
    "G2": "Alibaba-G2-32GB",
    "G3": "Alibaba-G3-32GB",
}


class TraceError(ValueError):
    """A CSV that is not the trace's format: names the file, the line and what is wrong."""


@dataclass(frozen=True)
class Shape:
    model: str
    gpus: int
    cpu_milli: int
    memory_mib: int

    @property
    def pool(self) -> str:
        return f"{self.model.lower()}-{self.gpus}g-{self.cpu_milli // 1000}c-{self.memory_mib // 1024}g"


@dataclass(frozen=True)
class Pod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    creation_time: int
    deletion_time: int | None


def _rows(path: Path, columns: tuple[str, ...]) -> Iterable[tuple[int, dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(
                f"{path}: line 1: missing column(s) {', '.join(missing)} (expected {','.join(columns)})"
            )
        for row in reader:
            yield reader.line_num, row


def _int(path: Path, line: int, row: dict[str, str], key: str, *, optional: bool = False) -> int | None:
    value = (row.get(key) or "").strip()
    if value == "" and optional:
        return None
    try:
        out = int(value)
    except ValueError:
        raise TraceError(f"{path}: line {line}: {key} is {value!r}, expected a whole number") from None
    if out < 0:
        raise TraceError(f"{path}: line {line}: {key} is {out}, expected ≥ 0")
    return out


def read_nodes(path: Path) -> list[tuple[str, Shape]]:
    """GPU nodes of the node list, in file order (nodes without GPUs are skipped)."""
    out = []
    for line, row in _rows(path, NODE_COLUMNS):
        gpus = _int(path, line, row, "gpu")
        if not gpus:
            continue
        model = (row["model"] or "").strip()
        if model not in PRODUCTS:
            raise TraceError(
                f"{path}: line {line}: GPU model {model!r} is not one of the trace's ({', '.join(PRODUCTS)})"
            )
        cpu, mem = _int(path, line, row, "cpu_milli"), _int(path, line, row, "memory_mib")
        if not cpu or not mem:
            raise TraceError(f"{path}: line {line}: a GPU node needs cpu_milli and memory_mib above 0")
        out.append((row["sn"], Shape(model, int(gpus), int(cpu), int(mem))))
    if not out:
        raise TraceError(f"{path}: no GPU node")
    return out


def read_pods(path: Path) -> list[Pod]:
    """Pods of the pod list, in creation order (ties in file order)."""
    out = []
    for line, row in _rows(path, POD_COLUMNS):
        num_gpu = int(_int(path, line, row, "num_gpu") or 0)
        gpu_milli = int(_int(path, line, row, "gpu_milli") or 0)
        if num_gpu > 1 and gpu_milli not in (0, 1000):
            raise TraceError(
                f"{path}: line {line}: gpu_milli {gpu_milli} with num_gpu {num_gpu} (shares are on one GPU)"
            )
        if num_gpu == 1 and not 0 < gpu_milli <= 1000:
            raise TraceError(f"{path}: line {line}: gpu_milli {gpu_milli} for one GPU, expected 1–1000")
        out.append(
            Pod(
                name=row["name"],
                cpu_milli=int(_int(path, line, row, "cpu_milli") or 0),
                memory_mib=int(_int(path, line, row, "memory_mib") or 0),
                num_gpu=num_gpu,
                gpu_milli=gpu_milli,
                creation_time=int(_int(path, line, row, "creation_time") or 0),
                deletion_time=_int(path, line, row, "deletion_time", optional=True),
            )
        )
    if not out:
        raise TraceError(f"{path}: no pod")
    out.sort(key=lambda p: p.creation_time)  # stable: ties keep file order
    return out


def _slug(name: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    return out or "pod"


def shape_counts(nodes: list[tuple[str, Shape]], fraction: float) -> dict[Shape, int]:
    """Nodes per shape kept: ``fraction`` of each, rounded half up, at least one (first-seen shape order)."""
    counts: dict[Shape, int] = {}
    for _sn, shape in nodes:
        counts[shape] = counts.get(shape, 0) + 1
    return {s: max(1, math.floor(n * fraction + 0.5)) for s, n in counts.items()}


def scenario_text(
    nodes: list[tuple[str, Shape]],
    pods: list[Pod],
    *,
    fraction: float = 1.0,
    hours: int = 6,
    tail_s: int = 1800,
    seed: int = 2023,
    name: str | None = None,
) -> str:
    """The scenario (YAML text) of the trace, as the module docstring describes."""
    if not 0 < fraction <= 1:
        raise TraceError(f"fraction {fraction}: expected 0 < fraction ≤ 1")
    span = hours * 3600 - tail_s
    if span <= 0:
        raise TraceError(f"{hours} h minus a {tail_s} s tail leaves no time for arrivals")
    counts = shape_counts(nodes, fraction)
    every = max(1, round(1 / fraction))
    kept = pods[::every]
    observed = min(
        (p.deletion_time for p in pods if p.deletion_time is not None), default=pods[0].creation_time
    )
    lo = min(observed, kept[-1].creation_time)
    width = max(1, kept[-1].creation_time - lo)
    total_gpus = sum(s.gpus * n for s, n in counts.items())
    label = name or ("openb-trace" if fraction == 1 else f"openb-trace-{round(fraction * 100)}pct")
    lines = [
        "format: 1",
        f"name: {label}",
        "summary: >",
        f"  Alibaba cluster-trace-gpu-v2023 (openb): {sum(counts.values())} GPU nodes of {len(counts)} shapes,",
        f"  {len(kept)} pods in creation order with their real requests, replayed over {hours} h.",
        "start: 2026-11-29T00:00:00Z",
        f"duration: {hours}h",
        f"seed: {seed}",
        "cluster:",
        "  name: openb",
        "  scheduler: kai",
        "  nodepools:",
    ]
    for s, n in counts.items():
        lines.append(
            f"    - {{name: {s.pool}, nodes: {n}, gpus_per_node: {s.gpus}, gpu_product: {PRODUCTS[s.model]}, "
            f"sharing: true, cpu: {s.cpu_milli}m, memory: {s.memory_mib}Mi}}"
        )
    lines += ["projects:", f"  - {{name: openb, quota: {{gpu: {total_gpus}}}}}", "jobs:"]
    seen: set[str] = set()
    for p in kept:
        job = _slug(p.name)
        if job in seen:
            raise TraceError(f"pod name {p.name!r} appears twice")
        seen.add(job)
        at = 0 if p.creation_time <= lo else round((p.creation_time - lo) * span / width)
        if p.num_gpu == 1 and p.gpu_milli < 1000:
            gpus = f"{p.gpu_milli / 1000:g}"
        else:
            gpus = str(p.num_gpu)
        lines.append(
            f"  - {{name: {job}, project: openb, submit: {at}s, pods: 1, gpus_per_pod: {gpus}, "
            f"cpu_per_pod: {max(1, p.cpu_milli)}m, memory_per_pod: {max(1, p.memory_mib)}Mi}}"
        )
    lines += ["alerts:", "  - {name: GPUJobPendingTooLong, for: 15m}"]
    return "\n".join(lines) + "\n"


class TraceOptions(TypedDict, total=False):
    """``scenario_text``'s keywords."""

    fraction: float
    hours: int
    tail_s: int
    seed: int
    name: str | None


def trace_scenario(nodes_csv: str | Path, pods_csv: str | Path, **kwargs: Unpack[TraceOptions]) -> str:
    """Read the two CSVs and return the scenario text (keywords as ``scenario_text``)."""
    return scenario_text(read_nodes(Path(nodes_csv)), read_pods(Path(pods_csv)), **kwargs)
