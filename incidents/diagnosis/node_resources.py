"""What a node has and what its bound pods use at t: its GPUs when healthy, its MIG layout, its shared GPUs,
and the GPUs, CPU and memory its pods request.

Inside ``di.indexed()`` each of these is read once per node (``DiagnosisInput.memo``): a pass weighs every node
once per request shape, and what a node has does not depend on who asks. ``node_base`` is what every fit row of
a node reads of it (``fit.node_fit``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from incidents.diagnosis.quantities import quantity
from incidents.diagnosis.request import pod_requests
from incidents.diagnosis.types import DiagnosisInput, EntityState, gpus_of

_T = TypeVar("_T")

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
    """profile -> instances requested by the pods bound to the node and not finished."""
    return dict(_per_node(di, "mig_used_on", node, lambda: _mig_used_on(di, node)))


def _mig_used_on(di: DiagnosisInput, node: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in di.pods_on_node(node):
        for prof, n in (p.get("mig") or {}).items():
            out[prof] = out.get(prof, 0) + int(n or 0)
    return out


def shared_gpus(di: DiagnosisInput, node: str, gpu_memory_mib: int | None) -> list[dict[str, Any]]:
    """The node's GPUs KAI shares at t: what is left of each (fraction, MiB) and the share pods holding it."""
    key = f"{node}\0{gpu_memory_mib}"
    return list(_per_node(di, "shared_gpus", key, lambda: _shared_gpus(di, node, gpu_memory_mib)))


def _shared_gpus(di: DiagnosisInput, node: str, gpu_memory_mib: int | None) -> list[dict[str, Any]]:
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
    return _per_node(di, "allocated_on", node, lambda: _allocated_on(di, node))


def _allocated_on(di: DiagnosisInput, node: str) -> int:
    return sum(int(p.get("gpus") or 0) for p in di.pods_on_node(node))


def requested_on(di: DiagnosisInput, node: str) -> tuple[float, int]:
    """(cores, bytes) requested by the pods bound to the node and not finished, as their states record them."""
    return _per_node(di, "requested_on", node, lambda: _requested_on(di, node))


def _requested_on(di: DiagnosisInput, node: str) -> tuple[float, int]:
    cores, mem = 0.0, 0
    for p in di.pods_on_node(node):
        c, m = pod_requests(p.get("requests") or {})
        cores += c or 0.0
        mem += m or 0
    return cores, mem


# What is read once per node while an input is indexed (``_per_node``, ``node_base``): the node's state, its
# lookback (``nominal_gpus``), the pods bound to it and its GPUs, nothing else.
PER_NODE = ("node_base", "allocated_on", "requested_on", "mig_used_on", "shared_gpus")


def carry_nodes(old: DiagnosisInput, new: DiagnosisInput, changed: set[str]) -> None:
    """Give ``new`` what was read of each node on ``old`` (both indexed), but of the ``changed`` nodes (those
    whose pods or GPUs are not the same objects on both): for an input written from another that holds the
    same nodes and lookback (the same lists and maps), where nothing else a node's reads read differs."""
    if new.nodes is not old.nodes or new.history is not old.history or new.peak_gpus is not old.peak_gpus:
        return
    for name in PER_NODE:
        got: dict[str, Any] | None = old.memo(name, dict)
        into: dict[str, Any] | None = new.memo(name, dict)
        if not got or into is None:
            continue
        for key, value in got.items():
            if key.split("\0", 1)[0] not in changed:  # ``shared_gpus``' key: node, NUL, memory
                into.setdefault(key, value)


def _per_node(di: DiagnosisInput, name: str, key: str, build: Callable[[], _T]) -> _T:
    """``build()`` once per ``key`` while ``di`` is indexed (every time outside: the input may change)."""
    memo: dict[str, Any] | None = di.memo(name, dict)
    if memo is None:
        return build()
    if key not in memo:
        memo[key] = build()
    got: _T = memo[key]
    return got


# Taints the node lifecycle controller derives from conditions: they say "unhealthy", not "reserved" (the fit's
# blocker codes: ``fit.NOT_READY``, ``fit.CORDONED``).
HEALTH_TAINTS = {
    "node.kubernetes.io/not-ready": "not_ready",
    "node.kubernetes.io/unreachable": "not_ready",
    "node.kubernetes.io/network-unavailable": "not_ready",
    "node.kubernetes.io/unschedulable": "cordoned",
}


@dataclass(frozen=True)
class NodeBase:
    """What every fit row of a node reads of the node and its bound pods, whoever asks (``fit.node_fit``)."""

    state: EntityState
    pool: str
    product: str
    ready: bool
    unschedulable: bool
    nominal: int
    capacity: int
    allocatable: int
    allocated: int
    cpu_allocatable: float | None
    memory_allocatable: int | None
    mig_config: str
    mig_layout: dict[str, int]
    labels: dict[str, Any]
    # The taints that keep pods off (NoSchedule, NoExecute), in the node's order, each with its health blocker
    # code ("" for a taint that reserves the node rather than saying it is unhealthy).
    taints: tuple[tuple[dict[str, Any], str], ...]
    gpu_memory_mib: int | None


def node_base(di: DiagnosisInput, node: EntityState) -> NodeBase:
    """The node's ``NodeBase`` (once per node while ``di`` is indexed)."""
    memo: dict[str, NodeBase] | None = di.memo("node_base", dict)
    if memo is not None:
        got = memo.get(node.name)
        if got is not None and got.state is node:
            return got
    base = _node_base(di, node)
    if memo is not None:
        memo[node.name] = base
    return base


def _node_base(di: DiagnosisInput, node: EntityState) -> NodeBase:
    st = node.state
    labels = st.get("labels") or {}
    capacity = gpus_of(st.get("capacity") or {})
    alloc_res = st.get("allocatable") or {}
    mem = quantity(alloc_res.get("memory"))
    return NodeBase(
        state=node,
        pool=st.get("nodepool") or labels.get("run.ai/node-pool") or "",
        product=st.get("gpu_product") or labels.get("nvidia.com/gpu.product") or "",
        ready=bool(st.get("ready", True)),
        unschedulable=bool(st.get("unschedulable", False)),
        nominal=nominal_gpus(di, node),
        capacity=capacity,
        allocatable=gpus_of(alloc_res) if "allocatable" in st else capacity,
        allocated=allocated_on(di, node.name),
        cpu_allocatable=quantity(alloc_res.get("cpu")),
        memory_allocatable=None if mem is None else int(mem),
        mig_config=(st.get("mig") or {}).get("config") or labels.get("nvidia.com/mig.config") or "",
        mig_layout=mig_layout(st),
        labels=labels,
        taints=tuple(
            (taint, HEALTH_TAINTS.get(taint.get("key") or "", ""))
            for taint in st.get("taints") or []
            if taint.get("effect") in ("NoSchedule", "NoExecute")
        ),
        gpu_memory_mib=st.get("gpu_memory_mib") or _int_label(labels.get("nvidia.com/gpu.memory")),
    )


def _int_label(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
