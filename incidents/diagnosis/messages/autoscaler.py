"""Parse cluster-autoscaler pod events: NotTriggerScaleUp and TriggeredScaleUp.

Formats read from kubernetes/autoscaler (cluster-autoscaler/processors/status/
eventing_scale_up_processor.go and core/scaleup/orchestrator/skippedreasons.go):

- "pod didn't trigger scale-up: 2 Insufficient nvidia.com/gpu, 1 max node group
  size reached" (1.20+; "Pod didn't" in some builds), one "count reason" per
  reason with the number of *node groups* it applies to. Node-group reasons are
  the scheduler's own predicate messages, evaluated on each group's template
  node, plus the autoscaler's: "max node group size reached", "in backoff after
  failed scale-up", "not ready for scale-up", "max cluster cpu, memory limit
  reached".
- older: "pod didn't trigger scale-up (it wouldn't fit if a new node is added):
  6 Insufficient nvidia.com/gpu" and "... : 1 max limit reached".
- "pod triggered scale-up: [{eks-gpu-ng 0->1 (max: 3)}]": a node group is growing.

A NotTriggerScaleUp says adding nodes will not place the pod; it says nothing
about the existing nodes, which the scheduler's own message covers.
"""

from __future__ import annotations

import re

from incidents.diagnosis.messages import types as t
from incidents.diagnosis.messages.kube_scheduler import describe_reason, ranked, reasons_from_histogram

_NOT_TRIGGERED_RE = re.compile(
    r"\bpod didn't trigger scale-up(?P<wouldnt> \(it wouldn't fit if a new node is added\))?(?::\s*|\.?\s*$)",
    re.I,
)
_TRIGGERED_RE = re.compile(r"\bpod triggered scale-up:\s*\[(?P<groups>[^\]]{0,4000})\]", re.I)
_GROUP_RE = re.compile(r"\{(?P<name>[^{}\s]+) (?P<from>\d+)->(?P<to>\d+)(?: \(max: (?P<max>\d+)\))?\}")


def looks_like(text: str) -> bool:
    return bool(_NOT_TRIGGERED_RE.search(text) or _TRIGGERED_RE.search(text))


def parse(text: str) -> t.ParsedMessage | None:
    s = t.normalize(text)
    if not s:
        return None
    m = _NOT_TRIGGERED_RE.search(s)
    if m:
        return _not_triggered(s, m)
    m = _TRIGGERED_RE.search(s)
    if m:
        return _triggered(s, m)
    return None


def _not_triggered(s: str, m: re.Match[str]) -> t.ParsedMessage:
    body = s[m.end() :].strip().rstrip(".").strip()
    reasons = reasons_from_histogram(body, None) if body else []
    p = t.ParsedMessage(source=t.SOURCE_CLUSTER_AUTOSCALER, reasons=reasons, text=s)
    if reasons:
        clauses = ", ".join(describe_reason(r) for r in ranked(reasons))
        p.summary = f"The cluster autoscaler will not add a node for the pod; per node group: {clauses}."
    elif m["wouldnt"]:
        p.summary = (
            "The cluster autoscaler will not add a node: the pod would not fit on a new node of any group "
            "(or every group that could hold it is at its maximum size)."
        )
    else:
        p.summary = "The cluster autoscaler will not add a node for the pod (no reason given)."
    return p


def _triggered(s: str, m: re.Match[str]) -> t.ParsedMessage:
    groups = list(_GROUP_RE.finditer(m["groups"]))
    text = m.group(0)
    reason = t.Reason(code=t.SCALE_UP_TRIGGERED, count=len(groups) or None, resource=None, text=text)
    p = t.ParsedMessage(source=t.SOURCE_CLUSTER_AUTOSCALER, reasons=[reason], text=s)
    if groups:
        described = ", ".join(
            f"{g['name']} {g['from']}->{g['to']}" + (f" (max {g['max']})" if g["max"] else "")
            for g in groups[:5]
        )
        p.summary = f"The cluster autoscaler is adding nodes for the pod: {described}."
    else:
        p.summary = "The cluster autoscaler is adding nodes for the pod."
    return p
