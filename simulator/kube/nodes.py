"""core/v1 Node from the world's node: labels, taints, capacity/allocatable GPUs, conditions, nodeInfo."""

from __future__ import annotations

from typing import Any

from simulator.kube.context import RenderContext
from simulator.kube.object_fields import GPU, ip_for, managed_field, stable_uid, ts
from simulator.state import SimNode

KUBELET_VERSION = "v1.31.4"
NODE_CPU = "224"
NODE_MEMORY = "2113442572Ki"


# length: one API object as one literal, fields in the API's order
def node(ctx: RenderContext, n: SimNode) -> dict[str, Any]:
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/hostname": n.name,
        "nvidia.com/gpu.present": "true",
        "run.ai/node-pool": n.nodepool,
        **n.labels,
    }
    # The engine puts the node lifecycle controller's taints (not-ready, unschedulable) into n.taints.
    taints = [dict(t) for t in n.taints]
    for t in taints:
        if t.get("key", "").startswith("node.kubernetes.io/"):
            t.setdefault("timeAdded", ts(n.ready_changed_at or ctx.now))
    gpus_capacity = str(n.capacity_gpus)
    gpus_alloc = str(n.allocatable_gpus)
    # Mixed MIG strategy: each profile is its own extended resource; nvidia.com/gpu counts unpartitioned GPUs.
    mig_capacity = {f"nvidia.com/mig-{p}": str(c) for p, c in sorted(n.mig_capacity().items())}
    mig_alloc = {f"nvidia.com/mig-{p}": str(c) for p, c in sorted(n.mig_allocatable().items())}
    cpu_cap, cpu_alloc = NODE_CPU, "220"
    mem_cap, mem_alloc = NODE_MEMORY, "2100859660Ki"
    if n.cpu_millis is not None:  # the pool's allocatable; capacity adds the kubelet's system reservation
        cpu_alloc = _cpu(n.cpu_millis)
        cpu_cap = _cpu(n.cpu_millis + 4000)
    if n.memory_bytes is not None:
        mem_alloc = f"{n.memory_bytes // 1024}Ki"
        mem_cap = f"{(n.memory_bytes + 12 * 2**30) // 1024}Ki"
    transition = ts(n.ready_changed_at or n.created_at)
    if n.ready:
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": ts(ctx.heartbeat),
            "lastTransitionTime": transition,
        }
    else:
        # NodeStatusUnknown: the node controller lost the kubelet; KubeletNotReady: the kubelet says so itself
        reason = getattr(n, "ready_reason", "") or "NodeStatusUnknown"
        if reason == "KubeletReady":
            reason = "NodeStatusUnknown"
        unknown = reason == "NodeStatusUnknown"
        ready = {
            "type": "Ready",
            "status": "Unknown" if unknown else "False",
            "reason": reason,
            "message": "Kubelet stopped posting node status."
            if unknown
            else "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady",
            "lastHeartbeatTime": ts(n.ready_changed_at or ctx.now) if unknown else ts(ctx.heartbeat),
            "lastTransitionTime": transition,
        }
    pressure = [
        _pressure(
            "MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", n, ctx
        ),
        _pressure("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", n, ctx),
        _pressure("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available", n, ctx),
    ]
    manager, changed = ctx.manager_for("node", n.name, "kubelet")
    managed = [managed_field("kubelet", "v1", n.created_at, {"f:metadata": {"f:labels": {}}})]
    if changed is not None:
        managed.append(
            managed_field(manager, "v1", changed, {"f:spec": {"f:taints": {}, "f:unschedulable": {}}})
        )
    managed.append(
        managed_field(
            "kubelet", "v1", ctx.heartbeat, {"f:status": {"f:conditions": {}}}, subresource="status"
        )
    )
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": n.name,
            "uid": n.uid,
            "creationTimestamp": ts(n.created_at),
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": managed,
        },
        "spec": {
            "podCIDR": f"10.244.{int(ip_for('node', n.name).split('.')[2])}.0/24",
            "providerID": f"sim://{ctx.cluster}/{n.name}",
            "taints": taints or None,
            "unschedulable": True if n.unschedulable else None,
        },
        "status": {
            "capacity": {
                "cpu": cpu_cap,
                "memory": mem_cap,
                "pods": "110",
                "ephemeral-storage": "3750157048Ki",
                GPU: gpus_capacity,
                **mig_capacity,
            },
            "allocatable": {
                "cpu": cpu_alloc,
                "memory": mem_alloc,
                "pods": "110",
                "ephemeral-storage": "3456144210195",
                GPU: gpus_alloc,
                **mig_alloc,
            },
            "conditions": [*pressure, ready],
            "addresses": [
                {"type": "InternalIP", "address": ip_for("node", n.name)},
                {"type": "Hostname", "address": n.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": n.uid.replace("-", ""),
                "systemUUID": n.uid,
                "bootID": stable_uid("boot", n.name),
                "kernelVersion": "5.15.0-126-generic",
                "osImage": "Ubuntu 22.04.5 LTS",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def _cpu(millis: int) -> str:
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def _pressure(kind: str, reason: str, message: str, n: SimNode, ctx: RenderContext) -> dict[str, Any]:
    status = "False" if n.ready else "Unknown"
    return {
        "type": kind,
        "status": status,
        "reason": reason if n.ready else "NodeStatusUnknown",
        "message": message if n.ready else "Kubelet stopped posting node status.",
        "lastHeartbeatTime": ts(ctx.now if n.ready else (n.ready_changed_at or ctx.now)),
        "lastTransitionTime": ts(n.ready_changed_at or n.created_at),
    }
