"""Node-level health at t: a device plugin hiding GPUs, GPUs gone from capacity, NotReady or cordoned nodes.

Split from ``health`` (GPU-level: Xid, ECC, thermal, NVLink); ``health.check_health`` calls
:func:`node_findings` for every node it examines.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis.build import refuted
from incidents.diagnosis.citations import cite_state
from incidents.diagnosis.node_resources import nominal_gpus
from incidents.diagnosis.types import (
    SUPPORTED,
    Cite,
    DiagnosisInput,
    EntityState,
    Finding,
    Ref,
    gpus_of,
    hhmm,
)

logger = logging.getLogger(__name__)


def first_change(di: DiagnosisInput, ref: Ref, leaf: str) -> datetime | None:
    times = [
        c.time
        for c in di.changes
        if c.entity == ref and c.field.rsplit(".", 1)[-1] == leaf and c.time <= di.t
    ]
    return max(times) if times else None


def since_in_history(di: DiagnosisInput, es: EntityState, pred: Any) -> datetime | None:
    since = None
    for v in reversed(di.history.get(es.ref) or []):
        if pred(v.state):
            since = v.valid_from
        else:
            break
    return since or es.valid_from


def condemned_gpus(di: DiagnosisInput, node: str) -> list[tuple[EntityState, str]]:
    """The node's GPUs that the device plugin rightly withdraws: double-bit ECC errors, or an Xid whose
    documented action condemns the GPU (NVIDIA's Xid catalog), each with why."""
    from incidents.diagnosis.xid import explain_xid

    out = []
    for g in di.gpus_of_node(node):
        if g.get("present") is False:
            continue  # gone from capacity as well: that is gpu_missing, not a withdrawn GPU
        dbe = int(g.get("ecc_dbe_total") or 0)
        xid = int(g.get("xid_last") or 0)
        if dbe > 0:
            out.append((g, f"{dbe} double-bit ECC errors"))
        elif xid and explain_xid(xid).get("drain_node"):
            out.append((g, f"Xid {xid}"))
    return out


def node_findings(di: DiagnosisInput, node: EntityState, is_subject: bool) -> list[Finding]:
    """Every node rule in turn: device plugin, GPUs gone from capacity, NotReady or cordoned."""
    out: list[Finding] = []
    for rule in (_device_plugin_finding, _missing_gpus_finding, _unavailable_finding):
        f = rule(di, node, is_subject)
        if f is not None:
            out.append(f)
    return out


def _gpu_counts(st: dict[str, Any]) -> tuple[int, int]:
    """(capacity, allocatable) GPUs of a node state; allocatable is capacity when the state has none."""
    capacity = gpus_of(st.get("capacity") or {})
    return capacity, gpus_of(st.get("allocatable") or {}) if "allocatable" in st else capacity


def _device_plugin_finding(di: DiagnosisInput, node: EntityState, is_subject: bool) -> Finding | None:
    """A Ready node advertising fewer allocatable GPUs than its capacity: the device plugin hides them,
    rightly (the withdrawn GPUs are faulty: refuted) or not (supported)."""
    capacity, allocatable = _gpu_counts(node.state)
    ready = bool(node.state.get("ready", True))
    ncite = cite_state(node, di.t)
    condemned = condemned_gpus(di, node.name)
    if ready and capacity > allocatable and condemned and len(condemned) >= capacity - allocatable:
        # The plugin withdrew GPUs that are themselves faulty: it is doing its job; the GPU is the cause.
        if not is_subject:
            return None
        words = ", ".join(f"GPU {g.get('index', '?')} ({why})" for g, why in condemned[:4])
        return refuted(
            C.DEVICE_PLUGIN_UNHEALTHY,
            f"The device plugin on {node.name} is healthy: it advertises {allocatable} of {capacity} GPUs "
            f"because it withdrew {words}; the GPU's fault is the cause, not the plugin.",
            0.75,
            [ncite, *[cite_state(g, di.t) for g, _ in condemned[:2]]],
            node.ref,
            ("k8s", "prometheus"),
            "every withdrawn GPU has a fault of its own (double-bit ECC or a condemning Xid)",
        )
    if ready and capacity > allocatable:
        since = first_change(di, node.ref, "nvidia.com/gpu") or since_in_history(
            di, node, lambda s: gpus_of(s.get("allocatable") or {}) < gpus_of(s.get("capacity") or {})
        )
        plugin_pods = [p for p in di.pods_bound_to(node.name) if "device-plugin" in p.name]
        pods = di.pods_on_node(node.name)
        cites: list[Cite] = [ncite, *[cite_state(p, di.t) for p in plugin_pods[:2]]]
        return Finding(
            C.DEVICE_PLUGIN_UNHEALTHY,
            f"{node.name} is Ready but advertises {allocatable} of {capacity} GPUs as allocatable"
            + (f" since {hhmm(since)}" if since else "")
            + ": the NVIDIA device plugin reports them unhealthy.",
            SUPPORTED,
            0.85,
            supports=cites,
            subject=node.ref,
            sources=("k8s",),
            since=since,
            explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION, C.GPU_NODE_UNAVAILABLE),
            facts={
                "node": node.name,
                "capacity": capacity,
                "allocatable": allocatable,
                "pods": [p.ref for p in pods],
            },
            next_questions=[
                f"What do the nvidia-device-plugin logs on {node.name} say?",
                "Did an Xid precede the drop in allocatable GPUs?",
            ],
        )
    if is_subject and ready and capacity:
        return refuted(
            C.DEVICE_PLUGIN_UNHEALTHY,
            f"{node.name} advertises all {capacity} GPUs as allocatable.",
            0.7,
            [ncite],
            node.ref,
            ("k8s",),
            "allocatable equals capacity",
        )
    return None


def _missing_gpus_finding(di: DiagnosisInput, node: EntityState, is_subject: bool) -> Finding | None:
    """A Ready node whose capacity fell below its nominal GPU count: a GPU vanished from the driver."""
    capacity, _ = _gpu_counts(node.state)
    nominal = nominal_gpus(di, node)
    if not (node.state.get("ready", True) and nominal > capacity):
        return None
    since = first_change(di, node.ref, "nvidia.com/gpu") or since_in_history(
        di, node, lambda s: gpus_of(s.get("capacity") or {}) < nominal
    )
    return Finding(
        C.GPU_MISSING,
        f"{node.name} advertises {capacity} of its {nominal} GPUs"
        + (f" since {hhmm(since)}" if since else "")
        + ": a GPU is no longer visible to the driver or the device plugin.",
        SUPPORTED,
        0.8,
        supports=[cite_state(node, di.t)],
        subject=node.ref,
        sources=("k8s",),
        since=since,
        explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION, C.DEVICE_PLUGIN_UNHEALTHY),
        facts={"node": node.name, "capacity": capacity, "nominal": nominal},
        next_questions=[
            f"Does nvidia-smi on {node.name} list {nominal} GPUs, and is there an Xid 79 in dmesg?"
        ],
    )


def _unavailable_finding(di: DiagnosisInput, node: EntityState, is_subject: bool) -> Finding | None:
    """A NotReady or cordoned node: its GPUs take no new pods, and a NotReady one strands its pods."""
    st = node.state
    capacity, _ = _gpu_counts(st)
    ready = bool(st.get("ready", True))
    if ready and not st.get("unschedulable"):
        if is_subject and "NodeNotReady" in di.alertnames:
            return refuted(
                C.GPU_NODE_UNAVAILABLE,
                f"{node.name} is Ready and schedulable at {hhmm(di.t)}.",
                0.7,
                [cite_state(node, di.t)],
                node.ref,
                ("k8s",),
                "node Ready",
            )
        return None
    if not (is_subject or not ready):
        return None
    what = (
        "NotReady" + (f" ({st.get('ready_reason')})" if st.get("ready_reason") else "")
        if not ready
        else "cordoned"
    )
    since = since_in_history(
        di,
        node,
        lambda s: (
            (not s.get("ready", True)) == (not ready)
            and bool(s.get("unschedulable")) == bool(st.get("unschedulable"))
        ),
    )
    pods = di.pods_on_node(node.name)
    held = sum(int(p.get("gpus") or 0) for p in pods)
    return Finding(
        C.GPU_NODE_UNAVAILABLE,
        f"{node.name} is {what} since {hhmm(since)}; its {capacity} GPUs take no new pods"
        + (f" and {len(pods)} pod(s) holding {held} GPUs are stranded on it." if pods and not ready else "."),
        SUPPORTED,
        0.85,
        supports=[cite_state(node, di.t)],
        subject=node.ref,
        sources=("k8s",),
        since=since,
        explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION),
        facts={
            "node": node.name,
            "ready": ready,
            "cordoned": bool(st.get("unschedulable")),
            "pods": [p.ref for p in pods],
        },
        next_questions=[
            f"Is the kubelet on {node.name} running, and is the node reachable?"
            if not ready
            else f"Who cordoned {node.name}, and why?"
        ],
    )
