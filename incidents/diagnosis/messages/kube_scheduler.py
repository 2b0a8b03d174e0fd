"""Parse kube-scheduler FailedScheduling / PodScheduled=False messages, every format.

The formats, oldest first (the builders live in kubernetes/kubernetes):

- 1.2–1.5: "pod (x) failed to fit in any node\\nfit failure on node (node-1):
  Insufficient cpu\\nfit failure on node (node-2): PodToleratesNodeTaints" — one
  line per node, its reasons joined by ", " (1.2–1.4 wrote "Node didn't have
  enough resource: CPU, requested: 1000, used: 1420, capacity: 2000")
- 1.5–1.6: "pod (x) failed to fit in any node\\nfit failure summary on nodes :
  PodToleratesNodeTaints (1), Insufficient cpu (2)"
- 1.7: "No nodes are available that match all of the following predicates::
  Insufficient cpu (9), MatchNodeSelector (18)."
- 1.8+: "0/3 nodes are available: 1 NodeNotReady, 2 Insufficient cpu." (predicate
  names first, then sentences: "1 node(s) had taints that the pod didn't tolerate")
- 1.18+: framework FitError: "0/N nodes are available: <sorted "count reason"
  histogram, or the PreFilter message>." and, since 1.23, the PostFilter tail
  " preemption: 0/N nodes are available: 2 No preemption victims found for
  incoming pod, 6 Preemption is not helpful for scheduling." (often with a
  doubled final period); 1.33+ may put a DRA message before the tail ("no new
  claims to deallocate, preemption: ...").
- "no nodes available to schedule pods" when the scheduler knows no node at all.

Reasons are classified by mechanism (classify.py); counts are kept as written.
"""

from __future__ import annotations

import logging
import re

from incidents.diagnosis.messages import types as t
from incidents.diagnosis.messages.classify import classify

logger = logging.getLogger(__name__)

# Counts are bounded (and must not start inside a longer digit run) so a hostile
# digit string costs linear time and never reaches int() with thousands of digits.
_HEADER_RE = re.compile(r"(?<!\d)(?P<avail>\d{1,9})/(?P<total>\d{1,9}) nodes are available\b:?\s*", re.I)
_PREEMPTION_RE = re.compile(r"\bpreemption:\s*", re.I)
_OLD_PREDICATES_RE = re.compile(
    r"no nodes are available that match all of the following predicates:*\s*", re.I
)
_FIT_SUMMARY_RE = re.compile(r"fit failure summary on nodes\s*:\s*", re.I)
_FIT_ON_NODE_RE = re.compile(r"fit failure on node \(", re.I)
_NODE_LINE_RE = re.compile(r"^(?P<node>[^()]{1,253})\):\s*(?P<body>.*)$", re.S)
# The 1.2–1.4 resource reason carries its own commas: keep "requested: 1000" with its reason.
_DETAIL_PART_RE = re.compile(r"^(?:requested|used|capacity):", re.I)
# Nodes listed per message at most; a longer list is cut, not parsed past the bound.
_MAX_NODE_LINES = 500
_NO_NODES_RE = re.compile(r"\bno nodes available to schedule pods\b", re.I)
_ITEM_SPLIT_RE = re.compile(r",\s+(?=\d+\s)")
_COUNTED_RE = re.compile(r"^(?P<count>\d{1,9})\s+(?P<text>.+)$", re.S)
_PAREN_COUNT_RE = re.compile(r"^(?P<text>.+?)\s*\((?P<count>\d{1,9})\)$")
_SENTENCE_END_RE = re.compile(r"\.(?:\s|$)")
_NOT_ELIGIBLE_RE = re.compile(r"not eligible due to preemptionPolicy=Never", re.I)

# Without a header, an uncounted item must still use the scheduler's own phrasing.
_SCHEDULER_PHRASE_RE = re.compile(
    r"node\(s\)|^Insufficient \S|unbound immediate PersistentVolumeClaims|^Too many pods$", re.I
)
_NO_VICTIMS_RE = re.compile(r"no (?:preemption )?victims found", re.I)
_NOT_HELPFUL_RE = re.compile(r"preemption is not helpful", re.I)


def looks_like(text: str) -> bool:
    """Does this text carry one of the scheduler's own headers?"""
    return bool(
        _HEADER_RE.search(text)
        or _OLD_PREDICATES_RE.search(text)
        or _FIT_SUMMARY_RE.search(text)
        or _FIT_ON_NODE_RE.search(text)
        or _NO_NODES_RE.search(text)
    )


def has_legacy_header(text: str) -> bool:
    """A pre-1.8 header ("fit failure on node (", "...following predicates:"): no other scheduler writes these."""
    return bool(
        _OLD_PREDICATES_RE.search(text) or _FIT_SUMMARY_RE.search(text) or _FIT_ON_NODE_RE.search(text)
    )


def _body_until_sentence_end(s: str) -> str:
    m = _SENTENCE_END_RE.search(s)
    return (s[: m.start()] if m else s).strip().rstrip(".").strip()


def _reasons_from_histogram(body: str, total: int | None) -> list[t.Reason]:
    """'2 Insufficient nvidia.com/gpu, 6 node(s) had ...' -> Reasons; an uncounted
    item (a PreFilter message) applies to every node the scheduler considered."""
    reasons: list[t.Reason] = []
    for raw in _ITEM_SPLIT_RE.split(body):
        item = raw.strip().rstrip(",").strip()
        if not item:
            continue
        m = _COUNTED_RE.match(item)
        count, text = (int(m.group("count")), m.group("text").strip()) if m else (total, item)
        reasons.append(_reason(text, count))
    return reasons


reasons_from_histogram = _reasons_from_histogram  # shared with the autoscaler and Volcano parsers


def _reasons_from_predicates(body: str) -> list[t.Reason]:
    """'Insufficient cpu (9), MatchNodeSelector (18)' (1.5–1.7 formats)."""
    reasons: list[t.Reason] = []
    for raw in re.split(r",\s+", body):
        item = raw.strip()
        if not item:
            continue
        m = _PAREN_COUNT_RE.match(item)
        count, text = (int(m.group("count")), m.group("text")) if m else (None, item)
        reasons.append(_reason(text, count))
    return reasons


def _reasons_per_node(s: str) -> tuple[int, list[t.Reason]]:
    """'fit failure on node (n1): Insufficient cpu fit failure on node (n2): ...' ->
    (nodes listed, one Reason per distinct mechanism with the number of nodes it hit)."""
    lines = _FIT_ON_NODE_RE.split(s)[1 : _MAX_NODE_LINES + 1]
    nodes = 0
    merged: dict[tuple[str, str | None, str | None], t.Reason] = {}
    for line in lines:
        m = _NODE_LINE_RE.match(line.strip())
        if not m:
            continue
        nodes += 1
        seen: set[tuple[str, str | None, str | None]] = set()
        for text in _node_reason_texts(_body_until_sentence_end(m["body"])):
            r = _reason(text, 1)
            key = (r.code, r.resource, (r.taint or {}).get("key"))
            if key in seen:
                continue
            seen.add(key)
            if key in merged:
                prev = merged[key]
                merged[key] = t.Reason(prev.code, (prev.count or 0) + 1, prev.resource, prev.text, prev.taint)
            else:
                merged[key] = r
    return nodes, list(merged.values())


def _node_reason_texts(body: str) -> list[str]:
    """Split one node's reasons on ', ', keeping 'requested: N, used: N' with their reason."""
    out: list[str] = []
    for part in re.split(r",\s+", body):
        part = part.strip()
        if not part:
            continue
        if out and _DETAIL_PART_RE.match(part):
            out[-1] = f"{out[-1]}, {part}"
        else:
            out.append(part)
    return out


def _reason(text: str, count: int | None) -> t.Reason:
    c = classify(text)
    return t.Reason(code=c.code, count=count, resource=c.resource, text=text, taint=c.taint)


def _preemption_reason(text: str, count: int | None) -> t.Reason:
    if _NO_VICTIMS_RE.search(text):
        return t.Reason(code=t.NO_VICTIMS, count=count, resource=None, text=text)
    if _NOT_HELPFUL_RE.search(text):
        return t.Reason(code=t.PREEMPTION_NOT_HELPFUL, count=count, resource=None, text=text)
    return _reason(text, count)


def _parse_preemption(tail: str) -> t.Preemption:
    if _NOT_ELIGIBLE_RE.search(tail):
        text = _body_until_sentence_end(tail)
        return t.Preemption(
            total_nodes=None,
            reasons=[t.Reason(code=t.PREEMPTION_NOT_ELIGIBLE, count=None, resource=None, text=text)],
            victims_found=False,
            text=text,
        )
    total: int | None = None
    body = tail
    m = _HEADER_RE.match(tail)
    if m:
        total = int(m.group("total"))
        body = tail[m.end() :]
    body = _body_until_sentence_end(body)
    reasons: list[t.Reason] = []
    for raw in _ITEM_SPLIT_RE.split(body):
        item = raw.strip()
        if not item:
            continue
        cm = _COUNTED_RE.match(item)
        count, text = (int(cm.group("count")), cm.group("text").strip()) if cm else (total, item)
        reasons.append(_preemption_reason(text, count))
    # The scheduler writes this tail only when preemption found nothing to evict.
    return t.Preemption(total_nodes=total, reasons=reasons, victims_found=False, text=tail.strip())


def parse(text: str) -> t.ParsedMessage | None:
    """Parse a kube-scheduler message; None when it is not one."""
    s = t.normalize(text)
    if not s:
        return None

    head, tail = s, None
    pm = _PREEMPTION_RE.search(s)
    if pm:
        head, tail = s[: pm.start()], s[pm.end() :]
    preemption = _parse_preemption(tail) if tail is not None else None

    m = _HEADER_RE.search(head)
    if m:
        total = int(m.group("total"))
        body = _body_until_sentence_end(head[m.end() :])
        reasons = _reasons_from_histogram(body, total) if body else []
        return _finish(s, total, reasons, preemption)

    if _FIT_ON_NODE_RE.search(head) and not _FIT_SUMMARY_RE.search(head):
        nodes, reasons = _reasons_per_node(head)
        if nodes:
            return _finish(s, nodes, reasons, preemption)

    m = _OLD_PREDICATES_RE.search(head) or _FIT_SUMMARY_RE.search(head)
    if m:
        body = _body_until_sentence_end(head[m.end() :])
        return _finish(s, None, _reasons_from_predicates(body), preemption)

    if _NO_NODES_RE.search(head):
        reason = t.Reason(code=t.NO_NODES, count=0, resource=None, text="no nodes available to schedule pods")
        return _finish(s, 0, [reason], preemption)

    if preemption is not None and preemption.total_nodes is not None:
        # A bare PreFilter message with a tail: "pod has unbound immediate
        # PersistentVolumeClaims. preemption: 0/2 nodes are available: ..."
        body = _body_until_sentence_end(head)
        reasons = _reasons_from_histogram(body, preemption.total_nodes) if body else []
        if reasons and all(r.code != t.OTHER for r in reasons):
            return _finish(s, preemption.total_nodes, reasons, preemption)
        if not reasons:
            return _finish(s, preemption.total_nodes, [], preemption)
    return None


def parse_bare(text: str) -> t.ParsedMessage | None:
    """A headerless reason list ('1 node(s) had taints that the pod didn't tolerate').

    Accepted only when every item names a known mechanism: a stray sentence
    must stay `unknown` rather than become a finding.
    """
    s = _body_until_sentence_end(t.normalize(text))
    if not s or len(s) > 2000:
        return None
    items = [i.strip() for i in _ITEM_SPLIT_RE.split(s) if i.strip()]
    if not items or not all(_COUNTED_RE.match(i) or _SCHEDULER_PHRASE_RE.search(i) for i in items):
        return None
    reasons = _reasons_from_histogram(s, None)
    if reasons and all(r.code != t.OTHER for r in reasons):
        return _finish(t.normalize(text), None, reasons, None)
    return None


def _finish(
    text: str, total: int | None, reasons: list[t.Reason], preemption: t.Preemption | None
) -> t.ParsedMessage:
    parsed = t.ParsedMessage(
        source=t.SOURCE_KUBE_SCHEDULER, total_nodes=total, reasons=reasons, preemption=preemption, text=text
    )
    parsed.summary = summarize(parsed)
    return parsed


#
# Summary
#
def describe_reason(r: t.Reason, *, subject: str = "") -> str:
    """'2 lack free nvidia.com/gpu', 'all have a taint ...' — one clause per reason."""
    n = "" if r.count is None else f"{r.count} "
    are = "is" if r.count == 1 else "are"
    have = "has" if r.count == 1 else "have"
    lack = "lacks" if r.count == 1 else "lack"
    do = "does" if r.count == 1 else "do"
    code = r.code
    if code in (t.INSUFFICIENT_GPU, t.INSUFFICIENT_CPU, t.INSUFFICIENT_MEMORY, t.INSUFFICIENT_OTHER_RESOURCE):
        return f"{n}{lack} free {r.resource}" if r.resource else f"{n}{lack} free resources ({r.text})"
    if code == t.UNTOLERATED_TAINT:
        taint = f" ({_taint_str(r.taint)})" if r.taint else ""
        return f"{n}{have} a taint the pod does not tolerate{taint}"
    if code == t.NODE_NOT_READY:
        detail = f" ({_taint_str(r.taint)})" if r.taint else f" ({r.text})"
        return f"{n}{are} not ready{detail}"
    if code == t.UNSCHEDULABLE_NODE:
        return f"{n}{are} cordoned (unschedulable)"
    if code == t.NODE_SELECTOR_MISMATCH:
        return f"{n}{do} not match the pod's node selector/affinity"
    if code == t.AFFINITY_MISMATCH:
        return f"{n}{do} not satisfy the pod's pod-affinity rules"
    if code == t.ANTI_AFFINITY:
        return f"{n}{are} excluded by pod anti-affinity"
    if code == t.VOLUME_NODE_AFFINITY:
        return f"{n}{are} outside the node affinity/zone of the pod's volumes"
    if code == t.VOLUME_BINDING:
        return f"{n}cannot provide the pod's volumes ({r.text})"
    if code == t.VOLUME_NODE_LIMIT:
        return f"{n}{have} no volume attachments left (the node's volume limit is reached)"
    if code == t.NODE_PRESSURE:
        return f"{n}{are} under resource pressure ({r.text})"
    if code == t.DEVICE_MISMATCH:
        return f"{n}{have} no GPU of the type, UUID or mode the pod asks for ({r.text})"
    if code == t.GPU_UNAVAILABLE:
        return f"{n}{have} no usable GPU registered (unhealthy, cordoned or unregistered: {r.text})"
    if code == t.RESOURCE_QUOTA:
        return f"{n}would exceed the namespace's GPU resource quota"
    if code == t.MAX_NODE_GROUP_SIZE:
        return f"{n}{are} at {'its' if r.count == 1 else 'their'} maximum size"
    if code == t.MAX_CLUSTER_RESOURCES:
        return f"{n}would exceed the cluster's resource limits ({r.text})"
    if code == t.SCALE_UP_BACKOFF:
        return f"{n}{are} in backoff after a failed scale-up"
    if code == t.NODE_GROUP_NOT_READY:
        return f"{n}{are} not ready for scale-up"
    if code == t.SCALE_UP_TRIGGERED:
        return f"{n}{are} growing for the pod ({r.text})"
    if code == t.PORTS:
        return f"{n}{have} no free host ports for the pod"
    if code == t.TOO_MANY_PODS:
        return f"{n}{are} at {'its' if r.count == 1 else 'their'} pod limit"
    if code == t.TOPOLOGY_SPREAD:
        return f"{n}would break the pod's topology spread constraints"
    if code == t.NO_NODES:
        return "no nodes are registered with the scheduler"
    if code == t.NO_VICTIMS:
        return f"{n}{have} no lower-priority pods to evict"
    if code == t.PREEMPTION_NOT_HELPFUL:
        return f"{n}would not fit the pod even after evictions"
    if code == t.PREEMPTION_NOT_ELIGIBLE:
        return "the pod may not preempt (preemptionPolicy=Never)"
    return f"{n}: {r.text}" if n else r.text


def _taint_str(taint: dict[str, str] | None) -> str:
    if not taint:
        return ""
    return f"{taint['key']}={taint['value']}" if taint.get("value") else taint["key"]


def ranked(reasons: list[t.Reason]) -> list[t.Reason]:
    """Dominant reason first: most nodes, then the scheduler's own order."""
    return sorted(reasons, key=lambda r: -(r.count or 0))


def summarize(p: t.ParsedMessage) -> str:
    if any(r.code == t.NO_NODES for r in p.reasons):
        return "The scheduler has no nodes to place the pod on."
    clauses = [describe_reason(r) for r in ranked(p.reasons)]
    if p.total_nodes is not None:
        lead = f"{p.total_nodes} {t.plural(p.total_nodes, 'node', 'nodes')} considered"
    else:
        lead = "No node fits the pod"
    sentence = f"{lead}: {', '.join(clauses)}" if clauses else f"{lead}, none fits the pod"
    if p.preemption is not None and p.preemption.reasons:
        pre = ", ".join(describe_reason(r) for r in ranked(p.preemption.reasons))
        sentence += f"; preemption cannot help ({pre})"
    return sentence + "."
