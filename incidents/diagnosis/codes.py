"""Hypothesis codes (docs/design.md §8): one constant per code, never renamed.

Hypotheses, tests, scenario files (`expect: top: ...`) and stored rows all refer
to these strings, so a rename would silently orphan history. Extend only: add a
constant, add it to its family tuple, and ALL_CODES picks it up.
"""

from __future__ import annotations

#
# Scheduling
#
GPU_CAPACITY_SHORTAGE = "gpu_capacity_shortage"
GPU_FRAGMENTATION = "gpu_fragmentation"
UNTOLERATED_TAINT = "untolerated_taint"
NODE_SELECTOR_MISMATCH = "node_selector_mismatch"
PROJECT_QUOTA_EXHAUSTED = "project_quota_exhausted"
QUEUE_PRIORITY = "queue_priority"
REQUEST_SIZE_CHANGED = "request_size_changed"
GPU_NODE_UNAVAILABLE = "gpu_node_unavailable"
CPU_MEMORY_SHORTAGE = "cpu_memory_shortage"
DEPARTMENT_QUOTA_EXHAUSTED = "department_quota_exhausted"
MIG_PROFILE_UNAVAILABLE = "mig_profile_unavailable"

#
# GPU / node health
#
GPU_XID_FAULT = "gpu_xid_fault"
GPU_ECC_ERRORS = "gpu_ecc_errors"
GPU_MISSING = "gpu_missing"
DEVICE_PLUGIN_UNHEALTHY = "device_plugin_unhealthy"
GPU_THERMAL_THROTTLING = "gpu_thermal_throttling"
NVLINK_ERRORS = "nvlink_errors"

#
# Workloads
#
CRASHLOOP_CONFIG_ERROR = "crashloop_config_error"
OOM_KILLED = "oom_killed"
GPU_OOM = "gpu_oom"
IMAGE_PULL_ERROR = "image_pull_error"
PREEMPTED = "preempted"

#
# Efficiency
#
IDLE_GPU_ALLOCATION = "idle_gpu_allocation"
OVER_REQUESTED = "over_requested"

#
# Context
#
RECENT_CHANGE = "recent_change"

SCHEDULING_CODES: tuple[str, ...] = (
    GPU_CAPACITY_SHORTAGE,
    GPU_FRAGMENTATION,
    UNTOLERATED_TAINT,
    NODE_SELECTOR_MISMATCH,
    PROJECT_QUOTA_EXHAUSTED,
    QUEUE_PRIORITY,
    REQUEST_SIZE_CHANGED,
    GPU_NODE_UNAVAILABLE,
    CPU_MEMORY_SHORTAGE,
    DEPARTMENT_QUOTA_EXHAUSTED,
    MIG_PROFILE_UNAVAILABLE,
)
HEALTH_CODES: tuple[str, ...] = (
    GPU_XID_FAULT,
    GPU_ECC_ERRORS,
    GPU_MISSING,
    DEVICE_PLUGIN_UNHEALTHY,
    GPU_THERMAL_THROTTLING,
    NVLINK_ERRORS,
)
WORKLOAD_CODES: tuple[str, ...] = (CRASHLOOP_CONFIG_ERROR, OOM_KILLED, GPU_OOM, IMAGE_PULL_ERROR, PREEMPTED)
EFFICIENCY_CODES: tuple[str, ...] = (IDLE_GPU_ALLOCATION, OVER_REQUESTED)
CONTEXT_CODES: tuple[str, ...] = (RECENT_CHANGE,)

ALL_CODES: tuple[str, ...] = (
    SCHEDULING_CODES + HEALTH_CODES + WORKLOAD_CODES + EFFICIENCY_CODES + CONTEXT_CODES
)

# Each code in an operator's words: what statements, titles and lists say instead of the code itself.
NAMES: dict[str, str] = {
    GPU_CAPACITY_SHORTAGE: "not enough free GPUs",
    GPU_FRAGMENTATION: "free GPUs fragmented across nodes",
    UNTOLERATED_TAINT: "untolerated taint",
    NODE_SELECTOR_MISMATCH: "node selector matches no node",
    PROJECT_QUOTA_EXHAUSTED: "project quota exhausted",
    QUEUE_PRIORITY: "behind higher-priority jobs in the queue",
    REQUEST_SIZE_CHANGED: "request size changed",
    GPU_NODE_UNAVAILABLE: "GPU node unavailable",
    CPU_MEMORY_SHORTAGE: "not enough CPU or memory",
    DEPARTMENT_QUOTA_EXHAUSTED: "department quota exhausted",
    MIG_PROFILE_UNAVAILABLE: "MIG profile unavailable",
    GPU_XID_FAULT: "GPU Xid fault",
    GPU_ECC_ERRORS: "GPU ECC errors",
    GPU_MISSING: "GPU missing",
    DEVICE_PLUGIN_UNHEALTHY: "device plugin unhealthy",
    GPU_THERMAL_THROTTLING: "GPU thermal throttling",
    NVLINK_ERRORS: "NVLink errors",
    CRASHLOOP_CONFIG_ERROR: "crash loop from a configuration error",
    OOM_KILLED: "out of memory (OOM-killed)",
    GPU_OOM: "GPU out of memory",
    IMAGE_PULL_ERROR: "image pull error",
    PREEMPTED: "preempted",
    IDLE_GPU_ALLOCATION: "allocated GPUs idle",
    OVER_REQUESTED: "more requested than used",
    RECENT_CHANGE: "a recent change",
}


def name(code: str) -> str:
    """The code in an operator's words; an unknown code (a newer release's) is shown as it is, spaced."""
    return NAMES.get(code, code.replace("_", " "))


__all__ = [
    "ALL_CODES",
    "CONTEXT_CODES",
    "CPU_MEMORY_SHORTAGE",
    "CRASHLOOP_CONFIG_ERROR",
    "DEPARTMENT_QUOTA_EXHAUSTED",
    "DEVICE_PLUGIN_UNHEALTHY",
    "EFFICIENCY_CODES",
    "GPU_CAPACITY_SHORTAGE",
    "GPU_ECC_ERRORS",
    "GPU_FRAGMENTATION",
    "GPU_MISSING",
    "GPU_NODE_UNAVAILABLE",
    "GPU_OOM",
    "GPU_THERMAL_THROTTLING",
    "GPU_XID_FAULT",
    "HEALTH_CODES",
    "IDLE_GPU_ALLOCATION",
    "IMAGE_PULL_ERROR",
    "MIG_PROFILE_UNAVAILABLE",
    "NAMES",
    "NODE_SELECTOR_MISMATCH",
    "NVLINK_ERRORS",
    "OOM_KILLED",
    "OVER_REQUESTED",
    "PREEMPTED",
    "PROJECT_QUOTA_EXHAUSTED",
    "QUEUE_PRIORITY",
    "RECENT_CHANGE",
    "REQUEST_SIZE_CHANGED",
    "SCHEDULING_CODES",
    "UNTOLERATED_TAINT",
    "name",
    "WORKLOAD_CODES",
]
