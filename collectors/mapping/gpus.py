"""GPUs from DCGM series (through Prometheus) → gpu states, related to their node and the pod using them.

A GPU is identified by its UUID. The host label may name the node, the exporter pod (no NODE_NAME) or be
missing; the node is then found from a relabelled ``node`` label or the scrape ``instance`` address.
A GPU seen before that no longer reports is kept, with ``present: false`` and phase "missing".

The state holds slowly changing facts only (docs/inventory.md): which exporter label spelling carried the pod
(``pod`` or ``exported_pod``, ``Hostname`` or ``hostname``), the driver version and the exporter's own pod are
not facts about the GPU, and the pod's namespace is part of ``pod`` (kept in the ``namespace`` hot column only),
so a GPU version changes when the GPU is allocated, released, fails or goes missing, never per sweep.
"""

from __future__ import annotations

from typing import Any

from collectors.observed import Observed
from collectors.sources.dcgm import dcgm_identity, dcgm_uuid
from collectors.sources.prometheus import Series

# Xids that mean the GPU itself is in trouble (NVIDIA's Xid catalog: 48 DBE, 63/64 row remap, 74 NVLink,
# 79 fell off the bus, 92 high SBE rate, 94/95 contained/uncontained ECC, 119/120 GSP). Others (13, 31, 43, 45)
# are usually the application's fault and leave the GPU healthy.
CRITICAL_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})


def _node_for(ident: dict[str, str], nodes: dict[str, dict[str, Any]], ip_to_node: dict[str, str]) -> str:
    host = ident["hostname"]
    if host in nodes:
        return host
    instance = ident.get("instance", "")
    ip = instance.rsplit(":", 1)[0] if instance else ""
    if ip in ip_to_node:
        return ip_to_node[ip]
    return host


def _value_by_uuid(series: list[Series] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in series or []:
        uuid = dcgm_uuid(s.labels)  # not the whole identity: three fact queries of a fleet's GPUs per sweep
        if uuid and s.last is not None:
            out[uuid] = max(out.get(uuid, s.last), s.last)  # MIG instances of one GPU: the worst value
    return out


def _instances(
    idents: list[dict[str, str]], live: set[str] | None, labels: dict[str, str]
) -> list[dict[str, Any]]:
    """MIG instances of one GPU from its per-instance series: {gi_id, profile, pod, memory_mib}."""
    by_id: dict[int, dict[str, Any]] = {}
    for i in idents:
        if not i.get("gi_id"):
            continue
        try:
            gid = int(i["gi_id"])
        except ValueError:
            continue
        inst = by_id.setdefault(
            gid,
            {
                "gi_id": gid,
                "profile": i.get("gi_profile") or "",
                "pod": None,
                "memory_mib": _int(labels.get(f"nvidia.com/mig-{i.get('gi_profile')}.memory")),
            },
        )
        holder = f"{i['namespace']}/{i['pod']}" if i["pod"] else None
        # two pods on one instance within the window: the one still running (the other just ended)
        if holder and (inst["pod"] is None or (live is not None and holder in live)):
            inst["pod"] = holder
    return [by_id[k] for k in sorted(by_id)]


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def gpu_shares(pods: list[Observed], gpu_memory_of_node: dict[str, int | None]) -> dict[str, dict[str, Any]]:
    """uuid → the KAI shares on that GPU: {"reservation": "ns/pod", "shares": [{pod, fraction, memory_mib}]}.

    KAI's reservation pod names the GPU (``run.ai/reserve_for_gpu_index``, the UUID) and carries the GPU group
    label its shared pods also carry; a share's memory is what it asked (gpu-memory) or its fraction of the
    GPU's memory (gpu-fraction).
    """
    group_uuid: dict[tuple[str, str], str] = {}
    out: dict[str, dict[str, Any]] = {}
    for p in pods:
        uuid = p.state.get("reservation_for")
        if uuid and p.state.get("node") and p.state.get("phase") in ("Pending", "Running"):
            group = (p.state.get("labels") or {}).get("runai-gpu-group", "")
            group_uuid[(p.state["node"], group)] = uuid
            out.setdefault(uuid, {"reservation": f"{p.namespace}/{p.name}", "shares": []})
    for p in pods:
        share = p.state.get("gpu_share")
        node = p.state.get("node")
        if not share or not node or p.state.get("phase") not in ("Pending", "Running"):
            continue
        uuid = group_uuid.get((node, share.get("group") or ""))
        if uuid is None:
            continue
        mem = gpu_memory_of_node.get(node)
        fraction = share.get("fraction")
        memory = share.get("memory_mib")
        if fraction is None and memory is not None and mem:
            fraction = round(min(1.0, memory / mem), 4)
        if memory is None and fraction is not None and mem:
            memory = int(mem * fraction)
        out[uuid]["shares"].append(
            {"pod": f"{p.namespace}/{p.name}", "fraction": fraction, "memory_mib": memory}
        )
    for v in out.values():
        v["shares"].sort(key=lambda s: s["pod"])
    return out


def map_gpus(
    inventory: list[Series],
    facts: dict[str, list[Series] | None],
    *,
    nodes: dict[str, dict[str, Any]],
    running_pods_on_node: dict[str, set[str]] | None = None,
    previous: dict[str, dict[str, Any]] | None = None,
    shares: dict[str, dict[str, Any]] | None = None,
) -> list[Observed]:
    """``inventory``: series of the GPU inventory query; ``facts``: state key → series (None = not exported).

    ``nodes``: node name → node state (addresses used to resolve ``instance``); ``running_pods_on_node``:
    "ns/name" of running pods per node, to choose among several pod label sets of one GPU (a pod that just
    ended and the next one, within the query window); ``previous``: uuid → last recorded state, for GPUs that
    stopped reporting. ``shares``: uuid → {"reservation", "shares": [{pod, fraction, memory_mib}]} from the
    pods KAI shares the GPU with (``gpu_shares``): DCGM only sees the reservation pod holding the device.

    MIG: a partitioned GPU reports one series per GPU instance (``GPU_I_ID``/``GPU_I_PROFILE``, with the pod
    on that instance in any of the label variants); its state lists every instance and its pod.
    """
    ip_to_node = {
        addr: name for name, st in nodes.items() for addr in (st.get("addresses") or {}).values() if addr
    }
    running = running_pods_on_node or {}
    values = {key: _value_by_uuid(series) for key, series in facts.items()}
    unreported = sorted(key for key, series in facts.items() if series is None)
    by_uuid: dict[str, list[dict[str, str]]] = {}
    for s in inventory:
        ident = dcgm_identity(s.labels)
        if ident["uuid"]:
            by_uuid.setdefault(ident["uuid"], []).append(ident)
    out = [
        _reporting_gpu(uuid, idents, nodes, ip_to_node, running, values, unreported, shares)
        for uuid, idents in sorted(by_uuid.items())
    ]
    return out + _stopped_reporting(previous, by_uuid)


def _reporting_gpu(
    uuid: str,
    idents: list[dict[str, str]],
    nodes: dict[str, dict[str, Any]],
    ip_to_node: dict[str, str],
    running: dict[str, set[str]],
    values: dict[str, dict[str, float]],
    unreported: list[str],
    shares: dict[str, dict[str, Any]] | None,
) -> Observed:
    """One GPU that reports: its node, the pod holding it (or each MIG instance's), its faults and shares."""
    node = _node_for(idents[0], nodes, ip_to_node)
    holders = sorted({f"{i['namespace']}/{i['pod']}" for i in idents if i["pod"]})
    live = running.get(node)
    if len(holders) > 1 and live is not None:
        holders = [h for h in holders if h in live] or holders[-1:]
    pod = holders[0] if holders else ""
    first = idents[0]
    mig = _instances(idents, live, nodes.get(node, {}).get("labels") or {})
    try:
        index: int | None = int(first["gpu"])
    except ValueError:
        index = None
    xid = values.get("xid_last", {}).get(uuid)
    dbe = values.get("ecc_dbe_total", {}).get(uuid)
    sbe = values.get("ecc_sbe_total", {}).get(uuid)
    faulty = (xid is not None and int(xid) in CRITICAL_XIDS) or (dbe is not None and dbe > 0)
    state = {
        "node": node,
        "index": index,
        "uuid": uuid,
        "model": first["model"] or (nodes.get(node, {}).get("gpu_product", "").replace("-", " ")),
        "pci_bus_id": first["pci_bus_id"],
        "present": True,
        # The pod is the fact; its namespace is not stored again (one allocation = one change, not two).
        "pod": pod or None,
        "xid_last": int(xid) if xid is not None else None,
        "ecc_dbe_total": int(dbe) if dbe is not None else None,
        "ecc_sbe_total": int(sbe) if sbe is not None else None,
        "unreported": unreported,  # counters the exporter does not export: "no data", never "healthy"
    }
    if mig:
        state["mig"] = mig
    shared = (shares or {}).get(uuid)
    if shared:
        state["reservation"] = shared.get("reservation")
        state["shares"] = shared.get("shares") or []
    return Observed(
        kind="gpu",
        name=uuid,
        state=state,
        actor="dcgm-exporter",
        hot={
            "node": node,
            "pod": pod,
            "phase": "faulty" if faulty else "ok",
            "namespace": pod.split("/", 1)[0] if pod else "",
        },
    )


def _stopped_reporting(
    previous: dict[str, dict[str, Any]] | None, reporting: dict[str, list[dict[str, str]]]
) -> list[Observed]:
    """The GPUs recorded before that no longer report: their last state, marked missing."""
    out: list[Observed] = []
    for uuid, last in sorted((previous or {}).items()):
        if uuid in reporting:
            continue
        kept = {k: v for k, v in last.items() if k != "namespace"}  # states recorded before it was dropped
        state = {**kept, "present": False, "pod": None}
        out.append(
            Observed(
                kind="gpu",
                name=uuid,
                state=state,
                actor="dcgm-exporter",
                hot={"node": last.get("node") or "", "pod": "", "phase": "missing", "namespace": ""},
            )
        )
    return out
