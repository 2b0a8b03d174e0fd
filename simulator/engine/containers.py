"""Containers on a bound pod: start, crash, back-off, image pulls, as kubelet shows them.

A crash loop is a container that exits (reason Error, or OOMKilled with 137)
and is restarted with a back-off of 10s, 20s, 40s … capped at 5m, the pod
staying phase Running with ``waiting: CrashLoopBackOff``; an image that does
not exist leaves the pod Pending with ``ErrImagePull`` then ``ImagePullBackOff``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..durations import go as go_duration
from ..state import SimJob, SimNode, SimPod
from . import sharing
from .ids import rfc3339, unit
from .logs import crash_lines, startup_lines

if TYPE_CHECKING:
    from .world import World

MAX_BACKOFF_S = 300


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
    if job.name in world.ledger.failure_from_image_event and job.name not in world.ledger.image_changed:
        return None
    return job.failure


def advance_container(world: World, pod: SimPod, t: datetime) -> None:
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
    attempts = world.ledger.pull_attempts.get(key, 0) + 1
    world.ledger.pull_attempts[key] = attempts
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


def _node(world: World, pod: SimPod) -> SimNode:
    """The node a bound pod runs on (KeyError for an unbound one, as the lookup by None raised)."""
    if pod.node is None:
        raise KeyError(None)
    return world.nodes[pod.node]


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
    mem = _node(world, pod).gpu_memory_mib if pod.node else 0
    if fail is None:
        pod.ready = True
        pod.next_restart_at = None
        if pod.mig_instances:
            sharing.mig_activity(world, pod, _node(world, pod), job.sm_activity, at)
        elif pod.shared:
            sharing.share_activity(world, _node(world, pod), pod.gpu_indices[0], at)
        else:
            for i, level in zip(
                pod.gpu_indices, gpu_levels(job.sm_activity, len(pod.gpu_indices)), strict=True
            ):
                fb = int(mem * (0.35 + 0.55 * level)) if level > 0 else 512
                world.telemetry.set_activity(pod.node, i, at, f"{pod.namespace}/{pod.name}", level, fb)
    else:
        kind = fail["kind"]
        r = unit(world.seed, "crash", pod.uid, pod.restart_count)
        after: float = {"crashloop": 4 + r * 12, "gpu_oom": 40 + r * 80, "oom_killed": 180 + r * 300}.get(
            kind, 10
        )
        pod.ready = kind == "oom_killed"
        level, fb_share = {
            "crashloop": (0.0, 0.0),
            "gpu_oom": (0.08, 0.98),
            "oom_killed": (job.sm_activity, 0.6),
        }.get(kind, (0.0, 0.0))
        if pod.mig_instances:
            sharing.mig_activity(world, pod, _node(world, pod), level, at)
        elif pod.shared:
            sharing.share_activity(world, _node(world, pod), pod.gpu_indices[0], at)
        else:
            for i in pod.gpu_indices:
                world.telemetry.set_activity(
                    pod.node, i, at, f"{pod.namespace}/{pod.name}", level, int(mem * fb_share)
                )
        pod.next_restart_at = at + timedelta(seconds=int(after))
    _check_job_running(world, job, at)
    world.touch(pod)


def _crash(world: World, pod: SimPod, job: SimJob, fail: dict | None, at: datetime) -> None:
    kind = (fail or {}).get("kind", "crashloop")
    started = pod.container_state.get("running", {}).get("startedAt")
    for line in crash_lines(job, pod, fail or {}, _node(world, pod).gpu_memory_mib if pod.node else 0):
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
    if pod.mig_instances:
        sharing.mig_activity(world, pod, _node(world, pod), 0.0, at)
    elif pod.shared:
        sharing.share_activity(world, _node(world, pod), pod.gpu_indices[0], at)
    else:
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
        world.ledger.progress[job.name] = 0.0
        world.touch(job)
