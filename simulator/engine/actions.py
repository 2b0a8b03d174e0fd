"""Scenario events (docs/scenarios.md §2 ``events``) and their real effects on the world.

Xid handling follows NVIDIA's Xid catalog and the k8s-device-plugin's health
check: application Xids (13, 31, 43, 45, 68, 109) and informational ones (63,
92, 94) leave the GPU allocatable, 13/31/43/68/94/109 kill the running CUDA
process once; any other Xid marks the GPU unhealthy (allocatable drops) until
``resolve``. Xid 79 (fallen off the bus) also makes the GPU vanish from DCGM,
and Xid 74 (NVLink error) starts the NVLink CRC flit error counter climbing.
``ecc`` adds to the volatile SBE/DBE counters; a DBE makes the GPU unhealthy.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from . import lifecycle, sharing
from .fit import DEFAULT_TOLERATIONS, UNREACHABLE_TAINTS, UNSCHEDULABLE_TAINT, tolerates
from .ids import unit

if TYPE_CHECKING:
    from ..scenario import EventSpec
    from ..state import SimGPU, SimNode
    from .world import World

logger = logging.getLogger(__name__)

APP_XIDS = {
    13: "RuntimeError: CUDA error: an illegal memory access was encountered",
    31: "RuntimeError: CUDA error: an illegal memory access was encountered",
    43: "RuntimeError: CUDA error: unspecified launch failure",
    68: "RuntimeError: CUDA error: unspecified launch failure",
    94: "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    109: "RuntimeError: CUDA error: the launch timed out and was terminated",
}
HARMLESS_XIDS = {45, 63, 92}
KILL_LINES = {
    48: "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    74: "[E ProcessGroupNCCL.cpp:1316] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48211, "
    "OpType=ALLREDUCE, NumelIn=65536, NumelOut=65536, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.",
    79: "RuntimeError: CUDA error: unknown error",
}
NVLINK_RATE_PER_S = 2.5  # CRC flit errors per second on a failing link, until resolved


def apply(world: World, ev: EventSpec) -> None:
    logger.debug("applying %s at %s", ev.action, world.now)
    HANDLERS[ev.action](world, ev.args, ev.actor)


def _quota(world: World, a: dict[str, Any], actor: str | None) -> None:
    if "department" in a:
        target: Any = world.departments[a["department"]]
        kind = "department"
    else:
        target = world.projects[a["project"]]
        kind = "project"
    proj = target
    for key, attr in (("quota", "quota_gpus"), ("limit", "limit_gpus")):
        if key in a:
            old = getattr(proj, attr)
            setattr(proj, attr, a[key])
            world.change(kind, proj.name, key, old, a[key], actor)
    proj.last_manager = actor or "system"
    proj.changed_at = world.now
    world.touch(proj)


def _restart_if_active(world: World, job: Any, reason: str) -> None:
    if job.state in ("Pending", "Running"):
        lifecycle.restart_job(world, job, reason)


def _request(world: World, a: dict[str, Any], actor: str | None) -> None:
    job = world.jobs[a["job"]]
    for key in ("pods", "gpus_per_pod"):
        current = job.mig_count if key == "gpus_per_pod" and job.mig_profile else getattr(job, key)
        if key in a and a[key] != current:
            job.history.append(
                {"time": world.now, "field": key, "old": current, "new": a[key], "actor": actor}
            )
            world.change("job", f"{job.namespace}/{job.name}", key, current, a[key], actor)
            if key == "gpus_per_pod":
                sharing.resize(world, job, a[key])
            else:
                setattr(job, key, a[key])
    job.generation += 1
    world.touch(job)
    _restart_if_active(world, job, "resubmitted")


def _image(world: World, a: dict[str, Any], actor: str | None) -> None:
    job = world.jobs[a["job"]]
    job.history.append(
        {"time": world.now, "field": "image", "old": job.image, "new": a["image"], "actor": actor}
    )
    world.change("job", f"{job.namespace}/{job.name}", "image", job.image, a["image"], actor)
    job.image = a["image"]
    job.generation += 1
    world.ledger.image_changed.add(job.name)
    job.image_missing = bool(job.failure and job.failure.get("kind") == "image_pull")
    world.touch(job)
    _restart_if_active(world, job, "resubmitted")


def _kill_holder(world: World, node: SimNode, gpu: SimGPU, line: str) -> None:
    """The CUDA processes on a failed GPU die (its holder, every share on it, every MIG instance's pod);
    their gangs are torn down and queued again."""
    for key in sorted(k for k in {gpu.pod, *gpu.shares, *(i.pod for i in gpu.mig)} if k is not None):
        pod = world.pods.get(key)
        if pod is None or pod.deleted_at is not None:
            continue
        world.log(pod, world.now, line)
        pod.last_state = {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "finishedAt": world.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        }
        lifecycle.restart_job(world, world.jobs[pod.job], "gpu-failure", status_reason="Error", message=line)


def _xid(world: World, a: dict[str, Any], actor: str | None) -> None:
    node = world.nodes[a["node"]]
    gpu = node.gpus[a["gpu"]]
    code = a["code"]
    gpu.xid_last, gpu.xid_at = code, world.now
    world.telemetry.set_xid(node.name, gpu.index, world.now, code)
    if code in HARMLESS_XIDS:
        pass
    elif code in APP_XIDS:
        if gpu.pod and gpu.pod in world.pods:
            lifecycle.crash_once(world, world.pods[gpu.pod], [APP_XIDS[code]], world.now)
    else:
        gpu.healthy = False
        gpu.fault, gpu.fault_at = f"xid-{code}", world.now
        if code == 79:
            gpu.present = False
            world.telemetry.set_present(node.name, gpu.index, world.now, False)
        if code == 74:
            burst = 40 + int(unit(world.seed, "nvlink", gpu.uuid, world.now.isoformat()) * 200)
            gpu.nvlink_errors_total += burst
            gpu.nvlink_errors_at = world.now
            world.telemetry.set_nvlink(
                node.name, gpu.index, world.now, gpu.nvlink_errors_total, NVLINK_RATE_PER_S
            )
        _kill_holder(world, node, gpu, KILL_LINES.get(code, "RuntimeError: CUDA error: unknown error"))
    world.touch(node)


def _ecc(world: World, a: dict[str, Any], actor: str | None) -> None:
    node = world.nodes[a["node"]]
    gpu = node.gpus[a["gpu"]]
    gpu.ecc_sbe_total += a.get("sbe", 0)
    gpu.ecc_dbe_total += a.get("dbe", 0)
    world.telemetry.set_ecc(node.name, gpu.index, world.now, gpu.ecc_sbe_total, gpu.ecc_dbe_total)
    if a.get("dbe"):
        gpu.ecc_dbe_at = world.now
        gpu.healthy = False
        gpu.fault, gpu.fault_at = "ecc-dbe", world.now
        _kill_holder(world, node, gpu, KILL_LINES[48])
    world.touch(node)


def _thermal(world: World, a: dict[str, Any], actor: str | None) -> None:
    node = world.nodes[a["node"]]
    gpu = node.gpus[a["gpu"]]
    gpu.temp_override_c = a["temp_c"]
    world.telemetry.set_temp(node.name, gpu.index, world.now, a["temp_c"])
    world.touch(node)


def _set_ready(world: World, node: SimNode, ready: bool) -> None:
    if node.ready == ready:
        return
    node.ready = ready
    node.ready_changed_at = world.now
    node.ready_reason = "KubeletReady" if ready else "NodeStatusUnknown"
    # The node lifecycle controller taints a node whose kubelet stopped posting status.
    node.taints = [t for t in node.taints if t["key"] != "node.kubernetes.io/unreachable"]
    if not ready:
        node.taints.extend(dict(t) for t in UNREACHABLE_TAINTS)
    world.telemetry.set_node_up(node.name, world.now, ready)
    status = "NodeReady" if ready else "NodeNotReady"
    world.emit(
        world.involved_node(node),
        status,
        f"Node {node.name} status is now: {status}",
        component="node-controller",
    )
    for pod in list(world.pods.values()):
        if pod.node == node.name:
            if ready and pod.deleted_at is not None:  # the kubelet confirms the pending deletion
                lifecycle.release(world, pod, world.now)
                world.pods.pop(f"{pod.namespace}/{pod.name}", None)
                world.deleted_pods.append(pod)
                if pod in world.ledger.pods_by_job.get(pod.job, []):
                    world.ledger.pods_by_job[pod.job].remove(pod)
            elif not ready:
                pod.ready = False
            world.touch(pod)
    world.touch(node)


def _node_ready(world: World, a: dict[str, Any], actor: str | None) -> None:
    _set_ready(world, world.nodes[a["node"]], a["ready"])


def _cordon(world: World, a: dict[str, Any], actor: str | None, value: bool = True) -> None:
    node = world.nodes[a["node"]]
    if node.unschedulable != value:
        world.change("node", node.name, "spec.unschedulable", node.unschedulable, value, actor)
        node.unschedulable = value
        node.taints = [t for t in node.taints if t["key"] != UNSCHEDULABLE_TAINT["key"]]
        if value:  # added by the node lifecycle controller (TaintNodesByCondition)
            node.taints.append(dict(UNSCHEDULABLE_TAINT))
        status = "NodeNotSchedulable" if value else "NodeSchedulable"
        world.emit(
            world.involved_node(node),
            status,
            f"Node {node.name} status is now: {status}",
            component="kubelet",
        )
        world.touch(node)


def _uncordon(world: World, a: dict[str, Any], actor: str | None) -> None:
    _cordon(world, a, actor, value=False)


def _taint(world: World, a: dict[str, Any], actor: str | None) -> None:
    node = world.nodes[a["node"]]
    old = [dict(t) for t in node.taints]
    if "add" in a:
        t = a["add"]
        node.taints = [
            x for x in node.taints if not (x["key"] == t["key"] and x.get("effect") == t["effect"])
        ] + [dict(t)]
    else:
        t = a["remove"]
        node.taints = [
            x
            for x in node.taints
            if not (x["key"] == t["key"] and (not t.get("effect") or x.get("effect") == t["effect"]))
        ]
    world.change("node", node.name, "spec.taints", old, [dict(x) for x in node.taints], actor)
    world.touch(node)
    if "add" in a and a["add"]["effect"] == "NoExecute":
        for job_name in sorted(
            {p.job for p in world.pods.values() if p.node == node.name and p.deleted_at is None}
        ):
            job = world.jobs[job_name]
            if not any(tolerates(tol, a["add"]) for tol in [*job.tolerations, *DEFAULT_TOLERATIONS]):
                for p in world.pods_of(job):
                    if p.node == node.name:
                        world.emit(
                            world.involved_pod(p),
                            "TaintManagerEviction",
                            f"Marking for deletion Pod {p.namespace}/{p.name}",
                            component="taint-eviction-controller",
                        )
                lifecycle.restart_job(
                    world,
                    job,
                    "taint-eviction",
                    status_reason="Evicted",
                    message=f"Taint {a['add']['key']} added to node {node.name}",
                )


def _device_plugin(world: World, a: dict[str, Any], actor: str | None) -> None:
    node = world.nodes[a["node"]]
    if node.device_plugin_healthy != a["healthy"]:
        node.device_plugin_healthy = a["healthy"]
        node.device_plugin_changed_at = world.now
        world.touch(node)


def _add_nodes(world: World, a: dict[str, Any], actor: str | None) -> None:
    for node in world.add_nodes(a["nodepool"], a["count"], at=world.now):
        world.emit(
            world.involved_node(node),
            "RegisteredNode",
            f"Node {node.name} event: Registered Node {node.name} in Controller",
            component="node-controller",
        )
        world.change("node", node.name, "created", None, node.nodepool, actor)


def _resolve(world: World, a: dict[str, Any], actor: str | None) -> None:
    """A repair (GPU reset / reboot): faults and volatile counters clear, the node comes back."""
    node = world.nodes[a["node"]]
    for g in node.gpus:
        if not g.present:
            world.telemetry.set_present(node.name, g.index, world.now, True)
        g.present, g.healthy, g.fault, g.fault_at = True, True, None, None
        g.xid_last, g.xid_at = 0, None
        g.ecc_sbe_total = g.ecc_dbe_total = 0
        g.nvlink_errors_total = 0
        g.temp_override_c = None
        world.telemetry.set_xid(node.name, g.index, world.now, 0)
        world.telemetry.set_ecc(node.name, g.index, world.now, 0, 0)
        world.telemetry.set_nvlink(node.name, g.index, world.now, 0, 0.0)
        world.telemetry.set_temp(node.name, g.index, world.now, None)
    node.device_plugin_healthy = True
    world.change("node", node.name, "repair", None, "resolved", actor)
    _set_ready(world, node, True)
    world.touch(node)


HANDLERS = {
    "quota": _quota,
    "request": _request,
    "image": _image,
    "xid": _xid,
    "ecc": _ecc,
    "thermal": _thermal,
    "node_ready": _node_ready,
    "cordon": _cordon,
    "uncordon": _uncordon,
    "taint": _taint,
    "device_plugin": _device_plugin,
    "add_nodes": _add_nodes,
    "resolve": _resolve,
    "mig": lambda world, a, actor: sharing.repartition(world, world.nodes[a["node"]], a["layout"], actor),
}
