"""Proposed actions for the top hypotheses, with impact computed from inventory at t. Never executed by rcaweb.

Each action says what to run by hand, who else it touches (the pods, jobs,
projects and queues on the same node or sharing the same quota, as they were
at t), how to verify it worked and how to roll it back.

``propose`` dispatches each supported cause to its builder; the builders live by what they act on: a faulty
node or GPU (``actions_nodes``), a quota or department limit (``actions_quota``), where a job's pods could go
(``actions_placement``), a workload's containers and GPUs (``actions_workloads``), the repair of the missing
GPUs a waiting job needs (``actions_repair``).
"""

from __future__ import annotations

import logging

from incidents.diagnosis import codes as C
from incidents.diagnosis.actions_nodes import device_plugin, drain, xid
from incidents.diagnosis.actions_placement import (
    capacity,
    cpu_memory,
    fragmentation,
    mig,
    queue_order_action,
    request_size,
    selector,
    taint,
)
from incidents.diagnosis.actions_quota import department, quota
from incidents.diagnosis.actions_repair import gpu_missing, gpu_node_unavailable
from incidents.diagnosis.actions_workloads import (
    idle,
    image,
    over_requested,
    thermal,
    workload,
)
from incidents.diagnosis.types import ActionDraft, DiagnosisInput, Finding

logger = logging.getLogger(__name__)


TOP_N = 3


def propose(di: DiagnosisInput, ranked: list[Finding], top_n: int = TOP_N) -> list[ActionDraft]:
    out: list[ActionDraft] = []
    for f in [f for f in ranked if f.supported][:top_n]:
        builder = BUILDERS.get(f.code)
        if builder is None:
            continue
        try:
            drafts = builder(di, f)
        except (KeyError, TypeError, ValueError) as exc:  # a missing fact must not lose the other actions
            logger.warning("no action for %s: %s", f.code, exc)
            continue
        # Two causes about one fault (an Xid and the GPU it took away) propose the same step once.
        seen = {(a.title, a.command) for a in out}
        out.extend(a for a in drafts if (a.title, a.command) not in seen)
    return out


BUILDERS = {
    C.GPU_XID_FAULT: xid,
    C.GPU_ECC_ERRORS: drain,
    C.GPU_MISSING: gpu_missing,
    C.NVLINK_ERRORS: drain,
    C.DEVICE_PLUGIN_UNHEALTHY: device_plugin,
    C.GPU_NODE_UNAVAILABLE: gpu_node_unavailable,
    C.PROJECT_QUOTA_EXHAUSTED: quota,
    C.GPU_CAPACITY_SHORTAGE: capacity,
    C.GPU_FRAGMENTATION: fragmentation,
    C.CPU_MEMORY_SHORTAGE: cpu_memory,
    C.DEPARTMENT_QUOTA_EXHAUSTED: department,
    C.MIG_PROFILE_UNAVAILABLE: mig,
    C.UNTOLERATED_TAINT: taint,
    C.NODE_SELECTOR_MISMATCH: selector,
    C.REQUEST_SIZE_CHANGED: request_size,
    C.QUEUE_PRIORITY: queue_order_action,
    C.CRASHLOOP_CONFIG_ERROR: workload,
    C.OOM_KILLED: workload,
    C.GPU_OOM: workload,
    C.PREEMPTED: workload,
    C.IMAGE_PULL_ERROR: image,
    C.IDLE_GPU_ALLOCATION: idle,
    C.OVER_REQUESTED: over_requested,
    C.GPU_THERMAL_THROTTLING: thermal,
}
