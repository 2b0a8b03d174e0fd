"""coordination.k8s.io/v1 Lease objects for nodes (namespace kube-node-lease), as each kubelet keeps one.

``kubectl describe node`` reads the node's Lease (its RenewTime line). A kubelet renews its lease every
10 s (leaseDurationSeconds 40); a node whose kubelet stopped (Ready Unknown) has the lease it last
renewed. Rendered on request from the nodes of the store's snapshot and the world's clock, not stored:
a renewal every 10 s for every node would flood the watch history the collectors depend on. A watch
on leases therefore sends the current ones and then only ends at its timeout.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from simulator.apiserver.store import Entry, Snapshot, encode
from simulator.kube.object_fields import stable_uid

LEASE_NAMESPACE = "kube-node-lease"
RENEW_S = 10
DURATION_S = 40


def _micro(t: datetime) -> str:
    """metav1.MicroTime on the wire: RFC 3339 with microseconds."""
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(ts: str | None) -> datetime | None:
    if not ts:
        return None
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def node_lease(node: dict[str, Any], now: datetime) -> dict[str, Any]:
    meta = node["metadata"]
    ready = next(
        (c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None
    )
    created = _parse(meta.get("creationTimestamp")) or now
    if ready is not None and ready.get("status") == "Unknown":
        # the kubelet stopped: its last renewal is the last heartbeat the node controller saw
        renew = _parse(ready.get("lastHeartbeatTime")) or now
    else:
        renew = now - timedelta(seconds=int(now.timestamp()) % RENEW_S, microseconds=now.microsecond)
    renew = max(renew, created)
    return {
        "kind": "Lease",
        "apiVersion": "coordination.k8s.io/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": LEASE_NAMESPACE,
            "uid": stable_uid("lease", meta["name"]),
            "creationTimestamp": meta.get("creationTimestamp"),
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}
            ],
        },
        "spec": {
            "holderIdentity": meta["name"],
            "acquireTime": _micro(created),
            "leaseDurationSeconds": DURATION_S,
            "renewTime": _micro(renew),
        },
    }


def lease_entries(
    snap: Snapshot, now: datetime
) -> tuple[dict[tuple[str, str], Entry], list[tuple[str, str]]]:
    """The leases at ``now``, keyed and ordered like the store's resources (resourceVersion = the node's)."""
    entries: dict[tuple[str, str], Entry] = {}
    nodes = snap.entries.get("nodes", {})
    for key in snap.order.get("nodes", []):
        node_entry = nodes[key]
        lease = node_lease(json.loads(node_entry.data), now)
        entries[(LEASE_NAMESPACE, key[1])] = encode(lease, node_entry.rv)
    return entries, sorted(entries)
