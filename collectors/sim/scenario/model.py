"""The parsed, validated form of a scenario file (docs/scenarios.md §2, format 1).

These are plain frozen records: the loader builds them once, the engine reads
them. Offsets and durations are whole seconds; ``start`` is an aware UTC
datetime. Every record keeps the 1-based ``line`` it came from, so that later
errors (and humans) can point back at the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

SCHEDULERS = ("kai", "kueue")
DCGM_LABEL_STYLES = ("classic", "current", "scraped")
JOB_PRIORITIES = ("train", "inference")
FAILURE_KINDS = ("crashloop", "oom_killed", "gpu_oom", "image_pull")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
EVENT_ACTIONS = (
    "quota",
    "request",
    "image",
    "xid",
    "ecc",
    "thermal",
    "node_ready",
    "cordon",
    "uncordon",
    "taint",
    "device_plugin",
    "add_nodes",
    "resolve",
)
ALERT_NAMES = (
    "GPUJobPendingTooLong",
    "GPUXidError",
    "GPUMissing",
    "NodeNotReady",
    "PodCrashLooping",
    "GPUIdleAllocated",
    "GPUHighTemperature",
    "GPUECCDoubleBitError",
)
# docs/design.md §8. A copy of the vocabulary for validating `expect`, not an
# import: the simulator imports nothing of the pipeline (docs/design.md §3).
DIAGNOSIS_CODES = (
    "gpu_capacity_shortage",
    "gpu_fragmentation",
    "untolerated_taint",
    "node_selector_mismatch",
    "project_quota_exhausted",
    "queue_priority",
    "request_size_changed",
    "gpu_node_unavailable",
    "gpu_xid_fault",
    "gpu_ecc_errors",
    "gpu_missing",
    "device_plugin_unhealthy",
    "gpu_thermal_throttling",
    "nvlink_errors",
    "crashloop_config_error",
    "oom_killed",
    "gpu_oom",
    "image_pull_error",
    "preempted",
    "idle_gpu_allocation",
    "over_requested",
    "recent_change",
)

# Framebuffer size in MiB as nvidia-smi / GPU feature discovery report it
# (nvidia.com/gpu.memory). Products not listed fall back to the "<n>GB" in the name.
GPU_MEMORY_MIB = {
    "NVIDIA-H100-80GB-HBM3": 81559,
    "NVIDIA-H100-NVL": 95830,
    "NVIDIA-H200": 143771,
    "NVIDIA-B200": 183359,
    "NVIDIA-A100-SXM4-80GB": 81920,
    "NVIDIA-A100-SXM4-40GB": 40960,
    "NVIDIA-A100-80GB-PCIe": 81920,
    "NVIDIA-A100-PCIE-40GB": 40960,
    "NVIDIA-L40S": 46068,
    "NVIDIA-L4": 23034,
    "NVIDIA-A10G": 23028,
    "Tesla-T4": 15360,
    "Tesla-V100-SXM2-32GB": 32768,
}


@dataclass(frozen=True)
class NodePoolSpec:
    name: str
    nodes: int
    gpus_per_node: int
    gpu_product: str
    gpu_memory_mib: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    line: int = 0


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    scheduler: str  # kai | kueue
    dcgm_labels: str  # classic | current | scraped
    nodepools: tuple[NodePoolSpec, ...]
    line: int = 0


@dataclass(frozen=True)
class ProjectSpec:
    name: str
    namespace: str
    quota_gpus: int
    limit_gpus: int | None
    over_quota_weight: int = 1
    priority: int = 0
    line: int = 0


@dataclass(frozen=True)
class FailureSpec:
    kind: str
    log: str | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class JobSpec:
    name: str
    project: str
    submit_s: int
    pods: int
    gpus_per_pod: int
    priority: str = "train"
    runtime_s: int | None = None
    image: str = "nvcr.io/nvidia/pytorch:24.08-py3"
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    sm_activity: float = 0.7
    failure: FailureSpec | None = None
    generated_by: str | None = None  # name_prefix of the generate entry, None when written out
    line: int = 0


@dataclass(frozen=True)
class GenerateSpec:
    count: int
    project: str
    pods: int
    gpus_per_pod: tuple[int, ...]
    submit_every_s: int
    runtime_s: tuple[int, int]
    name_prefix: str
    line: int = 0


@dataclass(frozen=True)
class EventSpec:
    at_s: int
    action: str  # one of EVENT_ACTIONS
    args: dict[str, Any]  # the action's mapping, validated and normalised (durations in s)
    actor: str | None = None
    line: int = 0


@dataclass(frozen=True)
class AlertRuleSpec:
    name: str
    for_s: int = 0
    line: int = 0


@dataclass(frozen=True)
class ExpectSpec:
    alert: str
    subject: dict[str, Any]  # {"job": n} | {"node": n} | {"gpu": {"node": n, "index": i}} | {"project": n}
    top: str | None = None
    supported: tuple[str, ...] = ()
    not_supported: tuple[str, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class Scenario:
    format: int
    name: str
    summary: str
    start: datetime
    duration_s: int
    seed: int
    cluster: ClusterSpec
    projects: tuple[ProjectSpec, ...]
    jobs: tuple[JobSpec, ...]  # written-out jobs followed by generated ones, expanded from the seed
    generate: tuple[GenerateSpec, ...]
    events: tuple[EventSpec, ...]  # sorted by at_s, stable
    alerts: tuple[AlertRuleSpec, ...]
    expect: tuple[ExpectSpec, ...]
    source: str | None = None  # file path, when loaded from one

    @property
    def end(self) -> datetime:
        from datetime import timedelta

        return self.start + timedelta(seconds=self.duration_s)

    def project(self, name: str) -> ProjectSpec:
        for p in self.projects:
            if p.name == name:
                return p
        raise KeyError(name)
