"""The cause codes (docs/design.md §8): one constant per code, never renamed.

The diagnosis names its hypotheses with these strings and a scenario's ``expect`` names the causes it
expects with them, so both import them from here; stored rows refer to them too, so a rename would
silently orphan history. Extend only: add a constant, add it to its family tuple, and ALL_CODES picks it
up. This package holds the names and nothing else, and imports nothing.
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
    "WORKLOAD_CODES",
]
