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

from collectors.inventory import Observed
from collectors.sources.dcgm import dcgm_identity
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
        uuid = dcgm_identity(s.labels)["uuid"]
        if uuid and s.last is not None:
            out[uuid] = max(out.get(uuid, s.last), s.last)  # MIG instances of one GPU: the worst value
    return out


def map_gpus(
    inventory: list[Series],
    facts: dict[str, list[Series] | None],
    *,
    nodes: dict[str, dict[str, Any]],
    running_pods_on_node: dict[str, set[str]] | None = None,
    previous: dict[str, dict[str, Any]] | None = None,
) -> list[Observed]:
    """``inventory``: series of the GPU inventory query; ``facts``: state key → series (None = not exported).

    ``nodes``: node name → node state (addresses used to resolve ``instance``); ``running_pods_on_node``:
    "ns/name" of running pods per node, to choose among several pod label sets of one GPU (a pod that just
    ended and the next one, within the query window); ``previous``: uuid → last recorded state, for GPUs that
    stopped reporting.
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
    out: list[Observed] = []
    for uuid, idents in sorted(by_uuid.items()):
        node = _node_for(idents[0], nodes, ip_to_node)
        holders = sorted({f"{i['namespace']}/{i['pod']}" for i in idents if i["pod"]})
        live = running.get(node)
        if len(holders) > 1 and live is not None:
            holders = [h for h in holders if h in live] or holders[-1:]
        pod = holders[0] if holders else ""
        first = idents[0]
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
        out.append(
            Observed(
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
        )
    for uuid, last in sorted((previous or {}).items()):
        if uuid in by_uuid:
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
