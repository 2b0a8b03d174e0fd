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

from cause_codes import ALL_CODES

from .gpus import CATALOG
from .kueue import KueueSpec

SCHEDULERS = ("kai", "kueue")
DCGM_LABEL_STYLES = ("classic", "current", "scraped")
JOB_PRIORITIES = ("train", "inference")
# KAI priority values of the two names (its PriorityTrainNumber and PriorityBuildNumber); a job may give a
# number instead, and from NON_PREEMPTIBLE_PRIORITY on it is not preemptible, as KAI decides.
TRAIN_PRIORITY = 50
UNLIMITED = -1  # a KAI queue's deserved quota without bound (its -1): it deserves whatever it asks for
INFERENCE_PRIORITY = 100
NON_PREEMPTIBLE_PRIORITY = 100
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
    "mig",
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
# docs/design.md §8: the cause codes a scenario's `expect` may name, the ones the diagnosis answers with; both
# import them from the top-level package ``cause_codes``, which imports nothing (docs/design.md §3).
DIAGNOSIS_CODES = ALL_CODES

# The GPU catalog (GFD product names, memory, MIG profiles) lives in gpus.py; this view of it is kept for
# callers that only need the memory.
GPU_MEMORY_MIB = {name: m.memory_mib for name, m in CATALOG.items()}


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
    mig: dict[str, int] | None = None  # MIG layout of every GPU (profile -> instances), None = MIG disabled
    sharing: bool = False  # KAI GPU sharing (gpu-fraction / gpu-memory) allowed on this pool
    cpu_millis: int | None = None  # allocatable CPU per node, None = large enough never to bind
    memory_bytes: int | None = None  # allocatable memory per node, None = same


@dataclass(frozen=True)
class DepartmentSpec:
    """Queues above projects: a KAI parent Queue, or a Kueue Cohort its projects' ClusterQueues belong to."""

    name: str
    quota_gpus: int | float  # KAI: -1 (unlimited) or a fraction too
    limit_gpus: int | None
    line: int = 0
    over_quota_weight: int = 1  # KAI: its share of the spare among the top-level queues
    limit_cpu_millis: int | None = None  # KAI: the Queue's CPU limit
    limit_memory_bytes: int | None = None  # KAI: the Queue's memory limit
    quota_cpu_millis: int | None = None  # KAI: the Queue's deserved CPU; None is unlimited (-1)
    quota_memory_bytes: int | None = None  # KAI: the Queue's deserved memory; None is unlimited (-1)


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
    quota_gpus: int | float  # KAI: -1 (unlimited) or a fraction too
    limit_gpus: int | None
    over_quota_weight: int = 1
    priority: int = 0
    line: int = 0
    department: str | None = None
    limit_cpu_millis: int | None = None  # KAI: the Queue's CPU limit
    limit_memory_bytes: int | None = None  # KAI: the Queue's memory limit
    quota_cpu_millis: int | None = None  # KAI: the Queue's deserved CPU; None is unlimited (-1)
    quota_memory_bytes: int | None = None  # KAI: the Queue's deserved memory; None is unlimited (-1)


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
    gpus_per_pod: int | float  # a float below 1 is a GPU share (gpu-fraction); with mig_profile: instances
    priority: str = "train"
    runtime_s: int | None = None
    image: str = "nvcr.io/nvidia/pytorch:24.08-py3"
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    sm_activity: float = 0.7
    failure: FailureSpec | None = None
    generated_by: str | None = None  # name_prefix of the generate entry, None when written out
    line: int = 0
    gpu_memory_mib: int | None = (
        None  # a share sized by GPU memory (gpu-memory annotation); gpus_per_pod is 0
    )
    mig_profile: str | None = None  # "3g.40gb": gpus_per_pod instances of nvidia.com/mig-3g.40gb per pod
    cpu_millis: int | None = None  # CPU request per pod, None = the default (8 cores per GPU)
    memory_bytes: int | None = None  # memory request per pod, None = the default (64 GiB per GPU)
    priority_value: int | None = None  # `priority` given as a number (KAI's); None = the name's value
    running_on: tuple[str, ...] = ()  # `running_on`: already running at start, pod i on node i

    @property
    def shared(self) -> bool:
        """A GPU share: a fraction below 1 or a GPU memory amount (KAI GPU sharing)."""
        return self.gpu_memory_mib is not None or 0 < self.gpus_per_pod < 1


@dataclass(frozen=True)
class GenerateSpec:
    count: int
    project: str
    pods: int
    gpus_per_pod: tuple[int | float, ...]
    submit_every_s: int
    runtime_s: tuple[int, int]
    name_prefix: str
    line: int = 0
    mig_profile: str | None = None
    cpu_millis: int | None = None
    memory_bytes: int | None = None


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
    at_s: int | None = None  # `at`: judged on the diagnosis in force this long after `start`; None: the first


@dataclass(frozen=True)
class ReferenceSpec:
    """What an outside reference (a scheduler's own test) expects at the end: job -> (state, node or None)."""

    source: str  # where it was transcribed from: path@commit :: test name
    family: str
    what: str
    notes: str
    end_state: dict[str, tuple[str, str | None]]


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
    departments: tuple[DepartmentSpec, ...] = ()
    kueue: KueueSpec | None = None  # ClusterQueues and ResourceFlavors written out (scenario/kueue.py)
    reference: ReferenceSpec | None = None  # an outside reference's end state (scenario/reference.py)

    @property
    def end(self) -> datetime:
        from datetime import timedelta

        return self.start + timedelta(seconds=self.duration_s)

    def project(self, name: str) -> ProjectSpec:
        for p in self.projects:
            if p.name == name:
                return p
        raise KeyError(name)
