"""The DCGM metrics an incident's evidence asks for, and the one selector for its GPUs."""

from __future__ import annotations

METRICS = (
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_SM_CLOCK",
)


def promql(metric: str, uuids: list[str], label: str = "UUID") -> str:
    """One selector for the incident's GPUs, and only those (UUIDs are hex and dashes: no regex escaping
    needed); in sorted order, so incidents about the same GPUs ask the same query (``shared_range``)."""
    safe = sorted({u for u in uuids if all(ch.isalnum() or ch == "-" for ch in u)})
    return f'{metric}{{{label}=~"{"|".join(safe)}"}}'
