"""GPU faults besides Xid: a GPU gone missing, ECC errors, thermal throttling, NVLink errors.

``incidents.diagnosis.health`` decides which GPUs are examined and reads their Xids; each rule here turns one
GPU's state and DCGM series at t into a finding, or None when it has nothing to say.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis.build import refuted
from incidents.diagnosis.citations import cite_series, cite_state
from incidents.diagnosis.node_resources import nominal_gpus
from incidents.diagnosis.nodes import first_change, since_in_history
from incidents.diagnosis.types import (
    SUPPORTED,
    UNVERIFIED,
    Cite,
    DiagnosisInput,
    EntityState,
    Finding,
    Series,
    gpus_of,
    hhmm,
)

TEMP_METRIC = "DCGM_FI_DEV_GPU_TEMP"
SM_CLOCK_METRIC = "DCGM_FI_DEV_SM_CLOCK"
DBE_METRIC = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
NVLINK_METRIC = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
THERMAL_LIMIT_C = 85.0  # data-center GPUs start slowing down in the mid to high 80s (H100 slowdown ~87 °C)
SBE_NOISE = 100  # single-bit errors are corrected; only a burst is worth a line
ECC_XIDS = {48, 63, 64, 92, 94, 95}
NVLINK_XID = 74

Xids = list[tuple[int, datetime | None, Cite]]  # (code, first seen, where), oldest first


def find_series(
    di: DiagnosisInput, metric: str, uuid: str, node: str = "", index: Any = None
) -> Series | None:
    for s in di.series:
        if s.metric == metric and (s.uuid == uuid or (not s.uuid and node and s.node == node)):
            return s
    return None


def gpu_label(gpu: EntityState) -> str:
    return f"GPU {gpu.get('index', '?')} ({gpu.name}) on {gpu.get('node', '?')}"


def gpu_facts(node: EntityState, gpu: EntityState, **more: Any) -> dict[str, Any]:
    """The facts every GPU finding carries (where the GPU is), then the rule's own."""
    return {"node": node.name, "gpu": gpu.name, "index": gpu.get("index"), **more}


def missing_gpu_finding(
    di: DiagnosisInput, node: EntityState, gpu: EntityState, xids: Xids, is_subject: bool
) -> Finding | None:
    """A GPU that stopped reporting: gone from the node (supported), or silent with its NotReady node."""
    missing = gpu.get("present") is False or gpu.get("phase") == "missing"
    if not missing and not (is_subject and "GPUMissing" in di.alertnames):
        return None  # the common case (8,000 GPUs for a waiting job): no label, no citation built
    label = gpu_label(gpu)
    gcite = cite_state(gpu, di.t)
    if missing and not node.get("ready", True):
        # DCGM on a NotReady node cannot be scraped: silence is the node's finding, not a lost GPU.
        if not is_subject:
            return None
        return Finding(
            C.GPU_MISSING,
            f"{label} stopped reporting, but {node.name} itself is NotReady: its exporter cannot be "
            "scraped, so whether the GPU is gone is unknown.",
            UNVERIFIED,
            0.25,
            supports=[gcite, cite_state(node, di.t)],
            subject=gpu.ref,
            sources=("prometheus", "k8s"),
            why="the node is NotReady; its GPUs are silent either way",
            next_questions=[f"Once {node.name} is back, does nvidia-smi list all its GPUs?"],
        )
    if missing:
        since = since_in_history(
            di, gpu, lambda st: st.get("present") is False or st.get("phase") == "missing"
        )
        after_xid = [x for x, ts, _ in xids if ts is None or since is None or ts <= since]
        cause = f" after Xid {after_xid[-1]}" if after_xid else ""
        pods = [p.name for p in di.pods_on_node(node.name)]
        return Finding(
            C.GPU_MISSING,
            f"{label} stopped reporting at {hhmm(since)}{cause}; {node.name} now advertises "
            f"{gpus_of(node.get('capacity') or {})} of {nominal_gpus(di, node)} GPUs.",
            SUPPORTED,
            0.85,
            supports=[gcite, cite_state(node, di.t)],
            subject=gpu.ref,
            sources=("prometheus", "k8s"),
            since=since,
            explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION, C.DEVICE_PLUGIN_UNHEALTHY),
            facts=gpu_facts(node, gpu, pods=pods),
            next_questions=[f"Is the GPU visible in nvidia-smi / lspci on {node.name}?"],
        )
    if is_subject and "GPUMissing" in di.alertnames:
        return refuted(
            C.GPU_MISSING,
            f"{label} is present and reporting at {hhmm(di.t)}.",
            0.7,
            [gcite],
            gpu.ref,
            ("prometheus",),
            "the GPU reports",
        )
    return None


def ecc_finding(
    di: DiagnosisInput, node: EntityState, gpu: EntityState, xids: Xids, is_subject: bool
) -> Finding | None:
    """Double-bit (uncorrectable) ECC errors, or a burst of single-bit ones."""
    dbe = int(gpu.get("ecc_dbe_total") or 0)
    sbe = int(gpu.get("ecc_sbe_total") or 0)
    s_dbe = find_series(di, DBE_METRIC, gpu.name)
    if s_dbe is not None:
        dbe = max([dbe, *[int(v) for ts, v in s_dbe.points if ts <= di.t]])
    if not (dbe > 0 or sbe >= SBE_NOISE) and not (is_subject and "GPUECCDoubleBitError" in di.alertnames):
        return None
    label = gpu_label(gpu)
    gcite = cite_state(gpu, di.t)
    if dbe > 0 or sbe >= SBE_NOISE:
        cites = [gcite] + ([cite_series(s_dbe)] if s_dbe is not None else [])
        since = first_change(di, gpu.ref, "ecc_dbe_total") or (
            next((ts for ts, v in s_dbe.points if v > 0), None) if s_dbe else None
        )
        kind = f"{dbe} double-bit (uncorrectable)" if dbe else f"{sbe} single-bit (corrected)"
        return Finding(
            C.GPU_ECC_ERRORS,
            f"{label} counts {kind} ECC errors" + (f" since {hhmm(since)}" if since else "") + ".",
            SUPPORTED,
            0.85 if dbe else 0.45,
            supports=cites,
            subject=gpu.ref,
            sources=("prometheus",),
            since=since,
            explains=((C.GPU_XID_FAULT,) if any(x in ECC_XIDS for x, _, _ in xids) else ())
            # An uncorrectable error makes the device plugin mark the GPU unhealthy, which costs capacity.
            + (
                (
                    C.CRASHLOOP_CONFIG_ERROR,
                    C.DEVICE_PLUGIN_UNHEALTHY,
                    C.GPU_CAPACITY_SHORTAGE,
                    C.GPU_FRAGMENTATION,
                )
                if dbe
                else ()
            ),
            facts=gpu_facts(node, gpu, dbe=dbe, sbe=sbe),
            next_questions=[
                "Are rows pending remap (DCGM_FI_DEV_ROW_REMAP_PENDING), and did remapping fail?"
            ],
        )
    if is_subject and "GPUECCDoubleBitError" in di.alertnames:
        return refuted(
            C.GPU_ECC_ERRORS,
            f"{label} counts no double-bit ECC errors at {hhmm(di.t)}.",
            0.7,
            [gcite],
            gpu.ref,
            ("prometheus",),
            "DBE counter is 0",
        )
    return None


def thermal_finding(
    di: DiagnosisInput, node: EntityState, gpu: EntityState, xids: Xids, is_subject: bool
) -> Finding | None:
    """A GPU at or over the thermal limit, stronger when its SM clock fell with it."""
    temp = find_series(di, TEMP_METRIC, gpu.name)
    if temp is None:
        return None
    label = gpu_label(gpu)
    vals = [(ts, v) for ts, v in temp.points if ts <= di.t]
    hot = [(ts, v) for ts, v in vals if v >= THERMAL_LIMIT_C]
    if hot:
        clock = find_series(di, SM_CLOCK_METRIC, gpu.name)
        throttled = ""
        cites = [cite_series(temp)]
        if clock is not None:
            cv = [v for _, v in clock.points if v > 0]
            if cv and min(cv) < 0.85 * max(cv):
                throttled = f"; SM clock fell from {max(cv):.0f} to {min(cv):.0f} MHz"
                cites.append(cite_series(clock))
        return Finding(
            C.GPU_THERMAL_THROTTLING,
            f"{label} reached {max(v for _, v in hot):.0f} °C at {hhmm(hot[0][0])} (limit {THERMAL_LIMIT_C:.0f} °C)"
            f"{throttled}.",
            SUPPORTED,
            0.85 if throttled else 0.7,
            supports=cites,
            subject=gpu.ref,
            sources=("prometheus",),
            since=hot[0][0],
            facts=gpu_facts(node, gpu, max_c=max(v for _, v in hot)),
            next_questions=[
                f"Are the fans/airflow of {node.name} healthy, and are its sibling GPUs also hot?"
            ],
        )
    if is_subject and "GPUHighTemperature" in di.alertnames and vals:
        return refuted(
            C.GPU_THERMAL_THROTTLING,
            f"{label} stayed at or below {max(v for _, v in vals):.0f} °C.",
            0.7,
            [cite_series(temp)],
            gpu.ref,
            ("prometheus",),
            f"below {THERMAL_LIMIT_C:.0f} °C",
        )
    return None


def nvlink_finding(
    di: DiagnosisInput, node: EntityState, gpu: EntityState, xids: Xids, is_subject: bool
) -> Finding | None:
    """NVLink CRC flit errors rising in the window, or Xid 74 (NVIDIA's NVLink error), or both."""
    nv = find_series(di, NVLINK_METRIC, gpu.name)
    vals = [v for ts, v in nv.points if ts <= di.t] if nv is not None else []
    rose = max(vals) - min(vals) if vals else 0
    xid74 = [(ts, c) for x, ts, c in xids if x == NVLINK_XID]
    if not (rose > 0 or xid74):
        return None
    label = gpu_label(gpu)
    words = (
        f"{label}'s NVLink CRC flit error counter rose by {rose:.0f} in the window"
        if rose > 0
        else (f"{label} reported Xid {NVLINK_XID}, NVIDIA's NVLink error")
    )
    cites = ([cite_series(nv)] if nv is not None and rose > 0 else []) + [c for _, c in xid74[:1]]
    return Finding(
        C.NVLINK_ERRORS,
        words + (f"; Xid {NVLINK_XID} followed at {hhmm(xid74[0][0])}." if xid74 and rose > 0 else "."),
        SUPPORTED,
        0.8 if rose > 0 and xid74 else 0.6,
        supports=cites,
        subject=gpu.ref,
        sources=("prometheus",),
        since=xid74[0][0] if xid74 else None,
        explains=(C.GPU_XID_FAULT,) if xid74 else (),
        facts=gpu_facts(node, gpu, xid=NVLINK_XID),
        next_questions=["Does nvidia-smi nvlink -e show the same link erroring, and is Xid 74 logged?"],
    )
