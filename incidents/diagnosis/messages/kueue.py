"""Parse Kueue Workload condition/event messages (QuotaReserved=False, Evicted, Preempted).

Formats read from kubernetes-sigs/kueue (pkg/scheduler/flavorassigner/flavorassigner.go,
pkg/scheduler/scheduler.go, pkg/controller/core/workload_controller.go and their
history since 2022):

- "couldn't assign flavors to pod set main: insufficient unused quota for
  nvidia.com/gpu in flavor default-flavor, 8 more needed" (2022: "Couldn't assign
  flavors for podSet X: insufficient quota for cpu flavor F, 3 more needed" and
  "... more needed after borrowing"; "insufficient unused quota in cohort for ...")
- max capacity, three wordings: "insufficient quota for cpu flavor F in
  ClusterQueue" (2022–2024), "insufficient quota for R in flavor F, request >
  maximum capacity (24 > 16)" (2024–2025), "... previously considered podsets
  requests (16) + current podset request (8) > maximum capacity (16)" (2025+)
- flavors that cannot host the pods: "flavor F doesn't match node affinity"
  ("doesn't match with node affinity" in 2022), "untolerated taint {k v} in
  flavor F", "flavor F not found", "flavor F does not provide resource R",
  "resource R unavailable in ClusterQueue"
- "... . Pending the preemption of 2 workload(s)"
- "ClusterQueue cq is inactive", "ClusterQueue cq doesn't exist", "LocalQueue lq
  doesn't exist", "... is stopped", "... is terminating or missing"
- "Preempted to accommodate a workload (UID: u, JobUID: j) due to prioritization
  in the ClusterQueue; preemptor path: ..."
- the oldest: "Workload didn't fit in the remaining quota"
- WaitForPodsReady: Evicted "Exceeded the PodsReady timeout ns/name" (reason
  PodsReadyTimeout), PodsReady=False "Not all pods are ready or succeeded"
- deactivation (pkg/controller/core/workload_controller.go): "The workload is
  deactivated due to exceeding the maximum number of re-queuing retries"
  (requeuing backoffLimitCount, 2024+), "... due to exceeding the maximum
  execution time" and the event "The maximum execution time (600s) exceeded",
  "... due to AdmissionCheck in Rejected state: \"prov\" (msg)" (2025+; 2024:
  "Admission check(s): [prov], were rejected"), or just "The workload is deactivated"
- admission checks: "The workload has failed admission checks", "Evicted due to
  AdmissionChecks in Retry state: ..."
- queue log lines: "Workload is inadmissible because ClusterQueue is inactive",
  "... because of missing LocalQueue"; eviction "The ClusterQueue is stopped"

Condition reasons (v1beta1 `Pending`/`Inadmissible`, v1beta2 granular
`WaitingForQuota`, `ExceedsMaxQuota`, `NoMatchingFlavor`, `Misconfigured`,
`Suspended`, `WaitingForPreemptedWorkloads`, ...) are accepted as a hint.
"""

from __future__ import annotations

import logging
import re

from incidents.diagnosis.messages import types as t
from incidents.diagnosis.messages.kueue_lifecycle import lifecycle

logger = logging.getLogger(__name__)

# Reason hint -> cause (apis/kueue/v1beta1 and v1beta2 workload_types.go).
REASON_CAUSES: dict[str, str | None] = {
    "WaitingForQuota": t.CAUSE_QUOTA_EXHAUSTED,
    "ExceedsMaxQuota": t.CAUSE_EXCEEDS_MAX_CAPACITY,
    "NoMatchingFlavor": t.CAUSE_FLAVOR_MISMATCH,
    "Misconfigured": t.CAUSE_QUEUE_MISSING_OR_INACTIVE,
    "Suspended": t.CAUSE_QUEUE_MISSING_OR_INACTIVE,
    "Inadmissible": t.CAUSE_QUEUE_MISSING_OR_INACTIVE,
    "ClusterQueueStopped": t.CAUSE_QUEUE_MISSING_OR_INACTIVE,
    "LocalQueueStopped": t.CAUSE_QUEUE_MISSING_OR_INACTIVE,
    "WaitingForPreemptedWorkloads": t.CAUSE_WAITING_FOR_PREEMPTION,
    "Preempted": t.CAUSE_PREEMPTED,
    "InClusterQueue": t.CAUSE_PREEMPTED,
    "InCohortReclamation": t.CAUSE_PREEMPTED,
    "InCohortFairSharing": t.CAUSE_PREEMPTED,
    "InCohortReclaimWhileBorrowing": t.CAUSE_PREEMPTED,
    "TopologyPlacementFailed": t.CAUSE_OTHER,
    "Pending": None,
    "PendingEvaluation": None,
    "WaitingForPodsReady": t.CAUSE_OTHER,
    "QuotaReserved": None,
    "Admitted": None,
    "Evicted": None,
    "PodsReadyTimeout": t.CAUSE_PODS_READY_TIMEOUT,
    "WaitForStart": t.CAUSE_WAITING_FOR_PODS_READY,
    "WaitForRecovery": t.CAUSE_WAITING_FOR_PODS_READY,
    "AdmissionCheck": t.CAUSE_ADMISSION_CHECK,
    "AdmissionCheckRejected": t.CAUSE_ADMISSION_CHECK,
    "Deactivated": t.CAUSE_DEACTIVATED,
    "InactiveWorkload": t.CAUSE_DEACTIVATED,
    "RequeuingLimitExceeded": t.CAUSE_DEACTIVATED,
    "MaximumExecutionTimeExceeded": t.CAUSE_DEACTIVATED,
    "NodeFailures": t.CAUSE_OTHER,
}


_MARKERS_RE = re.compile(
    r"assign flavors|assign a flavor|\bin flavor\b|\bflavor \S+ (?:doesn't|does not|not found)|"
    r"(?-i:\b(?:Cluster|Local)Queue\b)|didn't fit in the remaining quota|Pending the preemption of|"
    r"(?:Preempted|Evicted) to accommodate|insufficient (?:unused )?quota|no longer fits after processing|"
    r"resource flavor|PodsReady timeout|Not all pods are ready or succeeded|The workload is deactivated|"
    r"re-queuing retries|maximum execution time \(\d+s\) exceeded|exceeding the maximum execution time|"
    r"failed admission checks|AdmissionChecks? in \w+ state|Admission check\(s\)|"
    r"Workload is inadmissible",
    re.I,
)
_PODSET_RE = re.compile(
    r"(?:couldn't|failed to|could not) assign (?:flavors|a flavor for \S+) (?:to pod ?set|for pod ?set|in pod ?set) "
    r"(?P<ps>[^:]+):",
    re.I,
)
_QTY = r"[0-9][0-9.]*[A-Za-z]*"
_UNUSED_RE = re.compile(
    rf"insufficient (?:unused )?quota(?: in cohort)? for (?:(?P<res>\S+) )?(?:in )?flavor (?P<flavor>[^\s,]+), "
    rf"(?P<qty>{_QTY}) more needed(?P<borrow> after borrowing)?",
    re.I,
)
_MAX_NEW_RE = re.compile(
    rf"insufficient quota for (?P<res>\S+) in flavor (?P<flavor>[^\s,]+), previously considered podsets requests "
    rf"\((?P<prev>{_QTY})\) \+ current podset request \((?P<req>{_QTY})\) > maximum capacity \((?P<max>{_QTY})\)",
    re.I,
)
_MAX_MID_RE = re.compile(
    rf"insufficient quota for (?P<res>\S+) in flavor (?P<flavor>[^\s,]+), request > maximum capacity "
    rf"\((?P<req>{_QTY}) > (?P<max>{_QTY})\)",
    re.I,
)
_MAX_OLD_RE = re.compile(
    r"insufficient quota for (?P<res>\S+) (?:in )?flavor (?P<flavor>\S+) in ClusterQueue", re.I
)
_BORROW_RE = re.compile(r"borrowing limit for (?:(?P<res>\S+) )?flavor (?P<flavor>[^\s,]+) exceeded", re.I)
_AFFINITY_RE = re.compile(r"flavor (?P<flavor>[^\s,]+) doesn't match (?:with )?node affinity", re.I)
_TAINT_RE = re.compile(r"untolerated taint (?P<taint>.+?) in flavor (?P<flavor>[^\s,]+)", re.I)
_NOT_FOUND_RE = re.compile(r"flavor (?P<flavor>[^\s,]+) not found", re.I)
_NOT_PROVIDED_RE = re.compile(r"flavor (?P<flavor>[^\s,]+) does not provide resource (?P<res>[^\s,]+)", re.I)
_UNAVAILABLE_RE = re.compile(r"resource (?P<res>[^\s,]+) unavailable in ClusterQueue", re.I)
_TOPOLOGY_RE = re.compile(
    r"topology \"?(?P<topo>[^\"]+?)\"? doesn't allow to fit any of (?P<n>\d+) pod\(s\)", re.I
)
_EXCLUDED_RE = re.compile(r"excluded: resource \"(?P<res>[^\"]+)\": (?P<n>\d+)", re.I)
_QUEUE_RE = re.compile(
    r"(?P<kind>ClusterQueue|LocalQueue) (?P<name>[^\s,.]+(?:\.[^\s,.]+)*) "
    r"(?P<state>is inactive|doesn't exist|does not exist|is terminating or missing|is stopped|not found|"
    r"is pending deletion)",
    re.I,
)
_NS_SELECTOR_RE = re.compile(r"namespace doesn't match ClusterQueue selector", re.I)
_PREEMPTED_RE = re.compile(
    r"(?:Preempted|Evicted) to accommodate (?:a|another) (?:higher priority )?workload"
    r"(?: \(UID: (?P<uid>[^,)]+)(?:, JobUID: (?P<juid>[^)]+))?\))?(?: due to (?P<why>[^;.]+))?",
    re.I,
)
_PENDING_PREEMPTION_RE = re.compile(r"Pending the preemption of (?P<n>\d+) workload\(s\)", re.I)
_WAITING_PREEMPTED_RE = re.compile(r"waiting for (?:the )?preempted workloads?", re.I)
_ADMITTED_RE = re.compile(r"(?:Quota reserved in|Admitted by) ClusterQueue (?P<cq>[^\s,]+)", re.I)
_INADMISSIBLE_RE = re.compile(
    r"Workload is inadmissible because (?:ClusterQueue is inactive|of (?:missing|stopped) (?:LocalQueue|ClusterQueue))|"
    r"The (?:ClusterQueue|LocalQueue) is stopped|\bLocalQueue is stopped",
    re.I,
)
_PREEMPTION_MECHANISMS = (
    (
        re.compile(r"reclamation within the cohort while borrowing", re.I),
        t.MECH_PREEMPT_COHORT_RECLAIM_WHILE_BORROWING,
    ),
    (re.compile(r"reclamation within the cohort", re.I), t.MECH_PREEMPT_COHORT_RECLAMATION),
    (re.compile(r"fair sharing", re.I), t.MECH_PREEMPT_FAIR_SHARING),
    (re.compile(r"prioritization in the ClusterQueue", re.I), t.MECH_PREEMPT_IN_CLUSTER_QUEUE),
)
_NO_FIT_RE = re.compile(
    r"didn't fit in the remaining quota|no longer fits after processing another workload", re.I
)


# Reasons only Kueue uses: enough on their own to call the text Kueue's. Generic
# ones (Pending, Preempted, Evicted, Admitted) are shared with Kubernetes events.
DETECTING_REASONS = frozenset(
    {
        "WaitingForQuota",
        "ExceedsMaxQuota",
        "NoMatchingFlavor",
        "Misconfigured",
        "Suspended",
        "Inadmissible",
        "WaitingForPreemptedWorkloads",
        "TopologyPlacementFailed",
        "PendingEvaluation",
        "WaitingForPodsReady",
        "InClusterQueue",
        "InCohortReclamation",
        "InCohortFairSharing",
        "InCohortReclaimWhileBorrowing",
        "ClusterQueueStopped",
        "LocalQueueStopped",
        "QuotaReserved",
        "PodsReadyTimeout",
        "RequeuingLimitExceeded",
        "MaximumExecutionTimeExceeded",
        "AdmissionCheckRejected",
        "InactiveWorkload",
        "WaitForStart",
        "WaitForRecovery",
    }
)


def looks_like(text: str, reason: str | None = None) -> bool:
    return bool(_MARKERS_RE.search(text)) or reason in DETECTING_REASONS


def _item(code: str, m: re.Match[str], res: str | None = None, flavor: str | None = None) -> t.Reason:
    return t.Reason(code=code, count=None, resource=res, text=m.group(0), flavor=flavor)


def _flavor_reasons(s: str) -> tuple[list[t.Reason], list[tuple[str, re.Match[str]]]]:
    """Every per-flavor reason in message order, with the kind and match each came from."""
    found: list[tuple[int, t.Reason, str, re.Match[str]]] = []
    for m in _MAX_NEW_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_EXCEEDS_MAX_CAPACITY, m, m["res"], m["flavor"]), "max_new", m))
    for m in _MAX_MID_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_EXCEEDS_MAX_CAPACITY, m, m["res"], m["flavor"]), "max_mid", m))
    for m in _MAX_OLD_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_EXCEEDS_MAX_CAPACITY, m, m["res"], m["flavor"]), "max_old", m))
    for m in _UNUSED_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_QUOTA_EXHAUSTED, m, m["res"], m["flavor"]), "unused", m))
    for m in _BORROW_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_QUOTA_EXHAUSTED, m, m["res"], m["flavor"]), "borrow", m))
    for m in _AFFINITY_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_FLAVOR_MISMATCH, m, None, m["flavor"]), "affinity", m))
    for m in _TAINT_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_FLAVOR_MISMATCH, m, None, m["flavor"]), "taint", m))
    for m in _NOT_PROVIDED_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_FLAVOR_MISMATCH, m, m["res"], m["flavor"]), "provide", m))
    for m in _NOT_FOUND_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_FLAVOR_MISMATCH, m, None, m["flavor"]), "notfound", m))
    for m in _UNAVAILABLE_RE.finditer(s):
        found.append((m.start(), _item(t.CAUSE_FLAVOR_MISMATCH, m, m["res"], None), "unavailable", m))
    for m in _TOPOLOGY_RE.finditer(s):
        ex = _EXCLUDED_RE.search(s, m.end())
        found.append((m.start(), _item(t.CAUSE_OTHER, m, ex["res"] if ex else None, None), "topology", m))
    found.sort(key=lambda x: x[0])
    return [f[1] for f in found], [(f[2], f[3]) for f in found]


def _numbers_for(kind: str, m: re.Match[str]) -> tuple[dict[str, int | float], int | float | None]:
    """Numbers a matched item carries, and how much more would be needed."""
    if kind == "unused":
        needed = t.to_number(m["qty"])
        return ({"needed": needed} if needed is not None else {}), needed
    if kind in ("max_new", "max_mid"):
        req, cap = t.to_number(m["req"]), t.to_number(m["max"])
        prev = t.to_number(m["prev"]) if kind == "max_new" else None
        nums = {
            k: v
            for k, v in (("requested", req), ("max_capacity", cap), ("previously_requested", prev))
            if v is not None
        }
        needed = None
        if req is not None and cap is not None:
            needed = req + (prev or 0) - cap
        return nums, needed
    return {}, None


_CAUSE_ORDER = (
    t.CAUSE_QUOTA_EXHAUSTED,
    t.CAUSE_EXCEEDS_MAX_CAPACITY,
    t.CAUSE_FLAVOR_MISMATCH,
    t.CAUSE_OTHER,
)


def parse(text: str, reason: str | None = None) -> t.ParsedMessage | None:
    s = t.normalize(text)
    if not s or not looks_like(s, reason):
        return None
    p = t.ParsedMessage(source=t.SOURCE_KUEUE, text=s)
    podset_m = _PODSET_RE.search(s)
    podset = podset_m["ps"].strip() if podset_m else None

    qm = _QUEUE_RE.search(s)
    nsm = _NS_SELECTOR_RE.search(s)
    am = _ADMITTED_RE.search(s)
    pm = _PREEMPTED_RE.search(s)
    reasons, matches = _flavor_reasons(s)
    p.reasons = reasons
    waiting = _PENDING_PREEMPTION_RE.search(s)

    if lifecycle(s, p, reason):
        return p
    im = _INADMISSIBLE_RE.search(s)
    if qm or nsm or im:
        p.cause = t.CAUSE_QUEUE_MISSING_OR_INACTIVE
        p.queue = qm["name"] if qm else None
        hit = qm or nsm or im
        assert hit is not None
        p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=hit.group(0))]
    elif am and not reasons:
        p.cause, p.queue = t.CAUSE_OTHER, am["cq"]
        p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=s[:500])]
        p.summary = f"Kueue admitted the workload: {s[:200]}"
        return p
    elif pm:
        p.cause = t.CAUSE_PREEMPTED
        p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=pm.group(0))]
        why = pm["why"] or ""
        p.mechanism = next((mech for rx, mech in _PREEMPTION_MECHANISMS if rx.search(why)), None)
    else:
        causes = [r.code for r in reasons]
        chosen = next((c for c in _CAUSE_ORDER if c in causes), None)
        no_fit = _NO_FIT_RE.search(s)
        if chosen is None and no_fit:
            chosen = t.CAUSE_QUOTA_EXHAUSTED
            p.reasons = [t.Reason(code=chosen, count=None, resource=None, text=no_fit.group(0))]
        if chosen is None and _WAITING_PREEMPTED_RE.search(s):
            chosen = t.CAUSE_WAITING_FOR_PREEMPTION
        if chosen is None and reason in REASON_CAUSES:
            chosen = REASON_CAUSES[reason]
            if chosen is not None:
                p.cause = chosen
                p.reasons = [t.Reason(code=chosen, count=None, resource=None, text=s[:500])]
                p.summary = f"Kueue reports {reason}: {s[:200]}"
                return p
        p.cause = chosen or t.CAUSE_OTHER
        if not p.reasons:
            p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=s[:500])]
        for (kind, m), r in zip(matches, reasons, strict=True):
            if r.code == p.cause:
                p.resource = r.resource
                p.numbers, p.needed = _numbers_for(kind, m)
                break
        if waiting:
            p.numbers["preemptions_pending"] = int(waiting["n"])
            p.cause = t.CAUSE_WAITING_FOR_PREEMPTION

    if p.queue is None:
        cq = re.search(r"\bClusterQueue (?P<name>[a-z0-9][-a-z0-9.]*[a-z0-9])\b", s)
        if cq and cq["name"].lower() not in ("selector",):
            p.queue = cq["name"]
    p.summary = summarize(p, podset, pm, reason)
    return p


def summarize(
    p: t.ParsedMessage, podset: str | None, pm: re.Match[str] | None = None, reason: str | None = None
) -> str:
    ps = f" for pod set {podset}" if podset else ""
    first = p.reasons[0] if p.reasons else None
    if p.cause == t.CAUSE_QUEUE_MISSING_OR_INACTIVE:
        return f"Kueue admits nothing here: {first.text if first else 'the queue is missing or inactive'}."
    if p.cause == t.CAUSE_PREEMPTED:
        who = f" (UID {pm['uid']})" if pm and pm["uid"] else ""
        why = f" due to {pm['why'].strip()}" if pm and pm["why"] else ""
        return f"Kueue preempted the workload to make room for another workload{who}{why}."
    flavors = ", ".join(r.text for r in p.reasons[:4])
    if p.cause in (t.CAUSE_QUOTA_EXHAUSTED, t.CAUSE_WAITING_FOR_PREEMPTION):
        need = (
            f" ({t.fmt_number(p.needed)} more {p.resource or 'units'} needed)" if p.needed is not None else ""
        )
        res = f" of {p.resource}" if p.resource else ""
        base = f"Kueue cannot reserve quota{ps}: the ClusterQueue has no unused quota{res} left{need}"
        if p.cause == t.CAUSE_WAITING_FOR_PREEMPTION:
            n = p.numbers.get("preemptions_pending")
            base += (
                f"; it is waiting for {n} preempted workload(s) to release theirs"
                if n
                else "; waiting for preemption"
            )
        return base + "."
    if p.cause == t.CAUSE_EXCEEDS_MAX_CAPACITY:
        req, cap = p.numbers.get("requested"), p.numbers.get("max_capacity")
        prev = p.numbers.get("previously_requested")
        nums = ""
        if req is not None and cap is not None:
            before = f"{t.fmt_number(prev)} for earlier pod sets + " if prev else ""
            nums = f" ({before}{t.fmt_number(req)} requested > {t.fmt_number(cap)} maximum)"
        res = p.resource or "a resource"
        return (
            f"The request{ps} exceeds the most {res} the ClusterQueue can ever provide{nums}: "
            f"it will wait until the request or the quota changes."
        )
    if p.cause == t.CAUSE_FLAVOR_MISMATCH:
        return f"No ResourceFlavor can host the pods{ps}: {flavors}."
    if flavors:
        return f"Kueue cannot admit the workload{ps}: {flavors}."
    said = f" ({reason})" if reason else ""
    return f"Kueue{said}: {p.text[:200]}"
