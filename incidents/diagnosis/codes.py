"""Hypothesis codes (docs/design.md §8): one constant per code, never renamed.

Hypotheses, tests, scenario files (`expect: top: ...`) and stored rows all refer
to these strings, so a rename would silently orphan history. Extend only: add a
constant, add it to its family tuple, and ALL_CODES picks it up.
"""

from __future__ import annotations

# The codes themselves live in the top-level package ``cause_codes``, which scenarios import too; this module
# re-exports them all and adds each one's name in an operator's words.
import cause_codes
from cause_codes import *  # noqa: F403 (every code, as listed by cause_codes.__all__)
from cause_codes import (
    CPU_MEMORY_SHORTAGE,
    CRASHLOOP_CONFIG_ERROR,
    DEPARTMENT_QUOTA_EXHAUSTED,
    DEVICE_PLUGIN_UNHEALTHY,
    GPU_CAPACITY_SHORTAGE,
    GPU_ECC_ERRORS,
    GPU_FRAGMENTATION,
    GPU_MISSING,
    GPU_NODE_UNAVAILABLE,
    GPU_OOM,
    GPU_THERMAL_THROTTLING,
    GPU_XID_FAULT,
    IDLE_GPU_ALLOCATION,
    IMAGE_PULL_ERROR,
    MIG_PROFILE_UNAVAILABLE,
    NODE_SELECTOR_MISMATCH,
    NVLINK_ERRORS,
    OOM_KILLED,
    OVER_REQUESTED,
    PREEMPTED,
    PROJECT_QUOTA_EXHAUSTED,
    QUEUE_PRIORITY,
    RECENT_CHANGE,
    REQUEST_SIZE_CHANGED,
    UNTOLERATED_TAINT,
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


__all__ = [*cause_codes.__all__, "NAMES", "name"]
