"""GPU and node health at t: Xid (through NVIDIA's catalog), ECC, missing GPUs, device plugin, thermal, NVLink.

Which nodes are examined: the incident's node and GPU subjects, the nodes its
pods run on, and — for a waiting job — every GPU node (a fault elsewhere is
what shrinks the capacity the job waits for). Non-subject nodes only yield
supported findings: a healthy bystander is not worth a refuted line.
"""

from __future__ import annotations

import logging
from datetime import datetime

from incidents.diagnosis import codes as C
from incidents.diagnosis.build import refuted
from incidents.diagnosis.citations import cite_event, cite_series, cite_state
from incidents.diagnosis.gpu_faults import (
    Xids,
    ecc_finding,
    find_series,
    gpu_label,
    missing_gpu_finding,
    nvlink_finding,
    thermal_finding,
)
from incidents.diagnosis.nodes import first_change, node_findings
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.types import (
    SUPPORTED,
    Cite,
    DiagnosisInput,
    EntityState,
    Finding,
    hhmm,
)
from incidents.diagnosis.xid import XID_TEXT, explain_xid

logger = logging.getLogger(__name__)

XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"
_XID_TEXT = XID_TEXT  # one reading of the driver's "NVRM: Xid (PCI:…): 79" for pages and diagnosis


def subject_nodes(di: DiagnosisInput) -> tuple[set[str], bool]:
    """The nodes the subjects are placed on (a node, a GPU's node, a pod's node, a job's pods' nodes), and
    whether the whole fleet is the neighbourhood instead: a subject job waits (any node could be where it
    should go), or no subject names a node. The diagnosis input is bounded by the same answer
    (``incidents.lookback_input.placed_nodes``), so what the checks examine is always what was read."""
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


#
# Xid
#
def xid_codes(di: DiagnosisInput, gpu: EntityState) -> Xids:
    """Every Xid the GPU reported up to t, oldest first, each with where it was seen."""
    found: dict[int, tuple[datetime | None, Cite]] = {}
    s = find_series(di, XID_METRIC, gpu.name)
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
    for rule in (missing_gpu_finding, ecc_finding, thermal_finding, nvlink_finding):
        f = rule(di, node, gpu, xids, is_subject)
        if f is not None:
            out.append(f)
    return out


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
        f"{gpu_label(gpu)} reported Xid {code} ({info['title']}) at {hhmm(ts)}: likely {info['likely_cause']}; "
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
    s = find_series(di, XID_METRIC, gpu.name)
    return refuted(
        C.GPU_XID_FAULT,
        f"{gpu_label(gpu)} shows no Xid error up to {hhmm(di.t)}.",
        0.6,
        [cite_series(s)] if s else [cite_state(gpu, di.t)],
        gpu.ref,
        ("prometheus",),
        "no non-zero DCGM_FI_DEV_XID_ERRORS sample and xid_last is 0",
    )
