"""Jobs and their pods over time: arrival, binding, release, gang restarts, completion, node loss.

What happens inside a bound pod's container (start, crash loops, image pulls)
lives in ``containers.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..state import SimJob, SimPod
from . import sharing
from .containers import advance_container, backoff_s, crash_once, failure_of, go_duration, gpu_levels
from .ids import name_suffix, rfc3339, uid, unit
from .logs import progress_line

__all__ = [
    "backoff_s",
    "bind",
    "crash_once",
    "create_pods",
    "delete_pod",
    "go_duration",
    "gpu_levels",
    "progress",
    "release",
    "restart_job",
    "submit",
]

if TYPE_CHECKING:
    from .world import World

THROTTLE_TEMP_C = 85.0  # at or above: clocks slow down (documented threshold, also GPUHighTemperature's)
THROTTLED_RATE = 0.6  # work done per second while throttled
NODE_LOST_GRACE_S = 300  # default tolerationSeconds for node.kubernetes.io/unreachable:NoExecute


#
# Arrival and pods
#


def submit(world: World, job: SimJob) -> None:
    job.state = "Pending"
    job.pending_since = world.now
    if world.scheduler == "kueue":
        job.suspended = True
        world.emit(
            world.involved_job(job),
            "CreatedWorkload",
            f"Created Workload: {job.namespace}/{job.podgroup}",
            component="kueue-job-controller",
        )
    else:
        create_pods(world, job)
    world.touch(job)


def create_pods(world: World, job: SimJob) -> None:
    attempt = world.next_attempt(job.name)
    cpu, mem = sharing.cpu_memory_request(job)
    for i in range(job.pods):
        name = f"{job.name}-{i}-{name_suffix(world.seed, job.name, attempt, i)}"
        pod = SimPod(
            name=name,
            namespace=job.namespace,
            job=job.name,
            index=i,
            uid=uid(world.seed, "pod", name),
            created_at=world.now,
            gpus_requested=job.gpus_per_pod,
            image=job.image,
            generation=job.generation,
            priority_class=job.priority_class,
            gpu_fraction=job.gpu_fraction,
            gpu_memory_mib=job.gpu_memory_mib,
            mig_profile=job.mig_profile,
            mig_count=job.mig_count,
            cpu_millis=cpu,
            memory_bytes=mem,
        )
        world.pods[f"{pod.namespace}/{pod.name}"] = pod
        world.ledger.pods_by_job.setdefault(job.name, []).append(pod)
        world.touch(pod)
        world.emit(
            world.involved_job(job), "SuccessfulCreate", f"Created pod: {name}", component="job-controller"
        )
    job.pending_since = world.now
    job.state = "Pending"
    job.started_at = None
    world.ledger.progress.pop(job.name, None)


def bind(world: World, job: SimJob, placement: list[tuple[str, Any]]) -> None:
    pods = sorted(world.pods_of(job), key=lambda p: p.index)
    for pod, (node_name, indices) in zip(pods, placement, strict=True):
        node = world.nodes[node_name]
        key = f"{pod.namespace}/{pod.name}"
        pod.node = node_name
        pod.gpu_indices = list(indices)
        pod.scheduled_at = world.now
        pod.scheduled_message = None
        pod.scheduled_reason = None
        delay = 5 + int(unit(world.seed, "pull", pod.uid) * 25)
        pod.next_restart_at = world.now + timedelta(seconds=delay)  # first container start
        pod.container_state = {"waiting": {"reason": "ContainerCreating"}}
        if pod.mig_profile:
            pod.gpu_indices = sorted({gi for gi, _gid in indices})
            sharing.bind_mig(world, pod, node, list(indices))
        elif pod.shared:
            sharing.bind_share(world, pod, node, indices[0])
        else:
            for i in indices:
                node.gpus[i].pod = key
                world.telemetry.set_activity(node_name, i, world.now, key, 0.0, 0)
        world.touch(node)
        world.touch(pod)
        if world.scheduler == "kai":
            world.emit(
                world.involved_pod(pod),
                "Bound",
                f"Pod bound successfully to node {node_name}",
                component="binder",
            )
        else:
            world.emit(
                world.involved_pod(pod),
                "Scheduled",
                f"Successfully assigned {pod.namespace}/{pod.name} to {node_name}",
                component="default-scheduler",
            )
    job.condition_reason = job.condition_message = None
    job.condition_reasons = []
    job.queue_position = None
    world.touch(job)


def release(world: World, pod: SimPod, at: datetime) -> None:
    """Free the GPUs a pod holds (its container is gone)."""
    if pod.node is None:
        return
    node = world.nodes[pod.node]
    key = f"{pod.namespace}/{pod.name}"
    if pod.mig_instances:
        sharing.release_mig(world, pod, node, at)
        world.touch(node)
        return
    if pod.shared:
        sharing.release_share(world, pod, node, at)
        world.touch(node)
        return
    for i in pod.gpu_indices:
        g = node.gpus[i]
        if g.pod == key:
            g.pod = None
            world.telemetry.set_activity(pod.node, i, at, None, 0.0, 0)
    world.touch(node)


def delete_pod(
    world: World, pod: SimPod, reason: str, *, status_reason: str | None = None, message: str | None = None
) -> None:
    """Delete a pod. On a node that is not Ready the kubelet cannot confirm, so it stays Terminating."""
    pod.deleted_at = world.now
    pod.deletion_reason = reason
    if status_reason:
        pod.reason, pod.message = status_reason, message
    pod.ready = False
    node = world.nodes.get(pod.node) if pod.node else None
    if node is not None and not node.ready and pod.phase == "Running":
        world.touch(pod)  # stuck Terminating with its GPUs until the node comes back
        return
    release(world, pod, world.now)
    world.pods.pop(f"{pod.namespace}/{pod.name}", None)
    world.deleted_pods.append(pod)
    siblings = world.ledger.pods_by_job.get(pod.job, [])
    if pod in siblings:
        siblings.remove(pod)
    world.touch(pod)


def restart_job(
    world: World, job: SimJob, reason: str, *, status_reason: str | None = None, message: str | None = None
) -> None:
    """Tear down the job's pods and queue it again (gang: one lost member restarts them all)."""
    for pod in world.pods_of(job):
        delete_pod(world, pod, reason, status_reason=status_reason, message=message)
    job.started_at = None
    world.ledger.progress.pop(job.name, None)
    if job.state in ("Succeeded", "Failed", "Waiting"):
        return
    if world.scheduler == "kueue":
        job.admitted = False
        job.suspended = True
        job.state = "Pending"
        job.pending_since = world.now
    else:
        create_pods(world, job)
    world.touch(job)


#
# Progress between two ticks
#


def progress(world: World, prev: datetime, t: datetime) -> None:
    for pod in list(world.pods.values()):
        if pod.deleted_at is not None:
            continue
        if pod.node is not None and pod.phase in ("Pending", "Running"):
            advance_container(world, pod, t)
    _finish_jobs(world, prev, t)
    _node_lost_evictions(world)


def _finish_jobs(world: World, prev: datetime, t: datetime) -> None:
    dt = (t - prev).total_seconds()
    for name, done in list(world.ledger.progress.items()):
        job = world.jobs[name]
        if job.state != "Running" or failure_of(world, job) is not None:
            continue
        pods = world.pods_of(job)
        throttled = any(
            (world.nodes[p.node].gpus[i].temp_override_c or 0) >= THROTTLE_TEMP_C
            for p in pods
            if p.node
            for i in p.gpu_indices
        )
        rate = THROTTLED_RATE if throttled else 1.0
        since = max(prev, job.started_at or prev)
        done += rate * (t - since).total_seconds() if since < t else 0.0
        world.ledger.progress[name] = done
        _log_progress(world, job, pods, prev, t, done)
        if job.runtime_s is not None and done >= job.runtime_s:
            end = t - timedelta(seconds=int((done - job.runtime_s) / rate))
            _complete(world, job, pods, max(end, prev))
    del dt


def _log_progress(
    world: World, job: SimJob, pods: list[SimPod], prev: datetime, t: datetime, done: float
) -> None:
    # One progress line per pod every 10 simulated minutes keeps logs realistic and small.
    if int(done // 600) != int(world.ledger.logged.get(job.name, -1)):
        world.ledger.logged[job.name] = done // 600
        for p in pods:
            world.log(p, t, progress_line(job, p, done))


def _complete(world: World, job: SimJob, pods: list[SimPod], at: datetime) -> None:
    for pod in pods:
        pod.phase = "Succeeded"
        pod.ready = False
        pod.finished_at = at
        world.log(pod, at, "INFO training finished, checkpoint saved")
        pod.container_state = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": rfc3339(pod.started_at),
                "finishedAt": rfc3339(at),
            }
        }
        pod.next_restart_at = None
        release(world, pod, at)
        world.touch(pod)
    job.state = "Succeeded"
    job.finished_at = at
    world.ledger.progress.pop(job.name, None)
    world.emit(world.involved_job(job), "Completed", "Job completed", component="job-controller", at=at)
    world.touch(job)


def _node_lost_evictions(world: World) -> None:
    """Pods on a node NotReady for longer than the unreachable toleration are evicted (taint manager)."""
    for node in world.nodes.values():
        if node.ready or node.ready_changed_at is None:
            continue
        if (world.now - node.ready_changed_at).total_seconds() < NODE_LOST_GRACE_S:
            continue
        victims = {
            p.job
            for p in world.pods.values()
            if p.node == node.name and p.deleted_at is None and p.phase in ("Pending", "Running")
        }
        for job_name in sorted(victims):
            job = world.jobs[job_name]
            for p in world.pods_of(job):
                if p.node == node.name:
                    world.emit(
                        world.involved_pod(p),
                        "TaintManagerEviction",
                        f"Marking for deletion Pod {p.namespace}/{p.name}",
                        component="taint-eviction-controller",
                    )
            restart_job(
                world,
                job,
                "node-lost",
                status_reason="NodeLost",
                message=f"Node {node.name} which was running the pod is unresponsive",
            )
