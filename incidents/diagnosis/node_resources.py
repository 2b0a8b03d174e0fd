"""What a node has and what its bound pods use at t: its GPUs when healthy, its MIG layout, its shared GPUs,
and the GPUs, CPU and memory its pods request."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis.request import pod_requests
from incidents.diagnosis.types import DiagnosisInput, EntityState, gpus_of

MIG_PREFIX = "nvidia.com/mig-"


def nominal_gpus(di: DiagnosisInput, node: EntityState) -> int:
    """``node_nominal_gpus`` over what the input holds of the node's lookback (its versions, or their peak)."""
    return node_nominal_gpus(node, di.history.get(node.ref), di.peak_gpus.get(node.name, 0))


def node_nominal_gpus(node: EntityState, history: list[EntityState] | None = None, peak: int = 0) -> int:
    """How many GPUs the node has when healthy: the GFD label, else the most it ever reported (in ``history``,
    or ``peak`` when only that much of its lookback was read)."""
    st = node.state
    labels = st.get("labels") or {}
    try:
        nominal = int(labels.get("nvidia.com/gpu.count") or 0)
    except (TypeError, ValueError):
        nominal = 0
    if mig_enabled(st):
        # Partitioned: the GPUs are advertised as MIG instances, not missing (mixed strategy: nvidia.com/gpu 0).
        return gpus_of(st.get("capacity") or {})
    best = max(nominal, gpus_of(st.get("capacity") or {}), peak)
    for v in history or []:
        best = max(best, gpus_of(v.state.get("capacity") or {}))
    return best


def mig_enabled(st: dict[str, Any]) -> bool:
    """Whether the node's GPUs are partitioned into MIG instances (GPU Operator labels, or MIG resources)."""
    mig = st.get("mig") or {}
    if mig and (mig.get("config") or "") not in ("", "all-disabled"):
        return True
    return any(
        str(k).startswith(MIG_PREFIX) and int(v or 0) > 0 for k, v in (st.get("capacity") or {}).items()
    )


def mig_layout(st: dict[str, Any]) -> dict[str, int]:
    """profile -> instances the node advertises as allocatable."""
    res = st.get("allocatable") if "allocatable" in st else st.get("capacity")
    return {
        str(k)[len(MIG_PREFIX) :]: int(v or 0)
        for k, v in (res or {}).items()
        if str(k).startswith(MIG_PREFIX)
    }


def mig_used_on(di: DiagnosisInput, node: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in di.pods_on_node(node):
        for prof, n in (p.get("mig") or {}).items():
            out[prof] = out.get(prof, 0) + int(n or 0)
    return out


def shared_gpus(di: DiagnosisInput, node: str, gpu_memory_mib: int | None) -> list[dict[str, Any]]:
    """The node's GPUs KAI shares at t: what is left of each (fraction, MiB) and the share pods holding it."""
    out = []
    for g in di.gpus_of_node(node):
        shares = g.get("shares") or []
        if not shares and not g.get("reservation"):
            continue
        used = sum(float(x.get("fraction") or 0) for x in shares)
        used_mib = sum(int(x.get("memory_mib") or 0) for x in shares)
        out.append(
            {
                "gpu": g.name,
                "index": g.get("index"),
                "free": round(max(1.0 - used, 0.0), 4),
                "free_mib": None if not gpu_memory_mib else max(gpu_memory_mib - used_mib, 0),
                "holders": [{"pod": x.get("pod"), "fraction": x.get("fraction")} for x in shares],
            }
        )
    return sorted(out, key=lambda x: (x["index"] is None, x["index"]))


def allocated_on(di: DiagnosisInput, node: str) -> int:
    """GPUs requested by the pods bound to the node and not finished."""
    return sum(int(p.get("gpus") or 0) for p in di.pods_on_node(node))


def requested_on(di: DiagnosisInput, node: str) -> tuple[float, int]:
    """(cores, bytes) requested by the pods bound to the node and not finished, as their states record them."""
    cores, mem = 0.0, 0
    for p in di.pods_on_node(node):
        c, m = pod_requests(p.get("requests") or {})
        cores += c or 0.0
        mem += m or 0
    return cores, mem
