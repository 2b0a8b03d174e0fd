"""Parse Volcano scheduler messages: pod fit errors, PodGroup gang conditions, enqueue events.

Formats read from volcano-sh/volcano:

- pkg/scheduler/api/unschedule_info.go FitErrors.Error(): "0/4 nodes are
  unavailable: 4 Insufficient nvidia.com/gpu." (sorted "count reason" histogram;
  "all nodes are unavailable: ..." when no node list was kept; "In hyperNode X: "
  before it under network-topology scheduling). Volcano's own reasons sit next to
  the kube predicates: "node(s) resource fit failed", "node(s) pod number exceeded".
- FitError.Error(): "task ns/p-0 on node n1 fit failed: Insufficient nvidia.com/gpu".
- pkg/scheduler/plugins/gang/gang.go + api/job_info.go FitError(): the PodGroup
  Unschedulable condition "3/4 tasks in gang unschedulable: pod group is not
  ready, 1 Pending, 4 minAvailable; Pending: 1 Unschedulable, 2 Undetermined.
  Origin reason is p-0: 0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu."
- plugins/proportion + capacity: PodGroup event "queue resource quota
  insufficient" (since 2024 ": insufficient nvidia.com/gpu, insufficient cpu"),
  plugins/overcommit: "resource in cluster is overused" (": overused nvidia.com/gpu").
- the job controller repeats the gang condition as "PodGroup ns:name
  unschedule,reason: 1/0 tasks in gang unschedulable: ...".
"""

from __future__ import annotations

import re

from incidents.diagnosis.messages import types as t
from incidents.diagnosis.messages.kube_scheduler import describe_reason, ranked, reasons_from_histogram

_NODES_RE = re.compile(
    r"(?:In hyperNode (?P<hyper>\S+): )?(?:(?<!\d)(?P<avail>\d{1,9})/(?P<total>\d{1,9}) nodes|all nodes) are unavailable:?\s*",
    re.I,
)
_TASK_FIT_RE = re.compile(r"task (?P<task>\S+) on node (?P<node>\S+) fit failed:\s*", re.I)
_GANG_RE = re.compile(
    r"(?<!\d)(?P<unready>\d{1,9})/(?P<tasks>\d{1,9}) tasks in gang unschedulable:\s*pod group is (?P<state>not ready|ready)"
    r"(?P<hist>(?:, \d{1,9} [A-Za-z]{1,40}){0,12})(?:; Pending: (?P<pending>(?:\d{1,9} [A-Za-z]{1,40}(?:, )?){1,12}))?",
    re.I,
)
_ORIGIN_RE = re.compile(r"Origin reason is(?: (?P<task>[^:]{1,253}))?:\s*", re.I)
_RES_LIST = r"(?P<res>(?:insufficient|overused) [^\s,;]+(?:, (?:insufficient|overused) [^\s,;]+){0,20})"
_QUEUE_QUOTA_RE = re.compile(rf"queue resource quota insufficient(?::\s*{_RES_LIST})?", re.I)
_OVERUSED_RE = re.compile(rf"resource in cluster is overused(?::\s*{_RES_LIST})?", re.I)
_HIST_ITEM_RE = re.compile(r"(?P<n>\d{1,9}) (?P<what>[A-Za-z]{1,40})")
_RES_ITEM_RE = re.compile(r"(?:insufficient|overused) (?P<res>[^\s,]+)", re.I)


def looks_like(text: str) -> bool:
    return bool(
        _NODES_RE.search(text)
        or _GANG_RE.search(text)
        or _QUEUE_QUOTA_RE.search(text)
        or _OVERUSED_RE.search(text)
        or _TASK_FIT_RE.search(text)
    )


def parse(text: str) -> t.ParsedMessage | None:
    s = t.normalize(text)
    if not s or not looks_like(s):
        return None
    p = t.ParsedMessage(source=t.SOURCE_VOLCANO, text=s)
    for handler in (_gang, _queue_quota, _overused, _fit_errors):
        if handler(s, p):
            return p
    return None


def _resources(raw: str | None) -> list[str]:
    return [m["res"].rstrip(".") for m in _RES_ITEM_RE.finditer(raw or "")]


def _fit_reasons(s: str) -> tuple[int | None, list[t.Reason]] | None:
    """Node-level reasons from a FitErrors or FitError text; None when there is neither."""
    m = _NODES_RE.search(s)
    if m:
        total = int(m["total"]) if m["total"] else None
        body = s[m.end() :]
        end = re.search(r"\.(?:\s|$)", body)
        body = (body[: end.start()] if end else body).strip().rstrip(".")
        return total, reasons_from_histogram(body, total) if body else []
    m = _TASK_FIT_RE.search(s)
    if m:
        body = s[m.end() :].strip().rstrip(".")
        return 1, reasons_from_histogram(", ".join(f"1 {b}" for b in re.split(r",\s+", body) if b), 1)
    return None


def _capacity_cause(reasons: list[t.Reason]) -> tuple[str, str | None]:
    insufficient = [r for r in reasons if r.code.startswith("insufficient_")]
    if not insufficient:
        return t.CAUSE_OTHER, None
    return t.CAUSE_INSUFFICIENT_CAPACITY, max(insufficient, key=lambda r: r.count or 0).resource


def _fit_errors(s: str, p: t.ParsedMessage) -> bool:
    found = _fit_reasons(s)
    if found is None:
        return False
    p.total_nodes, p.reasons = found
    p.cause, p.resource = _capacity_cause(p.reasons)
    if not p.reasons:
        p.reasons = [t.Reason(code=t.CAUSE_OTHER, count=None, resource=None, text=s[:500])]
        p.summary = "Volcano found no node for the pod and gave no reason."
        return True
    clauses = ", ".join(describe_reason(r) for r in ranked(p.reasons))
    lead = (
        f"Volcano considered {p.total_nodes} nodes" if p.total_nodes else "Volcano found no node for the pod"
    )
    p.summary = f"{lead}: {clauses}."
    return True


def _gang(s: str, p: t.ParsedMessage) -> bool:
    m = _GANG_RE.search(s)
    if not m:
        return False
    numbers: dict[str, int | float] = {"tasks_unschedulable": int(m["unready"]), "tasks": int(m["tasks"])}
    for item in _HIST_ITEM_RE.finditer(m["hist"] or ""):
        key = "min_available" if item["what"] == "minAvailable" else f"tasks_{item['what'].lower()}"
        numbers[key] = int(item["n"])
    for item in _HIST_ITEM_RE.finditer(m["pending"] or ""):
        numbers[f"pending_{item['what'].lower()}"] = int(item["n"])
    p.numbers = numbers
    origin = _ORIGIN_RE.search(s, m.end())
    found = _fit_reasons(s[origin.end() :]) if origin else None
    if found is not None and found[1]:
        p.total_nodes, p.reasons = found
        p.cause, p.resource = _capacity_cause(p.reasons)
        if p.cause == t.CAUSE_OTHER:
            p.cause = t.CAUSE_GANG_UNSCHEDULABLE
        clauses = ", ".join(describe_reason(r) for r in ranked(p.reasons))
        why = f" for task {origin['task'].strip()}" if origin and origin["task"] else ""
        p.summary = (
            f"The gang cannot start: {m['unready']} more task(s) must be placed to reach minAvailable "
            f"{numbers.get('min_available', '?')}; Volcano's first node-level reason{why}: {clauses}."
        )
        return True
    p.cause = t.CAUSE_GANG_UNSCHEDULABLE
    p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=m.group(0))]
    if numbers["tasks"] == 0:
        p.summary = (
            f"The gang has no pods yet (minAvailable {numbers.get('min_available', '?')}): Volcano has not "
            "let it into its queue, usually because the queue or the cluster lacks room for its minimum resources."
        )
    else:
        p.summary = (
            f"The gang cannot start: {m['unready']} more task(s) must be placed to reach minAvailable "
            f"{numbers.get('min_available', '?')} ({m['tasks']} task(s) exist)."
        )
    return True


def _queue_quota(s: str, p: t.ParsedMessage) -> bool:
    m = _QUEUE_QUOTA_RE.search(s)
    if not m:
        return False
    res = _resources(m["res"])
    p.cause, p.resource = t.CAUSE_QUOTA_EXHAUSTED, (res[0] if res else None)
    p.reasons = [t.Reason(code=p.cause, count=None, resource=r, text=m.group(0)) for r in res] or [
        t.Reason(code=p.cause, count=None, resource=None, text=m.group(0))
    ]
    what = f" ({', '.join(res)})" if res else ""
    p.summary = f"Volcano keeps the job out of its queue: the queue's quota is insufficient{what} for its minimum resources."
    return True


def _overused(s: str, p: t.ParsedMessage) -> bool:
    m = _OVERUSED_RE.search(s)
    if not m:
        return False
    res = _resources(m["res"])
    p.cause, p.resource = t.CAUSE_INSUFFICIENT_CAPACITY, (res[0] if res else None)
    p.reasons = [t.Reason(code=p.cause, count=None, resource=r, text=m.group(0)) for r in res] or [
        t.Reason(code=p.cause, count=None, resource=None, text=m.group(0))
    ]
    what = f" ({', '.join(res)})" if res else ""
    p.summary = (
        f"Volcano keeps the job waiting: the cluster has no idle resources{what} for its minimum resources."
    )
    return True
