"""The simulated world's state: the contract between the engine and the servers.

The engine (``engine.py``) owns and mutates these objects tick by tick; the
servers (Kubernetes API, Prometheus, Run:ai, Alertmanager sender) only read
them and render real wire formats. Nothing here knows about rcaweb's pipeline:
``simulator`` is the world, not the observer (docs/design.md §3).

Times are timezone-aware UTC datetimes of the *simulated* clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class SimGPU:
    """One physical GPU on a node."""

    index: int
    uuid: str  # "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", stable for a seed
    pci_bus_id: str  # "00000000:1A:00.0"
    present: bool = True  # False once the GPU fell off the bus (Xid 79): DCGM stops reporting it
    xid_last: int = 0  # DCGM_FI_DEV_XID_ERRORS holds only the last Xid
    xid_at: datetime | None = None
    ecc_sbe_total: int = 0
    ecc_dbe_total: int = 0
    nvlink_errors_total: int = 0
    temp_override_c: float | None = None  # thermal event; None = modelled from load
    pod: str | None = None  # "namespace/name" of the pod holding it, None when free
    # Added by the engine (see engine/ docs):
    healthy: bool = (
        True  # device plugin health: False after a critical Xid (48, 79, 74, ...) or a DBE, until resolve
    )
    fault: str | None = None  # why it is unhealthy: "xid-79", "xid-48", "ecc-dbe", ... None when healthy
    fault_at: datetime | None = None
    ecc_dbe_at: datetime | None = None  # last time the DBE counter moved
    nvlink_errors_at: datetime | None = None  # last time the NVLink CRC counter moved
    # KAI GPU sharing: "ns/pod" -> fraction of the GPU (a gpu-memory share as its share of the memory).
    # A shared GPU is held by KAI's reservation pod (``reservation``, "runai-reservation/<name>"), never by
    # ``pod``; the sum of shares never exceeds 1.
    shares: dict[str, float] = field(default_factory=dict)
    reservation: str | None = None
    mig: list[SimMigInstance] = field(default_factory=list)  # MIG instances, empty when MIG is disabled

    @property
    def shared_fraction(self) -> float:
        return sum(self.shares.values())


@dataclass
class SimMigInstance:
    """One MIG GPU instance (GPU_I_ID) of a partitioned GPU, and the pod using it."""

    profile: str  # "3g.40gb"
    gi_id: int  # GPU instance id as nvidia-smi / DCGM number it
    memory_mib: int
    compute_slices: int
    pod: str | None = None  # "ns/pod"


@dataclass
class SimNode:
    name: str
    nodepool: str
    gpu_product: str  # "NVIDIA-H100-80GB-HBM3" as GPU feature discovery writes it
    gpu_memory_mib: int
    labels: dict[str, str]
    taints: list[dict[str, str]]  # Kubernetes form: {key, value, effect}
    gpus: list[SimGPU]
    created_at: datetime
    uid: str
    ready: bool = True
    ready_changed_at: datetime | None = None
    unschedulable: bool = False  # cordoned
    device_plugin_healthy: bool = True
    resource_version: int = 0

    @property
    def capacity_gpus(self) -> int:
        """status.capacity nvidia.com/gpu: under the mixed MIG strategy, GPUs with MIG enabled are not counted."""
        if self.mig_layout:
            return 0
        return sum(1 for g in self.gpus if g.present)

    @property
    def allocatable_gpus(self) -> int:
        """status.allocatable nvidia.com/gpu: present GPUs the device plugin reports healthy."""
        if not self.device_plugin_healthy or self.mig_layout:
            return 0
        return sum(1 for g in self.gpus if g.present and g.healthy)

    # Added by the engine. ``taints`` is spec.taints: the scenario's taints plus those the node
    # lifecycle controller adds, node.kubernetes.io/unschedulable:NoSchedule while cordoned and
    # node.kubernetes.io/unreachable NoSchedule + NoExecute while NotReady (Ready Unknown).
    ready_reason: str = "KubeletReady"  # Ready condition reason: KubeletReady | NodeStatusUnknown
    device_plugin_changed_at: datetime | None = None
    index: int = 0  # the node's number in its pool (h100-03 -> 3)
    # Format 1 additions. cpu/memory: allocatable, None = the rendered default, never binding.
    sharing: bool = False  # KAI GPU sharing allowed on this node's pool
    cpu_millis: int | None = None
    memory_bytes: int | None = None
    mig_layout: dict[str, int] | None = None  # per GPU; None = MIG disabled
    mig_config: str = ""  # nvidia.com/mig.config (mig-parted config name), "" without MIG support
    mig_state: str = ""  # nvidia.com/mig.config.state: success | pending | failed ("" = never configured)
    mig_ready_at: datetime | None = None  # a pending repartition completes then

    @property
    def mig_enabled(self) -> bool:
        return bool(self.mig_layout)

    def mig_allocatable(self) -> dict[str, int]:
        """nvidia.com/mig-<profile> allocatable: instances of present, healthy GPUs (none while repartitioning)."""
        out: dict[str, int] = {}
        if not self.mig_layout or self.mig_state == "pending" or not self.device_plugin_healthy:
            return {p: 0 for p in self.mig_layout or {}}
        for p in self.mig_layout:
            out[p] = sum(1 for g in self.gpus if g.present and g.healthy for i in g.mig if i.profile == p)
        return out

    def mig_capacity(self) -> dict[str, int]:
        if not self.mig_layout:
            return {}
        if self.mig_state == "pending":
            return {p: 0 for p in self.mig_layout}
        return {
            p: sum(1 for g in self.gpus if g.present for i in g.mig if i.profile == p)
            for p in self.mig_layout
        }


@dataclass
class SimProject:
    """One project = one queue (KAI Queue, or Kueue ClusterQueue + LocalQueue)."""

    name: str
    namespace: str
    quota_gpus: int | float  # KAI: -1 (unlimited) or a fraction too
    limit_gpus: int | None  # None = no limit
    over_quota_weight: int
    priority: int
    created_at: datetime
    uid: str
    limit_cpu_millis: int | None = None  # KAI: the Queue's CPU and memory limits, None = none
    limit_memory_bytes: int | None = None
    quota_cpu_millis: int | None = None  # KAI: the Queue's deserved CPU and memory, None = unlimited (-1)
    quota_memory_bytes: int | None = None
    resource_version: int = 0
    last_manager: str = "kai-operator"  # managedFields manager of the last write (the event's actor)
    # Added by the engine, recomputed every tick (KAI Queue status / Kueue ClusterQueue status):
    allocated_gpus: float = 0  # GPUs held by this project's running pods (shares count their fraction)
    allocated_nonpreemptible_gpus: float = 0  # of which inference (non-preemptible)
    requested_gpus: float = 0  # allocated + pending requests
    fair_share_gpus: float = 0.0  # KAI: deserved + share of spare by over_quota_weight; Kueue: nominal
    pending_workloads: int = 0
    admitted_workloads: int = 0
    changed_at: datetime | None = None  # last quota/limit change
    department: str | None = None  # parent queue / cohort


@dataclass
class SimDepartment:
    """A department: KAI parent Queue of its projects' queues, or the Kueue Cohort of their ClusterQueues."""

    name: str
    quota_gpus: int | float  # KAI: -1 (unlimited) or a fraction too
    limit_gpus: int | None
    created_at: datetime
    uid: str
    resource_version: int = 0
    last_manager: str = "kai-operator"
    allocated_gpus: float = 0  # sum of its projects' allocation, recomputed every tick
    requested_gpus: float = 0
    changed_at: datetime | None = None
    over_quota_weight: int = 1
    limit_cpu_millis: int | None = None  # KAI: the parent Queue's CPU and memory limits, None = none
    limit_memory_bytes: int | None = None
    quota_cpu_millis: int | None = None  # KAI: the parent Queue's deserved CPU and memory, None = unlimited
    quota_memory_bytes: int | None = None


@dataclass
class SimPod:
    name: str
    namespace: str
    job: str  # owning job name
    index: int  # gang member index
    uid: str
    created_at: datetime
    gpus_requested: int | float
    image: str
    node: str | None = None
    gpu_indices: list[int] = field(default_factory=list)
    phase: str = "Pending"  # Pending | Running | Succeeded | Failed
    scheduled_message: str | None = None  # PodScheduled=False message while unschedulable
    started_at: datetime | None = None
    finished_at: datetime | None = None
    # containerStatuses[0].state / lastState in Kubernetes form, e.g.
    # {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container=..."}}
    container_state: dict[str, Any] = field(default_factory=dict)
    last_state: dict[str, Any] = field(default_factory=dict)
    restart_count: int = 0
    logs: list[str] = field(default_factory=list)  # current container's lines, with "2026-..Z " timestamps
    previous_logs: list[str] = field(default_factory=list)  # last terminated container
    deleted_at: datetime | None = None
    resource_version: int = 0
    # Added by the engine:
    generation: int = 1  # the job generation this pod belongs to (request events bump it)
    priority_class: str = "train"
    ready: bool = False
    scheduled_at: datetime | None = None
    scheduled_reason: str | None = None  # PodScheduled=False reason: "Unschedulable" (or "SchedulerError")
    reason: str | None = None  # status.reason: "Preempted", "NodeLost", "Evicted", "DeadlineExceeded"...
    message: str | None = None  # status.message
    deletion_reason: str | None = (
        None  # why it was deleted: preempted | node-lost | resubmitted | job-finished ...
    )
    next_restart_at: datetime | None = None  # crash loop: when kubelet restarts the container
    # Format 1 additions. gpus_requested is what the pod counts in its queue (a fraction for a share, the
    # profile's "<n>g" per MIG instance under KAI); these say what it asks the node for.
    gpu_fraction: float | None = None  # gpu-fraction annotation
    gpu_memory_mib: int | None = None  # gpu-memory annotation
    mig_profile: str | None = None
    mig_count: int = 0  # instances of nvidia.com/mig-<profile>
    mig_instances: list[tuple[int, int]] = field(default_factory=list)  # (gpu index, GPU_I_ID) once bound
    cpu_millis: int = 0
    memory_bytes: int = 0
    reservation_for: str | None = None  # KAI reservation pods: the GPU UUID it holds for shares

    @property
    def shared(self) -> bool:
        return self.gpu_fraction is not None or self.gpu_memory_mib is not None


@dataclass
class SimJob:
    name: str
    project: str
    namespace: str
    uid: str
    submit_at: datetime
    pods: int
    gpus_per_pod: int | float  # what one pod counts in its queue (whole GPUs, a fraction, MIG "<n>g" units)
    priority_class: str  # "train" (preemptible) | "inference" (not preemptible)
    runtime_s: int | None
    image: str
    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    sm_activity: float
    failure: dict[str, Any] | None
    generation: int = 1  # bumped when a request event resubmits the job
    state: str = "Waiting"  # Waiting (not yet submitted) | Pending | Running | Succeeded | Failed
    started_at: datetime | None = None
    finished_at: datetime | None = None
    preempted_count: int = 0
    resource_version: int = 0
    # Added by the engine:
    podgroup: str = ""  # KAI PodGroup name ("pg-<job>-<uid8>") or Kueue Workload name ("job-<job>-<hash5>")
    submitted_by: str | None = None
    pending_since: datetime | None = None  # when its current pods (or workload) started waiting
    admitted: bool = False  # quota reserved (Kueue Admitted / KAI allocated within queue policy)
    admitted_at: datetime | None = None
    suspended: bool = False  # Kueue: spec.suspend=true until admitted (no pods exist meanwhile)
    # Why it waits, in the scheduler's own words. KAI: PodGroup UnschedulableOnNodePool condition reason
    # ("Unschedulable") and message; per-reason detail in condition_reasons ([{reason, message}]).
    # Kueue: Workload QuotaReserved=False reason ("Pending") and message. None when not waiting.
    condition_reason: str | None = None
    condition_message: str | None = None
    condition_reasons: list[dict[str, str]] = field(default_factory=list)
    condition_changed_at: datetime | None = None
    queue_position: int | None = (
        None  # 1-based position among the project's waiting jobs, None when not waiting
    )
    last_preempted_at: datetime | None = None
    last_preempted_by: str | None = None  # "namespace/job" of the preemptor
    image_missing: bool = False  # the current image cannot be pulled (failure.kind image_pull)
    history: list[dict[str, Any]] = field(
        default_factory=list
    )  # [{time, field, old, new, actor}] request/image edits
    # Format 1 additions: what one pod asks the nodes for (see SimPod).
    gpu_fraction: float | None = None
    gpu_memory_mib: int | None = None
    mig_profile: str | None = None
    mig_count: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0

    @property
    def shared(self) -> bool:
        return self.gpu_fraction is not None or self.gpu_memory_mib is not None

    @property
    def devices_per_pod(self) -> int:
        """Whole nvidia.com/gpu devices per pod (0 for a share or a MIG request)."""
        if self.shared or self.mig_profile:
            return 0
        return int(self.gpus_per_pod)

    # KAI's priority value (train 50, inference 100 unless the scenario gives a number; 100 and above is
    # not preemptible) and, for a job the scenario starts as running, the node of each pod
    priority_value: int = 50
    running_on: list[str] = field(default_factory=list)
    moved_to: list[str] = field(
        default_factory=list
    )  # consolidation: a node per pod, where the plan found room


@dataclass
class SimEvent:
    """A core/v1 Event as the API server would hold it."""

    uid: str
    name: str  # "<object>.<hex>"
    namespace: str
    involved: dict[str, str]  # {kind, namespace, name, uid, apiVersion}
    reason: str
    message: str
    type: str  # Normal | Warning
    component: str  # default-scheduler | kai-scheduler | kubelet | kueue-admission | job-controller ...
    first_time: datetime
    last_time: datetime
    count: int = 1
    resource_version: int = 0


@dataclass
class SimChange:
    """A change the world made (for the Run:ai audit log and managedFields)."""

    time: datetime
    kind: str  # project | job | node
    target: str
    field: str
    old: Any
    new: Any
    actor: str | None
