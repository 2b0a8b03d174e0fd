"""Result types shared by the scheduler-message parsers.

A parse is a *reading* of what the scheduler said, not a diagnosis: it keeps the
scheduler's own words (`text`) next to each classified reason so a page can cite
them, and it never invents a reason the message does not contain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

#
# Sources
#
SOURCE_KUBE_SCHEDULER = "kube-scheduler"
SOURCE_KUEUE = "kueue"
SOURCE_KAI = "kai"
SOURCE_VOLCANO = "volcano"
SOURCE_HAMI = "hami"  # HAMi's scheduler extender (GPU sharing): per-card fit reasons
SOURCE_CLUSTER_AUTOSCALER = "cluster-autoscaler"  # NotTriggerScaleUp / TriggeredScaleUp events
SOURCE_UNKNOWN = "unknown"

# Sources whose messages are about queues, quotas and gangs (they carry `cause`).
QUEUE_LEVEL_SOURCES = (SOURCE_KUEUE, SOURCE_KAI, SOURCE_VOLCANO)

#
# Node-level reason codes (kube-scheduler, and KAI fit errors)
#
INSUFFICIENT_GPU = "insufficient_gpu"
INSUFFICIENT_CPU = "insufficient_cpu"
INSUFFICIENT_MEMORY = "insufficient_memory"
INSUFFICIENT_OTHER_RESOURCE = "insufficient_other_resource"
UNTOLERATED_TAINT = "untolerated_taint"
NODE_SELECTOR_MISMATCH = "node_selector_mismatch"
AFFINITY_MISMATCH = "affinity_mismatch"
ANTI_AFFINITY = "anti_affinity"
UNSCHEDULABLE_NODE = "unschedulable_node"
VOLUME_BINDING = "volume_binding"
VOLUME_NODE_AFFINITY = "volume_node_affinity"
# NodeVolumeLimits / MaxVolumeCount: the node's attach limit for a volume driver is used up.
# Not volume binding (the claims are fine) and not a GPU shortage.
VOLUME_NODE_LIMIT = "volume_node_limit"
# Pre-1.13 predicates "node(s) had disk/memory/pid pressure" (CheckNodeDiskPressure...).
# The node is Ready; since TaintNodesByCondition the same state is the
# node.kubernetes.io/*-pressure taint, which classifies as an untolerated taint.
NODE_PRESSURE = "node_pressure"
PORTS = "ports"
TOO_MANY_PODS = "too_many_pods"
TOPOLOGY_SPREAD = "topology_spread"
NODE_NOT_READY = "node_not_ready"
NO_NODES = "no_nodes"  # "no nodes available to schedule pods": the scheduler knows no node at all
# HAMi per-card reasons: the node's GPUs are not the type/UUID/mode the pod asks for
# (CardTypeMismatch, CardUuidMismatch, CardNotFoundCustomFilterRule, ModeNotFit).
DEVICE_MISMATCH = "device_mismatch"
# HAMi: the node's GPUs are unhealthy, cordoned in HAMi, or not registered with it
# (CardNotHealth, CardCordoned, "node unregistered").
GPU_UNAVAILABLE = "gpu_unavailable"
# HAMi ResourceQuotaNotFit: the namespace ResourceQuota on GPU memory/cores is used up.
RESOURCE_QUOTA = "resource_quota"
# cluster-autoscaler, per node group (counts are node groups, not nodes)
MAX_NODE_GROUP_SIZE = "max_node_group_size"  # "max node group size reached" (old: "max limit reached")
MAX_CLUSTER_RESOURCES = "max_cluster_resources"  # "max cluster cpu, memory limit reached"
SCALE_UP_BACKOFF = "scale_up_backoff"  # "in backoff after failed scale-up"
NODE_GROUP_NOT_READY = "node_group_not_ready"  # "not ready for scale-up"
SCALE_UP_TRIGGERED = "scale_up_triggered"  # TriggeredScaleUp: a node group is growing for the pod
OTHER = "other"

NODE_REASON_CODES: tuple[str, ...] = (
    INSUFFICIENT_GPU,
    INSUFFICIENT_CPU,
    INSUFFICIENT_MEMORY,
    INSUFFICIENT_OTHER_RESOURCE,
    UNTOLERATED_TAINT,
    NODE_SELECTOR_MISMATCH,
    AFFINITY_MISMATCH,
    ANTI_AFFINITY,
    UNSCHEDULABLE_NODE,
    VOLUME_BINDING,
    VOLUME_NODE_AFFINITY,
    PORTS,
    TOO_MANY_PODS,
    TOPOLOGY_SPREAD,
    NODE_NOT_READY,
    NO_NODES,
    VOLUME_NODE_LIMIT,
    NODE_PRESSURE,
    DEVICE_MISMATCH,
    GPU_UNAVAILABLE,
    RESOURCE_QUOTA,
    MAX_NODE_GROUP_SIZE,
    MAX_CLUSTER_RESOURCES,
    SCALE_UP_BACKOFF,
    NODE_GROUP_NOT_READY,
    SCALE_UP_TRIGGERED,
    OTHER,
)

#
# Preemption-tail reason codes (in addition to the node-level codes above)
#
NO_VICTIMS = "no_victims"
PREEMPTION_NOT_HELPFUL = "preemption_not_helpful"
PREEMPTION_NOT_ELIGIBLE = "preemption_not_eligible"

#
# Queue-level causes (Kueue, KAI)
#
CAUSE_QUOTA_EXHAUSTED = "quota_exhausted"
CAUSE_EXCEEDS_MAX_CAPACITY = "exceeds_max_capacity"
CAUSE_FLAVOR_MISMATCH = "flavor_mismatch"
CAUSE_QUEUE_MISSING_OR_INACTIVE = "queue_missing_or_inactive"
CAUSE_PREEMPTED = "preempted"
CAUSE_WAITING_FOR_PREEMPTION = "waiting_for_preemption"
# KAI only: the queue admits the job but no node (or node group) has room for its pods,
# including "Max GPU resources available in a single node in the X node-pool is topped at N".
CAUSE_INSUFFICIENT_CAPACITY = "insufficient_capacity"
# Kueue WaitForPodsReady: admitted, but its pods did not all become ready in time; evicted and requeued.
CAUSE_PODS_READY_TIMEOUT = "pods_ready_timeout"
# Kueue PodsReady=False: admitted and waiting for its pods to become ready ("Not all pods are ready").
CAUSE_WAITING_FOR_PODS_READY = "waiting_for_pods_ready"
# Kueue: spec.active=false, set by Kueue (re-queuing limit, maximum execution time,
# rejected admission check; see `mechanism`) or by a person. It will not be admitted again by itself.
CAUSE_DEACTIVATED = "deactivated"
# Kueue AdmissionChecks in Retry/Rejected state (e.g. ProvisioningRequest failed).
CAUSE_ADMISSION_CHECK = "admission_check"
# Volcano gang: fewer than minAvailable tasks can be placed, without a node-level reason given.
CAUSE_GANG_UNSCHEDULABLE = "gang_unschedulable"
CAUSE_OTHER = "other"

CAUSES: tuple[str, ...] = (
    CAUSE_QUOTA_EXHAUSTED,
    CAUSE_EXCEEDS_MAX_CAPACITY,
    CAUSE_FLAVOR_MISMATCH,
    CAUSE_QUEUE_MISSING_OR_INACTIVE,
    CAUSE_PREEMPTED,
    CAUSE_WAITING_FOR_PREEMPTION,
    CAUSE_INSUFFICIENT_CAPACITY,
    CAUSE_PODS_READY_TIMEOUT,
    CAUSE_WAITING_FOR_PODS_READY,
    CAUSE_DEACTIVATED,
    CAUSE_ADMISSION_CHECK,
    CAUSE_GANG_UNSCHEDULABLE,
    CAUSE_OTHER,
)

#
# Mechanisms: which rule a queue-level cause came from, when the message names it
#
# Kueue preemption ("... due to prioritization in the ClusterQueue", "reclamation within the cohort", ...)
MECH_PREEMPT_IN_CLUSTER_QUEUE = "in_cluster_queue"
MECH_PREEMPT_COHORT_RECLAMATION = "cohort_reclamation"
MECH_PREEMPT_COHORT_RECLAIM_WHILE_BORROWING = "cohort_reclaim_while_borrowing"
MECH_PREEMPT_FAIR_SHARING = "fair_sharing"
# Kueue deactivation ("The workload is deactivated due to ...")
MECH_REQUEUING_LIMIT = "requeuing_limit_exceeded"
MECH_MAX_EXECUTION_TIME = "maximum_execution_time_exceeded"
MECH_ADMISSION_CHECK_REJECTED = "admission_check_rejected"
MECH_ADMISSION_CHECK_RETRY = "admission_check_retry"


@dataclass(frozen=True)
class Reason:
    """One reason the scheduler gave, with the number of nodes it applies to.

    `count` is None when the scheduler did not say how many nodes (queue-level
    reasons); `taint` is `{"key": ..., "value": ...}` for taint reasons, because
    the message names the taint but not its effect; `flavor` names the Kueue
    ResourceFlavor a queue-level reason is about.
    """

    code: str
    count: int | None
    resource: str | None
    text: str
    taint: dict[str, str] | None = None
    flavor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "code": self.code,
            "count": self.count,
            "resource": self.resource,
            "text": self.text,
        }
        if self.taint is not None:
            d["taint"] = dict(self.taint)
        if self.flavor is not None:
            d["flavor"] = self.flavor
        return d


@dataclass(frozen=True)
class Preemption:
    """The `preemption:` tail of a FailedScheduling message.

    kube-scheduler appends it only when its PostFilter (preemption) found no
    node where evicting lower-priority pods would make room, so `victims_found`
    is False whenever the tail is present; it exists so callers need not know that.
    """

    total_nodes: int | None
    reasons: list[Reason]
    victims_found: bool
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_nodes": self.total_nodes,
            "reasons": [r.to_dict() for r in self.reasons],
            "victims_found": self.victims_found,
        }


@dataclass
class ParsedMessage:
    """What one scheduler message says, source-detected and classified.

    `cause`, `resource`, `needed` and `numbers` are filled by the queue-level
    parsers (Kueue, KAI, Volcano) only; `to_dict()` leaves them out for the
    node-level sources (kube-scheduler, HAMi, cluster-autoscaler) and unknown
    text so the JSON shape says which kind of reading it is. `mechanism` names
    the rule behind a cause when the message says it (a Kueue preemption's
    "reclamation within the cohort", a deactivation's re-queuing limit) and is
    in the JSON only when known.
    """

    source: str
    total_nodes: int | None = None
    reasons: list[Reason] = field(default_factory=list)
    preemption: Preemption | None = None
    summary: str = ""
    cause: str | None = None
    resource: str | None = None
    needed: int | float | None = None
    numbers: dict[str, int | float] = field(default_factory=dict)
    queue: str | None = None
    text: str = ""
    mechanism: str | None = None

    @property
    def is_queue_level(self) -> bool:
        return self.source in QUEUE_LEVEL_SOURCES

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "source": self.source,
            "total_nodes": self.total_nodes,
            "reasons": [r.to_dict() for r in self.reasons],
            "preemption": self.preemption.to_dict() if self.preemption else None,
            "summary": self.summary,
        }
        if self.is_queue_level:
            d["cause"] = self.cause
            d["resource"] = self.resource
            d["needed"] = self.needed
            d["numbers"] = dict(self.numbers)
            d["queue"] = self.queue
        if self.mechanism is not None:
            d["mechanism"] = self.mechanism
        return d


#
# Small helpers shared by the parsers
#
_NUMBER_RE = re.compile(r"^-?\d+(?:\.\d+)?$")


def to_number(raw: str | None) -> int | float | None:
    """'8' -> 8, '0.5' -> 0.5, '10Gi'/'500m'/None -> None (a quantity, not a count)."""
    if raw is None:
        return None
    s = raw.strip()
    if not _NUMBER_RE.match(s):
        return None
    value = float(s)
    return int(value) if value.is_integer() else value


def fmt_number(value: int | float | None) -> str:
    if value is None:
        return "?"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def plural(n: int | None, one: str, many: str) -> str:
    return one if n == 1 else many


def normalize(text: str) -> str:
    """Collapse runs of whitespace (events are often wrapped by kubectl or YAML)."""
    return re.sub(r"\s+", " ", text or "").strip()
