"""The scheduler's own words about a waiting job: its newest message (the job's condition, a pod's
PodScheduled condition, or an event), parsed and cited, and the causes that message points at. The diagnosis
cites them next to its own computation, never instead of it."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis.citations import cite_event, cite_state
from incidents.diagnosis.messages import parse_message
from incidents.diagnosis.node_resources import MIG_PREFIX
from incidents.diagnosis.types import Cite, DiagnosisInput, EntityState

SCHEDULING_EVENT_REASONS = (
    "FailedScheduling",
    "Unschedulable",
    "NotReady",
    "PodGroupUnschedulable",
    "NotTriggerScaleUp",  # cluster-autoscaler: why adding a node would not help either
)


def scheduler_said(di: DiagnosisInput, job: EntityState) -> tuple[Any | None, Cite | None]:
    """Parse the newest scheduler message about the job (condition, pod condition, or event) and cite it."""
    sched = job.get("scheduling") or {}
    if sched.get("message"):
        return parse_message(sched["message"]), cite_state(job, di.t)
    for pod in di.pods_of_job(job):
        cond = (pod.get("conditions") or {}).get("PodScheduled") or {}
        if cond.get("status") == "False" and cond.get("message"):
            return parse_message(cond["message"]), cite_state(pod, di.t)
    names = {job.name} | {p.name for p in di.pods_of_job(job)}
    events = [
        e
        for e in di.events
        if e.involved
        and e.involved.name.startswith(tuple(names))
        and e.time <= di.t
        and (e.reason in SCHEDULING_EVENT_REASONS or "schedul" in e.reason.lower())
    ]
    if events:
        ev = max(events, key=lambda e: e.time)
        return parse_message(ev.message), cite_event(ev)
    return None, None


def said_codes(parsed: Any) -> set[str]:
    """Which hypothesis codes the scheduler's message itself points at."""
    if parsed is None or getattr(parsed, "source", "unknown") == "unknown":
        return set()
    out: set[str] = set()
    cause = getattr(parsed, "cause", None)
    if cause in ("quota_exhausted", "exceeds_max_capacity"):
        out.add(C.PROJECT_QUOTA_EXHAUSTED)
    if cause in ("insufficient_capacity",):
        texts = " ".join(r.text or "" for r in getattr(parsed, "reasons", []) or [])
        # KAI's "didn't have enough of mig profile: nvidia.com/mig-<p>" is about the layout, not GPU capacity.
        out.add(C.MIG_PROFILE_UNAVAILABLE if MIG_PREFIX in texts else C.GPU_CAPACITY_SHORTAGE)
    for r in getattr(parsed, "reasons", []) or []:
        if r.code == "insufficient_gpu" and str(r.resource or "").startswith(MIG_PREFIX):
            out.add(C.MIG_PROFILE_UNAVAILABLE)  # "didn't have enough of mig profile: nvidia.com/mig-3g.40gb"
            continue
        code = _REASON_HYPOTHESIS.get(r.code)
        if code:
            out.add(code)
    return out


# Parsed reason code -> the hypothesis it corroborates. A pressure node
# (pre-1.13 "had disk pressure") is what the *-pressure taint says today, which
# the fit table counts as a taint; a node group at its maximum size or a cluster
# at its resource limit means the autoscaler cannot add the GPUs. Volume attach
# limits (volume_node_limit), HAMi device mismatches and the autoscaler's backoff
# point at no hypothesis here, so they corroborate none.
_REASON_HYPOTHESIS = {
    "insufficient_gpu": C.GPU_CAPACITY_SHORTAGE,
    "untolerated_taint": C.UNTOLERATED_TAINT,
    "node_pressure": C.UNTOLERATED_TAINT,
    "node_selector_mismatch": C.NODE_SELECTOR_MISMATCH,
    "affinity_mismatch": C.NODE_SELECTOR_MISMATCH,
    "unschedulable_node": C.GPU_NODE_UNAVAILABLE,
    "node_not_ready": C.GPU_NODE_UNAVAILABLE,
    "max_node_group_size": C.GPU_CAPACITY_SHORTAGE,
    "max_cluster_resources": C.GPU_CAPACITY_SHORTAGE,
    "insufficient_cpu": C.CPU_MEMORY_SHORTAGE,
    "insufficient_memory": C.CPU_MEMORY_SHORTAGE,
}
