"""Parse HAMi scheduler-extender events (GPU sharing: vGPU memory and cores per card).

Formats read from Project-HAMi/HAMi (pkg/scheduler/scheduler.go, score.go and
pkg/device/common/common.go):

- FilteringFailed "no available node, 3 nodes do not meet" (older builds: "no
  available node, all node scores do not meet").
- FilteringFailed per reason, since 2025: "2 nodes CardInsufficientMemory(node-a,node-b)"
  (recordFilteringFailures: "%d nodes %s(%s)").
- a node's own reason as the extender returns it to kube-scheduler, built by
  GenReason: "1/4 CardInsufficientMemory, 3/4 CardTypeMismatch" (cards with the
  reason / cards on the node). Inside a kube-scheduler message these reach
  classify.py, which strips the ratio.

The reason codes (CardInsufficientMemory, NumaNotFit, CardTypeMismatch,
CardNotHealth, NodeInsufficientDevice, ResourceQuotaNotFit, ...) classify in
classify.py; NodeUnfitPod is HAMi's summary line for a rejected node and names
no mechanism, so it stays `other`.
"""

from __future__ import annotations

import re

from incidents.diagnosis.messages import types as t
from incidents.diagnosis.messages.classify import classify
from incidents.diagnosis.messages.kube_scheduler import describe_reason, ranked

_NO_NODE_RE = re.compile(
    r"\bno available node, (?:(?P<n>\d{1,9}) nodes do not meet|all node scores do not meet)", re.I
)
_PER_REASON_RE = re.compile(
    r"(?<!\d)(?P<n>\d{1,9}) nodes (?P<reason>[A-Z][A-Za-z]{2,60})\((?P<nodes>[^()]{0,4000})\)"
)
_CARD_RATIO_RE = re.compile(r"(?:^|,\s)(?P<cards>\d{1,9})/(?P<of>\d{1,9}) (?P<reason>[A-Z][A-Za-z]{2,60})\b")


def looks_like(text: str) -> bool:
    return bool(_NO_NODE_RE.search(text) or _PER_REASON_RE.search(text) or _CARD_RATIO_RE.search(text))


def parse(text: str) -> t.ParsedMessage | None:
    s = t.normalize(text)
    if not s:
        return None
    p = t.ParsedMessage(source=t.SOURCE_HAMI, text=s)
    per_reason = [m for m in _PER_REASON_RE.finditer(s) if _known(m["reason"])]
    if per_reason:
        p.reasons = [_reason(m["reason"], int(m["n"]), m.group(0)) for m in per_reason]
        p.summary = f"HAMi found no node whose GPUs fit the pod: {_clauses(p.reasons)}."
        return p
    m = _NO_NODE_RE.search(s)
    if m:
        p.total_nodes = int(m["n"]) if m["n"] else None
        p.reasons = [t.Reason(code=t.OTHER, count=p.total_nodes, resource=None, text=m.group(0))]
        checked = f" ({p.total_nodes} nodes checked)" if p.total_nodes is not None else ""
        p.summary = f"HAMi found no node whose GPUs fit the pod{checked}; its per-reason FilteringFailed events say why."
        return p
    cards = [m for m in _CARD_RATIO_RE.finditer(s) if _known(m["reason"])]
    if cards and len(s) <= 2000:
        # One node's reasons: counts are cards, not nodes.
        p.total_nodes = 1
        p.reasons = [_reason(m["reason"], 1, m.group(0).lstrip(", ")) for m in cards]
        p.numbers = {f"cards_{m['reason']}": int(m["cards"]) for m in cards}
        p.summary = (
            f"HAMi rejected the node: {_clauses(p.reasons)} (per card: "
            + ", ".join(f"{m['cards']}/{m['of']} {m['reason']}" for m in cards)
            + ")."
        )
        return p
    return None


def _known(reason: str) -> bool:
    return classify(reason).code != t.OTHER


def _reason(name: str, count: int, text: str) -> t.Reason:
    c = classify(name)
    return t.Reason(code=c.code, count=count, resource=c.resource, text=text)


def _clauses(reasons: list[t.Reason]) -> str:
    return ", ".join(describe_reason(r) for r in ranked(reasons))
