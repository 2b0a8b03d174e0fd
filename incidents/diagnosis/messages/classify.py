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

# Taints the node lifecycle controller sets from node conditions: they mean
# "this node is unhealthy", not "this node is reserved", so they are not-ready.
_HEALTH_TAINT_PREFIX = "node.kubernetes.io/"
_NOT_READY_TAINTS = {
    "not-ready",
    "unreachable",
    "network-unavailable",
    "out-of-disk",
    "memory-pressure",
    "disk-pressure",
    "pid-pressure",
}
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
    "maxebsvolumecount": t.VOLUME_BINDING,
    "maxgcepdvolumecount": t.VOLUME_BINDING,
    "maxazurediskvolumecount": t.VOLUME_BINDING,
    "maxcindervolumecount": t.VOLUME_BINDING,
    "maxcsivolumecountpred": t.VOLUME_BINDING,
    "nodevolumelimits": t.VOLUME_BINDING,
    "checkvolumebinding": t.VOLUME_BINDING,
    "volumebinding": t.VOLUME_BINDING,
    "matchinterpodaffinity": t.AFFINITY_MISMATCH,
    "interpodaffinity": t.AFFINITY_MISMATCH,
    "checkserviceaffinity": t.AFFINITY_MISMATCH,
    "existingpodsantiaffinityrulesnotmatch": t.ANTI_AFFINITY,
    "checknodecondition": t.NODE_NOT_READY,
    "nodenotready": t.NODE_NOT_READY,
    "nodeunknowncondition": t.NODE_NOT_READY,
    "checknodememorypressure": t.NODE_NOT_READY,
    "checknodediskpressure": t.NODE_NOT_READY,
    "checknodepidpressure": t.NODE_NOT_READY,
    "nodeundermemorypressure": t.NODE_NOT_READY,
    "nodeunderdiskpressure": t.NODE_NOT_READY,
    "nodeunderpidpressure": t.NODE_NOT_READY,
    "nodeoutofdisk": t.NODE_NOT_READY,
    "nodenetworkunavailable": t.NODE_NOT_READY,
    "nodeunschedulable": t.UNSCHEDULABLE_NODE,
    "checknodeunschedulable": t.UNSCHEDULABLE_NODE,
    "evenpodsspread": t.TOPOLOGY_SPREAD,
    "podtopologyspread": t.TOPOLOGY_SPREAD,
    "noderesourcesfit": t.INSUFFICIENT_OTHER_RESOURCE,
}

_CAMEL_RE = re.compile(r"(?:[A-Z][a-z0-9]+){2,}|HostName|NodeName")
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
            r"volume count|readwriteoncepod|\bvolumes?\b",
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
            r"had condition|not ready|notready|unknown condition|out of disk|memory pressure|disk pressure|"
            r"pid pressure|unavailable network|network unavailable|unreachable",
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
        return Classified(named)

    for pattern, code in _PATTERNS:
        if pattern.search(s):
            return Classified(code)
    return Classified(t.OTHER)


def is_known(text: str) -> bool:
    """True when the text names a scheduling mechanism we recognise."""
    return classify(text).code != t.OTHER
