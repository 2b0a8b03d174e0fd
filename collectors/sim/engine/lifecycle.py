"""Jobs and pods over time: arrival, binding, container start, failures, restarts, completion.

Failures follow what kubelet shows for each kind: a crash loop is a container
that exits (reason Error, or OOMKilled with 137) and is restarted with a
back-off of 10s, 20s, 40s … capped at 5m, the pod staying phase Running with
``waiting: CrashLoopBackOff``; an image that does not exist leaves the pod
Pending with ``ErrImagePull`` then ``ImagePullBackOff``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..state import SimJob, SimPod
from .ids import name_suffix, rfc3339, uid, unit
from .logs import crash_lines, progress_line, startup_lines

if TYPE_CHECKING:
    from .world import World

THROTTLE_TEMP_C = 85.0  # at or above: clocks slow down (documented threshold, also GPUHighTemperature's)
THROTTLED_RATE = 0.6  # work done per second while throttled
NODE_LOST_GRACE_S = 300  # default tolerationSeconds for node.kubernetes.io/unreachable:NoExecute
MAX_BACKOFF_S = 300


def go_duration(seconds: int) -> str:
    """Go's time.Duration text, as kubelet prints the back-off: ``10s``, ``2m40s``, ``5m0s``."""
    m, s = divmod(seconds, 60)
    return f"{m}m{s}s" if m else f"{s}s"


def backoff_s(restarts: int) -> int:
    return min(MAX_BACKOFF_S, 10 * 2 ** max(0, restarts - 1))


def gpu_levels(sm_activity: float, n: int) -> list[float]:
    """SM activity per GPU of a pod whose mean is ``sm_activity``.

    When the mean is less than one GPU's worth of work (n x mean < 0.9), the work
    sits on the pod's first GPU and the others stay idle, as with a program that
    only uses ``cuda:0`` on a multi-GPU allocation; otherwise it is spread evenly.
    """
    if n > 1 and sm_activity * n < 0.9:
        return [round(sm_activity * n, 4)] + [0.0] * (n - 1)
    return [sm_activity] * n


def failure_of(world: World, job: SimJob) -> dict | None:
    """The job's failure, if it applies now (with image events it starts at the first one)."""
    if not job.failure:
        return None
    if job.name in world._failure_from_image_event and job.name not in world._image_changed:
        return None
    return job.failure


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
        )
        world.pods[f"{pod.namespace}/{pod.name}"] = pod
        world._pods_by_job.setdefault(job.name, []).append(pod)
        world.touch(pod)
        world.emit(
            world.involved_job(job), "SuccessfulCreate", f"Created pod: {name}", component="job-controller"
        )
    job.pending_since = world.now
    job.state = "Pending"
    job.started_at = None
    world._progress.pop(job.name, None)


def bind(world: World, job: SimJob, placement: list[tuple[str, list[int]]]) -> None:
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
    siblings = world._pods_by_job.get(pod.job, [])
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
    world._progress.pop(job.name, None)
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
            _advance_container(world, pod, t)
    _finish_jobs(world, prev, t)
    _node_lost_evictions(world)


def _advance_container(world: World, pod: SimPod, t: datetime) -> None:
    job = world.jobs[pod.job]
    fail = failure_of(world, job)
    while pod.next_restart_at is not None and pod.next_restart_at <= t:
        at = pod.next_restart_at
        if job.image_missing:
            _image_pull_attempt(world, pod, at)
        elif pod.container_state.get("running"):
            _crash(world, pod, job, fail, at)  # next_restart_at was the crash time
        else:
            _start_container(world, pod, job, fail, at)


def _image_pull_attempt(world: World, pod: SimPod, at: datetime) -> None:
    involved = world.involved_pod(pod)
    image = pod.image
    world.emit(involved, "Pulling", f'Pulling image "{image}"', component="kubelet", at=at)
    world.emit(
        involved,
        "Failed",
        f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull and unpack image '
        f'"{image}": failed to resolve reference "{image}": {image}: not found',
        type="Warning",
        component="kubelet",
        at=at,
    )
    world.emit(involved, "Failed", "Error: ErrImagePull", type="Warning", component="kubelet", at=at)
    key = f"{pod.namespace}/{pod.name}"
    attempts = world._pull_attempts.get(key, 0) + 1
    world._pull_attempts[key] = attempts
    if attempts == 1:
        pod.container_state = {
            "waiting": {
                "reason": "ErrImagePull",
                "message": f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
                f'failed to resolve reference "{image}": {image}: not found',
            }
        }
    else:
        pod.container_state = {
            "waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}
        }
        world.emit(involved, "BackOff", f'Back-off pulling image "{image}"', component="kubelet", at=at)
        world.emit(involved, "Failed", "Error: ImagePullBackOff", type="Warning", component="kubelet", at=at)
    pod.next_restart_at = at + timedelta(seconds=backoff_s(attempts))
    world.touch(pod)


def _start_container(world: World, pod: SimPod, job: SimJob, fail: dict | None, at: datetime) -> None:
    involved = world.involved_pod(pod)
    if pod.restart_count == 0:
        world.emit(
            involved,
            "Pulled",
            f'Container image "{pod.image}" already present on machine',
            component="kubelet",
            at=at,
        )
    world.emit(involved, "Created", "Created container: main", component="kubelet", at=at)
    world.emit(involved, "Started", "Started container main", component="kubelet", at=at)
    pod.phase = "Running"
    pod.started_at = pod.started_at or at
    pod.container_state = {"running": {"startedAt": rfc3339(at)}}
    pod.logs = []
    for line in startup_lines(job, pod):
        world.log(pod, at, line)
    mem = world.nodes[pod.node].gpu_memory_mib if pod.node else 0
    if fail is None:
        pod.ready = True
        pod.next_restart_at = None
        for i, level in zip(pod.gpu_indices, gpu_levels(job.sm_activity, len(pod.gpu_indices)), strict=True):
            fb = int(mem * (0.35 + 0.55 * level)) if level > 0 else 512
            world.telemetry.set_activity(pod.node, i, at, f"{pod.namespace}/{pod.name}", level, fb)
    else:
        kind = fail["kind"]
        r = unit(world.seed, "crash", pod.uid, pod.restart_count)
        after = {"crashloop": 4 + r * 12, "gpu_oom": 40 + r * 80, "oom_killed": 180 + r * 300}.get(kind, 10)
        pod.ready = kind == "oom_killed"
        level, fb = {
            "crashloop": (0.0, 0.0),
            "gpu_oom": (0.08, 0.98),
            "oom_killed": (job.sm_activity, 0.6),
        }.get(kind, (0.0, 0.0))
        for i in pod.gpu_indices:
            world.telemetry.set_activity(pod.node, i, at, f"{pod.namespace}/{pod.name}", level, int(mem * fb))
        pod.next_restart_at = at + timedelta(seconds=int(after))
    _check_job_running(world, job, at)
    world.touch(pod)


def _crash(world: World, pod: SimPod, job: SimJob, fail: dict | None, at: datetime) -> None:
    kind = (fail or {}).get("kind", "crashloop")
    started = pod.container_state.get("running", {}).get("startedAt")
    for line in crash_lines(job, pod, fail or {}, world.nodes[pod.node].gpu_memory_mib if pod.node else 0):
        world.log(pod, at, line)
    if kind == "oom_killed":
        reason, code = "OOMKilled", 137
    else:
        reason, code = "Error", int((fail or {}).get("exit_code") or 1)
    pod.previous_logs = pod.logs
    pod.logs = []
    pod.restart_count += 1
    pod.ready = False
    pod.last_state = {
        "terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": rfc3339(at)}
    }
    delay = backoff_s(pod.restart_count)
    pod.container_state = {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off {go_duration(delay)} restarting failed container=main pod={pod.name}_{pod.namespace}({pod.uid})",
        }
    }
    pod.next_restart_at = at + timedelta(seconds=delay)
    for i in pod.gpu_indices:
        world.telemetry.set_activity(pod.node, i, at, f"{pod.namespace}/{pod.name}", 0.0, 0)
    world.emit(
        world.involved_pod(pod),
        "BackOff",
        f"Back-off restarting failed container main in pod {pod.name}_{pod.namespace}({pod.uid})",
        type="Warning",
        component="kubelet",
        at=at,
    )
    world.touch(pod)


def crash_once(world: World, pod: SimPod, lines: list[str], at: datetime) -> None:
    """An application error (Xid 13/31/43): the container dies once, kubelet restarts it, the GPU stays."""
    if not pod.container_state.get("running"):
        return
    for line in lines:
        world.log(pod, at, line)
    _crash(world, pod, world.jobs[pod.job], {"kind": "crashloop", "exit_code": 1}, at)


def _check_job_running(world: World, job: SimJob, at: datetime) -> None:
    pods = world.pods_of(job)
    if job.state == "Pending" and pods and all(p.phase == "Running" for p in pods):
        job.state = "Running"
        job.started_at = at
        job.pending_since = None
        world._progress[job.name] = 0.0
        world.touch(job)


def _finish_jobs(world: World, prev: datetime, t: datetime) -> None:
    dt = (t - prev).total_seconds()
    for name, done in list(world._progress.items()):
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
        world._progress[name] = done
        _log_progress(world, job, pods, prev, t, done)
        if job.runtime_s is not None and done >= job.runtime_s:
            end = t - timedelta(seconds=int((done - job.runtime_s) / rate))
            _complete(world, job, pods, max(end, prev))
    del dt


def _log_progress(
    world: World, job: SimJob, pods: list[SimPod], prev: datetime, t: datetime, done: float
) -> None:
    # One progress line per pod every 10 simulated minutes keeps logs realistic and small.
    if int(done // 600) != int(world._logged.get(job.name, -1)):
        world._logged[job.name] = done // 600
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
    world._progress.pop(job.name, None)
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
