"""GPU and node health at t: Xid (through NVIDIA's catalog), ECC, missing GPUs, device plugin, thermal, NVLink.

Which nodes are examined: the incident's node and GPU subjects, the nodes its
pods run on, and — for a waiting job — every GPU node (a fault elsewhere is
what shrinks the capacity the job waits for). Non-subject nodes only yield
supported findings: a healthy bystander is not worth a refuted line.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis.build import refuted
from incidents.diagnosis.citations import cite_event, cite_series, cite_state
from incidents.diagnosis.node_resources import nominal_gpus
from incidents.diagnosis.nodes import first_change, node_findings, since_in_history
from incidents.diagnosis.pending import is_pending
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
from incidents.diagnosis.xid import XID_TEXT, explain_xid

logger = logging.getLogger(__name__)

XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"
TEMP_METRIC = "DCGM_FI_DEV_GPU_TEMP"
SM_CLOCK_METRIC = "DCGM_FI_DEV_SM_CLOCK"
DBE_METRIC = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
NVLINK_METRIC = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
THERMAL_LIMIT_C = 85.0  # data-center GPUs start slowing down in the mid to high 80s (H100 slowdown ~87 °C)
SBE_NOISE = 100  # single-bit errors are corrected; only a burst is worth a line
ECC_XIDS = {48, 63, 64, 92, 94, 95}
NVLINK_XID = 74
_XID_TEXT = XID_TEXT  # one reading of the driver's "NVRM: Xid (PCI:…): 79" for pages and diagnosis


def subject_nodes(di: DiagnosisInput) -> tuple[set[str], bool]:
    """The nodes the subjects are placed on (a node, a GPU's node, a pod's node, a job's pods' nodes), and
    whether the whole fleet is the neighbourhood instead: a subject job waits (any node could be where it
    should go), or no subject names a node. The diagnosis input is bounded by the same answer
    (``incidents.diagnosis_input.placed_nodes``), so what the checks examine is always what was read."""
    nodes: set[str] = set()
    waits = False
    for ref in di.subjects:
        if ref.kind == "node":
            nodes.add(ref.name)
        elif ref.kind == "gpu":
            g = di.find("gpu", ref.name)
            if g is not None and g.get("node"):
                nodes.add(g.get("node"))
        elif ref.kind == "pod":
            p = di.find("pod", ref.name, ref.namespace)
            if p is not None and p.get("node"):
                nodes.add(p.get("node"))
        elif ref.kind == "job":
            j = di.find("job", ref.name, ref.namespace)
            if j is not None:
                waits = waits or is_pending(j)
                nodes.update(p.get("node") for p in di.pods_of_job(j) if p.get("node"))
    return nodes, waits or not nodes


def examined_nodes(di: DiagnosisInput) -> tuple[set[str], set[str]]:
    """(subject nodes, all nodes worth examining)."""
    subject, whole = subject_nodes(di)
    return subject, (subject | {n.name for n in di.nodes}) if whole else set(subject)


def check_health(di: DiagnosisInput) -> list[Finding]:
    subject_nodes, nodes = examined_nodes(di)
    subject_gpus = {r.name for r in di.subjects if r.kind == "gpu"}
    out: list[Finding] = []
    for name in sorted(nodes):
        node = di.find("node", name)
        if node is None:
            continue
        is_subject = name in subject_nodes
        out.extend(node_findings(di, node, is_subject))
        for gpu in di.gpus_of_node(name):
            # With GPU subjects, their siblings are context (supported findings only), not subjects.
            out.extend(_gpu_findings(di, node, gpu, gpu.name in subject_gpus if subject_gpus else is_subject))
    return out


def _series(di: DiagnosisInput, metric: str, uuid: str, node: str = "", index: Any = None) -> Series | None:
    for s in di.series:
        if s.metric == metric and (s.uuid == uuid or (not s.uuid and node and s.node == node)):
            return s
    return None


def _gpu_label(gpu: EntityState) -> str:
    return f"GPU {gpu.get('index', '?')} ({gpu.name}) on {gpu.get('node', '?')}"


#
# Xid
#
Xids = list[tuple[int, datetime | None, Cite]]  # (code, first seen, where), oldest first


def xid_codes(di: DiagnosisInput, gpu: EntityState) -> Xids:
    """Every Xid the GPU reported up to t, oldest first, each with where it was seen."""
    found: dict[int, tuple[datetime | None, Cite]] = {}
    s = _series(di, XID_METRIC, gpu.name)
    if s is not None:
        for ts, v in s.points:
            if ts <= di.t and v and int(v) > 0 and int(v) not in found:
                found[int(v)] = (ts, cite_series(s))
    last = gpu.get("xid_last") or 0
    if last and int(last) not in found:
        found[int(last)] = (first_change(di, gpu.ref, "xid_last") or gpu.valid_from, cite_state(gpu, di.t))
    node = gpu.get("node") or ""
    for obs_id, labels, starts in di.alerts:  # GPUXidError carries the code as a label (dcgm-exporter rules)
        raw = labels.get("xid") or labels.get("Xid") or labels.get("err_code")
        same = labels.get("UUID") == gpu.name or (
            (labels.get("node") or labels.get("Hostname") or labels.get("hostname")) == node
            and str(labels.get("gpu", "")) == str(gpu.get("index"))
        )
        if raw and str(raw).isdigit() and same and int(raw) > 0 and int(raw) not in found:
            found[int(raw)] = (starts, obs_id)
    for ev in di.events:
        if ev.time > di.t or not ev.involved or ev.involved.name != node:
            continue
        m = _XID_TEXT.search(ev.message or "")
        if m and int(m.group(1)) not in found:
            found[int(m.group(1))] = (ev.time, cite_event(ev))
    return sorted(((x, ts, c) for x, (ts, c) in found.items()), key=lambda i: i[1] or di.t)


def _gpu_findings(di: DiagnosisInput, node: EntityState, gpu: EntityState, is_subject: bool) -> list[Finding]:
    """Every GPU rule in turn: Xid, missing GPU, ECC, thermal, NVLink."""
    xids = xid_codes(di, gpu)
    out = [_xid_finding(di, node, gpu, code, ts, cite) for code, ts, cite in xids]
    if not xids and is_subject and "GPUXidError" in di.alertnames:
        out.append(_no_xid_finding(di, gpu))
    for rule in (_missing_gpu_finding, _ecc_finding, _thermal_finding, _nvlink_finding):
        f = rule(di, node, gpu, xids, is_subject)
        if f is not None:
            out.append(f)
    return out


def _gpu_facts(node: EntityState, gpu: EntityState, **more: Any) -> dict[str, Any]:
    """The facts every GPU finding carries (where the GPU is), then the rule's own."""
    return {"node": node.name, "gpu": gpu.name, "index": gpu.get("index"), **more}


def _xid_finding(
    di: DiagnosisInput, node: EntityState, gpu: EntityState, code: int, ts: datetime | None, cite: Cite
) -> Finding:
    """One Xid the GPU reported, read through NVIDIA's catalog: fatal to the GPU (drain) or not."""
    gcite = cite_state(gpu, di.t)
    info = explain_xid(code)
    drain = bool(info.get("drain_node"))
    explains: tuple[str, ...] = ()
    if drain:
        explains = (
            C.GPU_MISSING,
            C.DEVICE_PLUGIN_UNHEALTHY,
            C.GPU_CAPACITY_SHORTAGE,
            C.GPU_FRAGMENTATION,
            C.GPU_NODE_UNAVAILABLE,
            C.CRASHLOOP_CONFIG_ERROR,
            C.PREEMPTED,
        )
    side = "does not condemn the node" if not drain else "NVIDIA treats it as fatal to the GPU"
    statement = (
        f"{_gpu_label(gpu)} reported Xid {code} ({info['title']}) at {hhmm(ts)}: likely {info['likely_cause']}; "
        f"{side}."
    )
    return Finding(
        C.GPU_XID_FAULT,
        statement,
        SUPPORTED,
        0.9 if drain else 0.6,
        supports=[cite, gcite] if cite != gcite else [cite],
        subject=gpu.ref,
        sources=("prometheus",),
        since=ts,
        explains=explains,
        facts={
            "xid": code,
            "drain_node": drain,
            "node": node.name,
            "gpu": gpu.name,
            "index": gpu.get("index"),
            "action": info.get("action"),
            "likely_cause": info.get("likely_cause"),
        },
        next_questions=[
            f"Does dmesg on {node.name} show more Xid lines around {hhmm(ts)}?",
            *(
                ["Did the application on this GPU change (Xid from application faults)?"]
                if not drain
                else [f"Has this GPU reported Xid {code} before (RMA candidate)?"]
            ),
        ],
    )


def _no_xid_finding(di: DiagnosisInput, gpu: EntityState) -> Finding:
    """A GPUXidError alert on a subject GPU that reported no Xid at all."""
    s = _series(di, XID_METRIC, gpu.name)
    return refuted(
        C.GPU_XID_FAULT,
        f"{_gpu_label(gpu)} shows no Xid error up to {hhmm(di.t)}.",
        0.6,
        [cite_series(s)] if s else [cite_state(gpu, di.t)],
        gpu.ref,
        ("prometheus",),
        "no non-zero DCGM_FI_DEV_XID_ERRORS sample and xid_last is 0",
    )


def _missing_gpu_finding(
    di: DiagnosisInput, node: EntityState, gpu: EntityState, xids: Xids, is_subject: bool
) -> Finding | None:
    """A GPU that stopped reporting: gone from the node (supported), or silent with its NotReady node."""
    missing = gpu.get("present") is False or gpu.get("phase") == "missing"
    if not missing and not (is_subject and "GPUMissing" in di.alertnames):
        return None  # the common case (8,000 GPUs for a waiting job): no label, no citation built
    label = _gpu_label(gpu)
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
            facts=_gpu_facts(node, gpu, pods=pods),
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


def _ecc_finding(
    di: DiagnosisInput, node: EntityState, gpu: EntityState, xids: Xids, is_subject: bool
) -> Finding | None:
    """Double-bit (uncorrectable) ECC errors, or a burst of single-bit ones."""
    dbe = int(gpu.get("ecc_dbe_total") or 0)
    sbe = int(gpu.get("ecc_sbe_total") or 0)
    s_dbe = _series(di, DBE_METRIC, gpu.name)
    if s_dbe is not None:
        dbe = max([dbe, *[int(v) for ts, v in s_dbe.points if ts <= di.t]])
    if not (dbe > 0 or sbe >= SBE_NOISE) and not (is_subject and "GPUECCDoubleBitError" in di.alertnames):
        return None
    label = _gpu_label(gpu)
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
            facts=_gpu_facts(node, gpu, dbe=dbe, sbe=sbe),
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


def _thermal_finding(
    di: DiagnosisInput, node: EntityState, gpu: EntityState, xids: Xids, is_subject: bool
) -> Finding | None:
    """A GPU at or over the thermal limit, stronger when its SM clock fell with it."""
    temp = _series(di, TEMP_METRIC, gpu.name)
    if temp is None:
        return None
    label = _gpu_label(gpu)
    vals = [(ts, v) for ts, v in temp.points if ts <= di.t]
    hot = [(ts, v) for ts, v in vals if v >= THERMAL_LIMIT_C]
    if hot:
        clock = _series(di, SM_CLOCK_METRIC, gpu.name)
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
            facts=_gpu_facts(node, gpu, max_c=max(v for _, v in hot)),
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


def _nvlink_finding(
    di: DiagnosisInput, node: EntityState, gpu: EntityState, xids: Xids, is_subject: bool
) -> Finding | None:
    """NVLink CRC flit errors rising in the window, or Xid 74 (NVIDIA's NVLink error), or both."""
    nv = _series(di, NVLINK_METRIC, gpu.name)
    vals = [v for ts, v in nv.points if ts <= di.t] if nv is not None else []
    rose = max(vals) - min(vals) if vals else 0
    xid74 = [(ts, c) for x, ts, c in xids if x == NVLINK_XID]
    if not (rose > 0 or xid74):
        return None
    label = _gpu_label(gpu)
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
        facts=_gpu_facts(node, gpu, xid=NVLINK_XID),
        next_questions=["Does nvidia-smi nvlink -e show the same link erroring, and is Xid 74 logged?"],
    )
