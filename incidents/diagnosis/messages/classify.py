"""Classify one node-level reason ("6 node(s) had untolerated taint {...}") into a code.

kube-scheduler's reason strings changed wording many times between 1.5 and 1.31+
(predicate names such as `PodToleratesNodeTaints`, then sentences such as
"node(s) had taints that the pod didn't tolerate", then "had untolerated taint
{k: v}"), and KAI's fit errors reuse them next to its own. Classification is by
mechanism (what kind of constraint failed), so a wording we have not seen still
lands in the right code when it names its mechanism, and lands in `other`, text
kept, when it does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from incidents.diagnosis.messages import types as t

# Taints the node lifecycle controller sets when the node stops reporting or has
# no network: "this node is unhealthy", so they are not-ready. The condition
# taints for pressure (node.kubernetes.io/disk-pressure, memory-pressure,
# pid-pressure, and the old out-of-disk) are set on a Ready node and are
# tolerable: they are untolerated taints, as fit.py counts them.
_HEALTH_TAINT_PREFIX = "node.kubernetes.io/"
_NOT_READY_TAINTS = {"not-ready", "unreachable", "network-unavailable"}
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

# Accelerator resource names: vendor device plugins (nvidia.com/gpu, amd.com/gpu,
# gpu.intel.com/i915), MIG profiles (nvidia.com/mig-1g.10gb), sharing plugins
# (aliyun.com/gpu-mem, nvidia.com/gpumem), TPUs, Gaudi, Neuron.
_ACCELERATOR_RE = re.compile(r"gpu|/mig-|\bmig-\d|tpu|gaudi|neuron", re.I)

# Scheduler predicate / plugin names, as they appeared in 1.5–1.10 messages
# ("MatchNodeSelector (18)", "1 ExistingPodsAntiAffinityRulesNotMatch") and in
# "node(s) didn't satisfy plugin(s) [NodeAffinity]".
_NAMED: dict[str, str] = {
    "matchnodeselector": t.NODE_SELECTOR_MISMATCH,
    "nodeaffinity": t.NODE_SELECTOR_MISMATCH,
    "hostname": t.NODE_SELECTOR_MISMATCH,
    "nodename": t.NODE_SELECTOR_MISMATCH,
    "checknodelabelpresence": t.NODE_SELECTOR_MISMATCH,
    "podtoleratesnodetaints": t.UNTOLERATED_TAINT,
    "podtoleratesnodenoexecutetaints": t.UNTOLERATED_TAINT,
    "tainttoleration": t.UNTOLERATED_TAINT,
    "podfitshostports": t.PORTS,
    "nodeports": t.PORTS,
    "novolumezoneconflict": t.VOLUME_NODE_AFFINITY,
    "volumezone": t.VOLUME_NODE_AFFINITY,
    "nodiskconflict": t.VOLUME_BINDING,
    "volumerestrictions": t.VOLUME_BINDING,
    "maxvolumecount": t.VOLUME_NODE_LIMIT,
    "maxebsvolumecount": t.VOLUME_NODE_LIMIT,
    "maxgcepdvolumecount": t.VOLUME_NODE_LIMIT,
    "maxazurediskvolumecount": t.VOLUME_NODE_LIMIT,
    "maxcindervolumecount": t.VOLUME_NODE_LIMIT,
    "maxcsivolumecountpred": t.VOLUME_NODE_LIMIT,
    "nodevolumelimits": t.VOLUME_NODE_LIMIT,
    "ebslimits": t.VOLUME_NODE_LIMIT,
    "gcepdlimits": t.VOLUME_NODE_LIMIT,
    "azuredisklimits": t.VOLUME_NODE_LIMIT,
    "cinderlimits": t.VOLUME_NODE_LIMIT,
    "checkvolumebinding": t.VOLUME_BINDING,
    "volumebinding": t.VOLUME_BINDING,
    "matchinterpodaffinity": t.AFFINITY_MISMATCH,
    "interpodaffinity": t.AFFINITY_MISMATCH,
    "checkserviceaffinity": t.AFFINITY_MISMATCH,
    "existingpodsantiaffinityrulesnotmatch": t.ANTI_AFFINITY,
    "checknodecondition": t.NODE_NOT_READY,
    "nodenotready": t.NODE_NOT_READY,
    "nodeunknowncondition": t.NODE_NOT_READY,
    "checknodememorypressure": t.NODE_PRESSURE,
    "checknodediskpressure": t.NODE_PRESSURE,
    "checknodepidpressure": t.NODE_PRESSURE,
    "nodeundermemorypressure": t.NODE_PRESSURE,
    "nodeunderdiskpressure": t.NODE_PRESSURE,
    "nodeunderpidpressure": t.NODE_PRESSURE,
    "nodeoutofdisk": t.NODE_PRESSURE,
    "nodenetworkunavailable": t.NODE_NOT_READY,
    "nodeunschedulable": t.UNSCHEDULABLE_NODE,
    "checknodeunschedulable": t.UNSCHEDULABLE_NODE,
    "evenpodsspread": t.TOPOLOGY_SPREAD,
    "podtopologyspread": t.TOPOLOGY_SPREAD,
    "noderesourcesfit": t.INSUFFICIENT_OTHER_RESOURCE,
    # HAMi scheduler extender reasons (Project-HAMi/HAMi pkg/device/common/common.go)
    "cardinsufficientmemory": t.INSUFFICIENT_GPU,
    "cardinsufficientcore": t.INSUFFICIENT_GPU,
    "cardtimeslicingexhausted": t.INSUFFICIENT_GPU,
    "cardcomputeunitsexhausted": t.INSUFFICIENT_GPU,
    "cardmigtopologyinfeasible": t.INSUFFICIENT_GPU,
    "nodeinsufficientdevice": t.INSUFFICIENT_GPU,
    "allocatedcardsinsufficientrequest": t.INSUFFICIENT_GPU,
    "exclusivedeviceallocateconflict": t.INSUFFICIENT_GPU,
    "numanotfit": t.INSUFFICIENT_GPU,
    "cardtypemismatch": t.DEVICE_MISMATCH,
    "carduuidmismatch": t.DEVICE_MISMATCH,
    "cardnotfoundcustomfilterrule": t.DEVICE_MISMATCH,
    "modenotfit": t.DEVICE_MISMATCH,
    "cardnothealth": t.GPU_UNAVAILABLE,
    "cardcordoned": t.GPU_UNAVAILABLE,
    "resourcequotanotfit": t.RESOURCE_QUOTA,
}

# What each HAMi reason says ran out, for the summary ("lack free gpu-memory").
_HAMI_RESOURCE = {
    "cardinsufficientmemory": "gpu-memory",
    "cardinsufficientcore": "gpu-cores",
    "cardtimeslicingexhausted": "gpu-shares",
    "cardcomputeunitsexhausted": "gpu-compute-units",
    "cardmigtopologyinfeasible": "gpu-mig-slot",
    "nodeinsufficientdevice": "gpu",
    "allocatedcardsinsufficientrequest": "gpu",
    "exclusivedeviceallocateconflict": "gpu",
    "numanotfit": "gpu-in-one-numa-node",
}

_CAMEL_RE = re.compile(r"(?:[A-Z][a-z0-9]+){2,}|HostName|NodeName")
# HAMi's per-node form "2/4 CardInsufficientMemory" (cards with the reason / cards on the node).
_HAMI_RATIO_RE = re.compile(r"^\d+/\d+\s+(?=[A-Z][a-z])")
_INSUFFICIENT_RE = re.compile(r"^insufficient\s+(?P<res>[^\s,()]+)", re.I)
# KAI: "node(s) didn't have enough resources: GPUs", "Node didn't have enough
# resources: CPU cores, requested: 1.5, ...", "didn't have enough of mig profile: nvidia.com/mig-1g.5gb"
_NOT_ENOUGH_RE = re.compile(
    r"didn't have enough (?:resources?|of mig profile):\s*(?P<res>.+?)(?=,\s|\.\s|\.*$)", re.I
)
_TAINT_RE = re.compile(r"taint\s*\{(?P<key>[^:{}]*):\s?(?P<value>[^{}]*)\}", re.I)
# "didn't satisfy plugin(s) [NodeAffinity]", "... [A B] simultaneously", "didn't satisfy plugin NodeAffinity"
_PLUGINS_RE = re.compile(
    r"didn't satisfy plugin(?:\(s\)|s)?\s+\[?(?P<plugins>[A-Za-z][A-Za-z0-9 ,]*)\]?", re.I
)

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"too many pods|pod number exceeded", re.I), t.TOO_MANY_PODS),
    # cluster-autoscaler's skipped-node-group reasons (cluster-autoscaler/core/scaleup/orchestrator/skippedreasons.go)
    (re.compile(r"max node group size reached|^max limit reached$", re.I), t.MAX_NODE_GROUP_SIZE),
    (re.compile(r"max cluster .{0,80}limit reached|max cluster size reached", re.I), t.MAX_CLUSTER_RESOURCES),
    (re.compile(r"in backoff after failed scale-up", re.I), t.SCALE_UP_BACKOFF),
    (re.compile(r"not ready for scale-up", re.I), t.NODE_GROUP_NOT_READY),
    # Volcano NodeResourceFitFailed: a resource did not fit, without naming it
    (re.compile(r"^node\(s\) resource fit failed$", re.I), t.INSUFFICIENT_OTHER_RESOURCE),
    # HAMi: the node has no HAMi device registration ("node unregistered", an old build wrote "unregisterd")
    (re.compile(r"^node unregister(?:e)?d$|^node usage unavailable$", re.I), t.GPU_UNAVAILABLE),
    # NodeVolumeLimits / MaxVolumeCount: the node's attach limit, not the claims
    (
        re.compile(
            r"exceed(?:s|ed)? max volume count|max volume count exceeded|attachable volumes|volume limit",
            re.I,
        ),
        t.VOLUME_NODE_LIMIT,
    ),
    # CheckNodeMemoryPressure/DiskPressure/PIDPressure predicates (1.8–1.12): a Ready node under pressure
    (re.compile(r"(?:memory|disk|pid) pressure|out of disk", re.I), t.NODE_PRESSURE),
    # Dynamic Resource Allocation (DRA, 1.32+): devices such as GPUs requested through ResourceClaims.
    (
        re.compile(
            r"cannot allocate all claims|resourceclaims? .*not (?:yet )?allocated|device(?:s| class)\b", re.I
        ),
        t.INSUFFICIENT_OTHER_RESOURCE,
    ),
    (re.compile(r"anti-affinity rules|existing pods anti-affinity", re.I), t.ANTI_AFFINITY),
    (re.compile(r"volume node affinity|volume zone", re.I), t.VOLUME_NODE_AFFINITY),
    (re.compile(r"pod affinity|inter-?pod affinity", re.I), t.AFFINITY_MISMATCH),
    (
        re.compile(
            r"persistent ?volume|persistentvolumeclaim|\bpvc|\bpv\(s\)|free storage|available disk|"
            r"readwriteoncepod|\bvolumes?\b",
            re.I,
        ),
        t.VOLUME_BINDING,
    ),
    (
        re.compile(
            r"node selector|node affinity|nodeaffinity|requested hostname|requested node name|"
            r"requested labels|scheduler-enforced",
            re.I,
        ),
        t.NODE_SELECTOR_MISMATCH,
    ),
    (re.compile(r"were unschedulable|node\(s\) unschedulable|\bcordon", re.I), t.UNSCHEDULABLE_NODE),
    (re.compile(r"free ports|host ?ports?\b", re.I), t.PORTS),
    (re.compile(r"topology spread", re.I), t.TOPOLOGY_SPREAD),
    (
        re.compile(
            r"had condition|not ready|notready|unknown condition|unavailable network|network unavailable|"
            r"unreachable",
            re.I,
        ),
        t.NODE_NOT_READY,
    ),
)


@dataclass(frozen=True)
class Classified:
    code: str
    resource: str | None = None
    taint: dict[str, str] | None = None


def resource_code(resource: str) -> str:
    """Which insufficient_* code a resource name belongs to."""
    name = resource.strip().lower()
    if name in ("cpu", "cpu cores", "cores"):
        return t.INSUFFICIENT_CPU
    if name in ("memory", "mem"):
        return t.INSUFFICIENT_MEMORY
    if name == "pods":
        return t.TOO_MANY_PODS
    if name.startswith("attachable-volumes-"):  # 1.11–1.16 per-driver attach limits as node resources
        return t.VOLUME_NODE_LIMIT
    if _ACCELERATOR_RE.search(name):
        return t.INSUFFICIENT_GPU
    return t.INSUFFICIENT_OTHER_RESOURCE


def kai_resource_name(raw: str) -> str:
    """KAI writes 'GPUs', 'GPU memory', 'CPU cores', 'memory' or a resource name."""
    name = raw.strip()
    low = name.lower()
    if low in ("gpus", "gpu", "gpu memory"):
        return "gpu" if low != "gpu memory" else "gpu-memory"
    if low in ("cpu cores", "cpu"):
        return "cpu"
    return name


def _taint_code(key: str) -> str:
    if key == _UNSCHEDULABLE_TAINT:
        return t.UNSCHEDULABLE_NODE
    if key.startswith(_HEALTH_TAINT_PREFIX) and key[len(_HEALTH_TAINT_PREFIX) :] in _NOT_READY_TAINTS:
        return t.NODE_NOT_READY
    return t.UNTOLERATED_TAINT


def classify(text: str) -> Classified:
    """Classify one reason's text (without its leading node count)."""
    s = text.strip().rstrip(".").strip()
    if not s:
        return Classified(t.OTHER)
    s = _HAMI_RATIO_RE.sub("", s, count=1)

    m = _INSUFFICIENT_RE.match(s)
    if m:
        res = m.group("res")
        return Classified(resource_code(res), resource=res)

    m = _NOT_ENOUGH_RE.search(s)
    if m:
        res = kai_resource_name(m.group("res"))
        code = t.INSUFFICIENT_GPU if res == "gpu-memory" else resource_code(res)
        return Classified(code, resource=res)

    if "taint" in s.lower():
        m = _TAINT_RE.search(s)
        if m:
            key, value = m.group("key").strip(), m.group("value").strip()
            return Classified(_taint_code(key), taint={"key": key, "value": value})
        return Classified(t.UNTOLERATED_TAINT)

    m = _PLUGINS_RE.search(s)
    if m:
        words = re.split(r"[,\s]+", m.group("plugins"))
        plugins = [p.strip().lower() for p in words if p.strip() and p.lower() != "simultaneously"]
        codes = [_NAMED[p] for p in plugins if p in _NAMED]
        return Classified(codes[0] if codes else t.OTHER)

    # Predicate/plugin names are CamelCase identifiers ("MatchNodeSelector"), never shouted or lower-case words.
    named = _NAMED.get(s.lower()) if _CAMEL_RE.fullmatch(s) else None
    if named:
        return Classified(named, resource=_HAMI_RESOURCE.get(s.lower()))

    for pattern, code in _PATTERNS:
        if pattern.search(s):
            return Classified(code)
    return Classified(t.OTHER)
