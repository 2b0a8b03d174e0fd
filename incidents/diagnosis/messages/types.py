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
SOURCE_UNKNOWN = "unknown"

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
PORTS = "ports"
TOO_MANY_PODS = "too_many_pods"
TOPOLOGY_SPREAD = "topology_spread"
NODE_NOT_READY = "node_not_ready"
NO_NODES = "no_nodes"  # "no nodes available to schedule pods": the scheduler knows no node at all
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
CAUSE_OTHER = "other"

CAUSES: tuple[str, ...] = (
    CAUSE_QUOTA_EXHAUSTED,
    CAUSE_EXCEEDS_MAX_CAPACITY,
    CAUSE_FLAVOR_MISMATCH,
    CAUSE_QUEUE_MISSING_OR_INACTIVE,
    CAUSE_PREEMPTED,
    CAUSE_WAITING_FOR_PREEMPTION,
    CAUSE_INSUFFICIENT_CAPACITY,
    CAUSE_OTHER,
)


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
    parsers (Kueue, KAI) only; `to_dict()` leaves them out for kube-scheduler
    and unknown text so the JSON shape says which kind of reading it is.
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

    @property
    def is_queue_level(self) -> bool:
        return self.source in (SOURCE_KUEUE, SOURCE_KAI)

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
