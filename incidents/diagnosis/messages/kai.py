"""Parse KAI Scheduler (Run:ai) PodGroup conditions and the events it emits.

Formats read from NVIDIA/KAI-Scheduler (now kai-scheduler/KAI-Scheduler):

- pkg/apis/scheduling/v2alpha2/podgroup_types.go: condition type
  `UnschedulableOnNodePool`, explanation reasons `NonPreemptibleOverQuota`,
  `OverLimit`, `QueueDoesNotExist` (rendered "Reason: message" one per line).
- pkg/scheduler/api/unschedule_info.go:
  "Non-preemptible workload is over quota. Workload requested 8 GPUs, but
  team-a quota is 16 GPUs, while 16 GPUs are already allocated for
  non-preemptible pods. Use a preemptible workload to go over quota." and
  "gpu-queue quota has reached the allowable limit of GPUs. Limit is 8 GPUs,
  currently 6 GPUs allocated and workload requested 4 GPUs" (also CPU cores /
  GB memory variants), plus the preemption/reclaim/consolidation event texts.
- pkg/scheduler/cache/cluster_info/cluster_info.go: "Queue 'q' does not exist".
- pkg/scheduler/k8s_internal/predicates/maxNodeResources.go: "The pod ns/p
  requires GPU: 2, CPU: 0 (cores), memory: 0 (GB), pods: 1. Max GPU resources
  available in a single node in the default node-pool is topped at 1", and
  "No node in the default node-pool has GPU resources".
- pkg/scheduler/api/common_info/{pod,job}_errors.go: "no nodes with enough
  resources were found: 1 node(s) didn't have enough resources: rdma/x.\\n6
  node(s) didn't have enough of mig profile: nvidia.com/mig-1g.5gb.", "Unable to
  schedule podgroup: 2 node-group(s) didn't have enough resources: CPU cores.",
  "Node didn't have enough resources: GPUs, requested: 2, used: 1, capacity: 2".
- pkg/scheduler/cache/status_updater: "Job is not ready for scheduling. Waiting
  for 2 pods, currently 1 exist, 0 are gated".
"""

from __future__ import annotations

import logging
import re

from incidents.diagnosis.messages import types as t
from incidents.diagnosis.messages.classify import classify, kai_resource_name
from incidents.diagnosis.messages.kube_scheduler import describe_reason, ranked

logger = logging.getLogger(__name__)

REASON_CAUSES: dict[str, str | None] = {
    "NonPreemptibleOverQuota": t.CAUSE_QUOTA_EXHAUSTED,
    "OverLimit": t.CAUSE_QUOTA_EXHAUSTED,
    "QueueDoesNotExist": t.CAUSE_QUEUE_MISSING_OR_INACTIVE,
    "UnschedulableOnNodePool": None,
    "PodSchedulingErrors": t.CAUSE_INSUFFICIENT_CAPACITY,
    "NotReady": t.CAUSE_OTHER,
    "StaleJob": t.CAUSE_OTHER,
}

_NUM = r"[0-9]+(?:\.[0-9]+)?"
_UNIT_RESOURCE = {
    "gpus": "gpu",
    "cpu cores": "cpu",
    "cores": "cpu",
    "gb memory": "memory",
    "memory": "memory",
    "gb": "memory",
}

_OVER_QUOTA_RE = re.compile(
    rf"Non-preemptible workload is over quota\.\s*(?:Workload requested (?P<req>{_NUM}) (?P<unit>GPUs|CPU cores|GB memory), "
    rf"but (?P<queue>.+?) quota is (?P<quota>{_NUM}) (?:GPUs|cores|GB), while (?P<alloc>{_NUM}) (?:GPUs|cores|GB) "
    rf"are already allocated for non-preemptible pods\.?)?",
    re.I,
)
_OVER_LIMIT_RE = re.compile(
    rf"(?P<queue>\S+) quota has reached the allowable limit of (?P<unit>GPUs|CPU cores|memory)\.?\s*"
    rf"(?:Limit is (?P<limit>{_NUM}) (?:GPUs|cores|GB), currently (?P<alloc>{_NUM}) (?:GPUs|cores|GB) allocated "
    rf"and workload requested (?P<req>{_NUM})(?: (?:GPUs|cores|GB))?)?",
    re.I,
)
_QUEUE_MISSING_RE = re.compile(r"Queue '(?P<queue>[^']+)' does not exist", re.I)
_MAX_NODE_RE = re.compile(
    rf"(?:The pod (?P<pod>\S+) requires (?P<reqs>.+?)\.\s*)?Max (?P<res>.+?) resources available in a single node "
    rf"in the (?P<pool>\S+) node-pool is topped at (?P<max>{_NUM})(?: (?P<unit>cores|GB))?",
    re.I,
)
_NO_NODE_HAS_RE = re.compile(
    r"(?:The pod (?P<pod>\S+) requires (?P<reqs>.+?)\.\s*)?No node in the (?P<pool>\S+) node-pool has (?P<res>.+?) resources",
    re.I,
)
_FIT_PREFIX_RE = re.compile(
    r"(?:no nodes with enough resources were found|Unable to schedule podgroup|Not enough resources for the workload|"
    r"Unable to schedule pod|(?<!\d)\d{1,9}/(?P<total>\d{1,9}) nodes are available|cannot be scheduled on node \S+?\.\s*reasons)\s*:\s*",
    re.I,
)
_NODE_DETAIL_RE = re.compile(
    rf"Node didn't have enough resources: (?P<res>[^,]+), requested: (?P<req>[^,]+), used: (?P<used>[^,]+), "
    rf"capacity: (?P<cap>{_NUM})",
    re.I,
)
_NOT_READY_RE = re.compile(
    r"Job is not ready for scheduling\.?(?:\s*Waiting for (?P<min>\d+) pods, currently (?P<exist>\d+) exist, "
    r"(?P<gated>\d+) are gated)?",
    re.I,
)
_PREEMPTED_RE = re.compile(
    r"Pod (?P<pod>\S+) was preempted(?: by (?:higher priority )?workload (?P<by>[^\s.]+(?:\.[^\s.]+)*)| and rescheduled "
    r"due to bin packing)",
    re.I,
)
_GANG_EVICT_RE = re.compile(r"Workload doesn't meet the minimum required number of pods", re.I)
_MARKERS_RE = re.compile(
    r"Non-preemptible workload|quota has reached the allowable limit|cannot be scheduled on node \S+ reasons:|Queue '[^']+' does not exist|node-pool|"
    r"no nodes with enough resources were found|didn't have enough (?:resources?|of mig profile)|"
    r"Unable to schedule podgroup|Not enough resources for the workload|Job is not ready for scheduling|"
    r"was preempted by (?:higher priority )?workload|bin packing \(resource consolidation\)|"
    r"^Unable to schedule pod$|Workload doesn't meet the minimum required number of pods|Resources were not found for pod",
    re.I,
)
_REASON_PREFIX_RE = re.compile(r"^(?P<reason>[A-Z][A-Za-z]+):\s")


# KAI-only reasons; NotReady/StaleJob are also ordinary Kubernetes reasons.
DETECTING_REASONS = frozenset(
    {
        "NonPreemptibleOverQuota",
        "OverLimit",
        "QueueDoesNotExist",
        "UnschedulableOnNodePool",
        "PodSchedulingErrors",
    }
)


def looks_like(text: str, reason: str | None = None) -> bool:
    return bool(_MARKERS_RE.search(text)) or reason in DETECTING_REASONS


def _unit_resource(unit: str) -> str:
    return _UNIT_RESOURCE.get(unit.strip().lower(), unit.strip())


def parse(text: str, reason: str | None = None) -> t.ParsedMessage | None:
    s = t.normalize(text)
    if not s:
        return None
    rm = _REASON_PREFIX_RE.match(s)
    if rm and rm["reason"] in DETECTING_REASONS:
        reason = reason or rm["reason"]
    if not looks_like(s, reason):
        return None
    p = t.ParsedMessage(source=t.SOURCE_KAI, text=s)

    for handler in (_over_quota, _over_limit, _queue_missing, _max_node, _fit_errors, _not_ready, _preempted):
        if handler(s, p):
            break
    else:
        p.cause = REASON_CAUSES.get(reason or "") or t.CAUSE_OTHER
        p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=s[:500])]
    said = f" ({reason})" if reason else ""
    p.summary = p.summary or f"KAI Scheduler{said}: {s[:200]}"
    return p


def _matched_number(m: re.Match[str], group: str) -> int | float:
    """A group matched by ``_NUM`` (digits, an optional fraction) always reads as a number."""
    value = t.to_number(m[group])
    if value is None:  # pragma: no cover - _NUM admits nothing to_number refuses
        raise ValueError(f"{group}={m[group]!r} is not a number")
    return value


def _quota_cause(req: float | None, cap: float | None) -> str:
    """A request larger than the queue's quota/limit can never be met by waiting."""
    if req is not None and cap is not None and req > cap:
        return t.CAUSE_EXCEEDS_MAX_CAPACITY
    return t.CAUSE_QUOTA_EXHAUSTED


def _over_quota(s: str, p: t.ParsedMessage) -> bool:
    m = _OVER_QUOTA_RE.search(s)
    if not m:
        return False
    p.reasons = [t.Reason(code=t.CAUSE_QUOTA_EXHAUSTED, count=None, resource=None, text=m.group(0).strip())]
    if not m["req"]:
        p.cause = t.CAUSE_QUOTA_EXHAUSTED
        p.summary = "A non-preemptible workload would take its queue over quota; only preemptible workloads may exceed quota."
        return True
    req, quota, alloc = (_matched_number(m, g) for g in ("req", "quota", "alloc"))
    p.resource, p.queue = _unit_resource(m["unit"]), m["queue"]
    p.numbers = {"requested": req, "quota": quota, "allocated": alloc}
    p.cause = _quota_cause(req, quota)
    p.reasons = [t.Reason(code=p.cause, count=None, resource=p.resource, text=m.group(0).strip())]
    p.needed = _round(req + alloc - quota)
    unit = "GPUs" if p.resource == "gpu" else ("cores" if p.resource == "cpu" else "GB")
    p.summary = (
        f"Queue {p.queue} has a quota of {t.fmt_number(quota)} {unit} and {t.fmt_number(alloc)} are already held by "
        f"non-preemptible pods; this non-preemptible workload asks for {t.fmt_number(req)} more, "
        + (
            f"{t.fmt_number(p.needed)} over quota"
            if (p.needed or 0) > 0
            else "which KAI counts as over quota"
        )
        + " (only preemptible workloads may go over quota)."
    )
    return True


def _over_limit(s: str, p: t.ParsedMessage) -> bool:
    m = _OVER_LIMIT_RE.search(s)
    if not m:
        return False
    p.resource, p.queue = _unit_resource(m["unit"]), m["queue"]
    p.reasons = [
        t.Reason(code=t.CAUSE_QUOTA_EXHAUSTED, count=None, resource=p.resource, text=m.group(0).strip())
    ]
    unit = "GPUs" if p.resource == "gpu" else ("cores" if p.resource == "cpu" else "GB")
    if not m["limit"]:
        p.cause = t.CAUSE_QUOTA_EXHAUSTED
        p.summary = f"Queue {p.queue} has reached its limit of {unit}."
        return True
    limit, alloc, req = (_matched_number(m, g) for g in ("limit", "alloc", "req"))
    p.numbers = {"limit": limit, "allocated": alloc, "requested": req}
    p.cause = _quota_cause(req, limit)
    p.reasons = [t.Reason(code=p.cause, count=None, resource=p.resource, text=m.group(0).strip())]
    p.needed = _round(req + alloc - limit)
    if p.cause == t.CAUSE_EXCEEDS_MAX_CAPACITY:
        p.summary = (
            f"The workload requests {t.fmt_number(req)} {unit}, more than queue {p.queue}'s limit of "
            f"{t.fmt_number(limit)}: it cannot run there until the limit or the request changes."
        )
    else:
        p.summary = (
            f"Queue {p.queue} is at its limit of {t.fmt_number(limit)} {unit}: {t.fmt_number(alloc)} allocated + "
            f"{t.fmt_number(req)} requested exceeds it by {t.fmt_number(p.needed)}."
        )
    return True


def _queue_missing(s: str, p: t.ParsedMessage) -> bool:
    m = _QUEUE_MISSING_RE.search(s)
    if not m:
        return False
    p.cause, p.queue = t.CAUSE_QUEUE_MISSING_OR_INACTIVE, m["queue"]
    p.reasons = [t.Reason(code=t.CAUSE_QUEUE_MISSING_OR_INACTIVE, count=None, resource=None, text=m.group(0))]
    p.summary = f"The workload's queue '{p.queue}' does not exist, so KAI will not schedule it."
    return True


def _requested_of(reqs: str | None, res: str) -> int | float | None:
    """'GPU: 2, CPU: 0 (cores), memory: 1 (GB), pods: 1' -> the value for res."""
    if not reqs:
        return None
    m = re.search(rf"\b{re.escape(res)}:\s*(?P<n>{_NUM})", reqs, re.I)
    return t.to_number(m["n"]) if m else None


def _max_node(s: str, p: t.ParsedMessage) -> bool:
    m = _MAX_NODE_RE.search(s) or _NO_NODE_HAS_RE.search(s)
    if not m:
        return False
    res_label = m["res"].strip()
    p.resource = kai_resource_name(res_label).lower() if res_label.lower() in ("gpu", "cpu") else res_label
    largest = t.to_number(m.groupdict().get("max")) if m.groupdict().get("max") else 0
    req = _requested_of(m["reqs"], res_label)
    p.numbers = {k: v for k, v in (("requested", req), ("largest_node", largest)) if v is not None}
    # A node-size limit, not a queue limit: no node in the pool is big enough for one pod.
    p.cause = t.CAUSE_INSUFFICIENT_CAPACITY
    p.needed = _round(req - largest) if req is not None and largest is not None else None
    code = classify(f"Insufficient {p.resource}").code
    p.reasons = [t.Reason(code=code, count=None, resource=p.resource, text=m.group(0).strip())]
    ask = f" {t.fmt_number(req)}" if req is not None else ""
    p.summary = (
        f"No single node in node-pool {m['pool']} can hold the pod's{ask} {res_label}"
        f" (the largest offers {t.fmt_number(largest)}): it cannot fit until the request or the nodes change."
    )
    return True


def _fit_errors(s: str, p: t.ParsedMessage) -> bool:
    reasons: list[t.Reason] = []
    for m in _NODE_DETAIL_RE.finditer(s):
        res = kai_resource_name(m["res"])
        code = classify(f"node(s) didn't have enough resources: {m['res']}").code
        reasons.append(t.Reason(code=code, count=1, resource=res, text=m.group(0)))
    prefixes = list(_FIT_PREFIX_RE.finditer(s))
    if prefixes:
        body = s[prefixes[-1].end() :]
        for piece in re.split(r"\.\s+|\.$|,\s+(?=\d+\s)", body):
            item = piece.strip().rstrip(".").strip()
            if not item or _NODE_DETAIL_RE.search(item):
                continue
            cm = re.match(r"^(?P<count>\d+)\s+(?P<text>.+)$", item)
            count, txt = (int(cm["count"]), cm["text"]) if cm else (1, item)
            c = classify(txt)
            reasons.append(t.Reason(code=c.code, count=count, resource=c.resource, text=txt, taint=c.taint))
    if not reasons and not prefixes:
        return False
    totals = [int(m["total"]) for m in prefixes if m["total"]]
    p.total_nodes = totals[-1] if totals else None
    p.reasons = reasons
    insufficient = [r for r in reasons if r.code.startswith("insufficient_")]
    p.cause = t.CAUSE_INSUFFICIENT_CAPACITY if insufficient else t.CAUSE_OTHER
    if insufficient:
        top = max(insufficient, key=lambda r: r.count or 0)
        p.resource = top.resource
    clauses = ", ".join(describe_reason(r) for r in ranked(reasons)) or "no details given"
    lead = (
        f"KAI considered {p.total_nodes} nodes"
        if p.total_nodes
        else "KAI found no node with room for the pods"
    )
    p.summary = f"{lead}: {clauses}."
    return True


def _not_ready(s: str, p: t.ParsedMessage) -> bool:
    m = _NOT_READY_RE.search(s)
    if not m:
        return False
    p.cause = t.CAUSE_OTHER
    p.reasons = [t.Reason(code=t.CAUSE_OTHER, count=None, resource=None, text=m.group(0).strip())]
    if m["min"]:
        p.numbers = {
            "min_member": int(m["min"]),
            "pods_exist": int(m["exist"]),
            "pods_gated": int(m["gated"]),
        }
        p.summary = f"The gang is incomplete: KAI waits for {m['min']} pods but {m['exist']} exist ({m['gated']} gated)."
    else:
        p.summary = "The job is not ready for scheduling (its gang is incomplete)."
    return True


def _preempted(s: str, p: t.ParsedMessage) -> bool:
    m = _PREEMPTED_RE.search(s)
    if m:
        p.cause = t.CAUSE_PREEMPTED
        p.reasons = [t.Reason(code=t.CAUSE_PREEMPTED, count=None, resource=None, text=m.group(0))]
        by = f" by workload {m['by']}" if m["by"] else " to consolidate (bin-pack) the cluster"
        p.summary = f"KAI preempted pod {m['pod']}{by}."
        return True
    m = _GANG_EVICT_RE.search(s)
    if m:
        p.cause = t.CAUSE_OTHER
        p.reasons = [t.Reason(code=t.CAUSE_OTHER, count=None, resource=None, text=m.group(0))]
        p.summary = "KAI evicted the remaining pods because the workload fell below its minimum pod count."
        return True
    return False


def _round(value: float | int | None) -> int | float | None:
    if value is None:
        return None
    value = round(value, 3)
    return int(value) if float(value).is_integer() else value
