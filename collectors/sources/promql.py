"""Every PromQL query rcaweb runs, in one place, so pages can show them as provenance.

Label names are not used in the queries (dcgm-exporter spells ``Hostname``/``hostname`` and
``UUID``/``uuid`` differently across releases); results are normalized in Python by
:func:`collectors.sources.dcgm.dcgm_identity`. Only the subset every Prometheus (and the
simulator, simulator/API.md) answers is used: selectors, ``*_over_time`` and aggregations.
"""

from __future__ import annotations

# The GPU inventory: every GPU that reported in the last minute, with its labels (UUID, node, pod).
# last_over_time over 2m (four scrapes at the usual 30 s) rather than the 5 min instant lookback, so a GPU
# that fell off the bus is "missing" within two minutes instead of five.
GPU_INVENTORY_METRIC = "DCGM_FI_DEV_GPU_UTIL"
GPU_INVENTORY = f"last_over_time({GPU_INVENTORY_METRIC}[2m])"
# Slowly changing per-GPU facts kept in the GPU's inventory state.
XID_LAST = (
    "last_over_time(DCGM_FI_DEV_XID_ERRORS[2m])"  # only the last Xid, 0 = none (dcgm-exporter semantics)
)
ECC_DBE_TOTAL = "last_over_time(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[2m])"  # off in the default counter set
ECC_SBE_TOTAL = "last_over_time(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[2m])"  # off in the default counter set
GPU_STATE_QUERIES: dict[str, str] = {
    "xid_last": XID_LAST,
    "ecc_dbe_total": ECC_DBE_TOTAL,
    "ecc_sbe_total": ECC_SBE_TOTAL,
}
GPU_STATE_METRICS: dict[str, str] = {
    "xid_last": "DCGM_FI_DEV_XID_ERRORS",
    "ecc_dbe_total": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "ecc_sbe_total": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
}

# Telemetry kept as 5-minute points per GPU (docs/inventory.md, TelemetrySample).
TELEMETRY_STEP_S = 300
TELEMETRY_METRICS: tuple[str, ...] = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
)
# Why a metric may be absent although DCGM runs: shown with the "no data" record.
ABSENT_WHY: dict[str, str] = {
    "DCGM_FI_PROF_SM_ACTIVE": "profiling (DCGM_FI_PROF_*) counters are off in dcgm-exporter's default counter set",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ECC counters are off in dcgm-exporter's default counter set",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "ECC counters are off in dcgm-exporter's default counter set",
    "DCGM_FI_DEV_XID_ERRORS": "the Xid counter is not enabled in this exporter's counter set",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "NVLink counters are off in dcgm-exporter's default counter set",
}


def telemetry(metric: str, step_s: int = TELEMETRY_STEP_S) -> str:
    """The 5-minute average of one DCGM field per series (one series per GPU and pod label set)."""
    if not metric.startswith("DCGM_FI_") or not metric.replace("_", "").isalnum():
        raise ValueError(f"not a DCGM field name: {metric!r}")
    minutes = max(1, step_s // 60)
    return f"avg_over_time({metric}[{minutes}m])"


def all_queries() -> dict[str, str]:
    """Name → PromQL for every query the collectors run (for provenance panels)."""
    out = {"gpu_inventory": GPU_INVENTORY, **GPU_STATE_QUERIES}
    out.update({f"telemetry {m}": telemetry(m) for m in TELEMETRY_METRICS})
    return out
