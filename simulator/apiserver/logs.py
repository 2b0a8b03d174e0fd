"""pods/{name}/log: what kubelet returns for the current or previous container, with its errors."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

CONTAINER = "main"


class LogError(Exception):
    def __init__(self, message: str, code: int = 400, reason: str = "BadRequest") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


def _find_pod(world: Any, namespace: str, name: str) -> Any:
    pods = world.pods.values() if isinstance(world.pods, dict) else world.pods
    for pod in pods:
        if pod.namespace == namespace and pod.name == name and pod.created_at <= world.now:
            if pod.deleted_at is None or pod.deleted_at > world.now:
                return pod
    raise LogError(f'pods "{name}" not found', code=404, reason="NotFound")


def _parse_line(line: str) -> tuple[datetime | None, str]:
    stamp, _, rest = line.partition(" ")
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")), rest
    except ValueError:
        return None, line


def _waiting_message(pod: Any) -> str:
    waiting = (pod.container_state or {}).get("waiting") or {}
    reason = waiting.get("reason") or "ContainerCreating"
    if reason == "ErrImagePull":
        return "image can't be pulled"
    if reason == "ImagePullBackOff":
        return "trying and failing to pull image"
    return reason


def _last_terminated(pod: Any) -> bool:
    """kubelet keeps the last terminated container (lastState.terminated) and serves its log."""
    return pod.restart_count > 0


def pod_log(world: Any, namespace: str, name: str, query: dict[str, str]) -> str:
    pod = _find_pod(world, namespace, name)
    container = query.get("container") or CONTAINER
    if container != CONTAINER:
        raise LogError(f"container {container} is not valid for pod {name}")
    state = pod.container_state or {}
    if query.get("previous") in ("true", "1", "True"):
        # the container before the current one: lastState.terminated
        if not _last_terminated(pod):
            raise LogError(f'previous terminated container "{container}" in pod "{name}" not found')
        lines = list(pod.previous_logs)
    else:
        if not pod.node:
            raise LogError(f"pod {name} does not have a host assigned")
        if "waiting" in state and _last_terminated(pod) and not pod.logs:
            # CrashLoopBackOff: no container runs; kubelet answers with the last terminated one's log
            lines = list(pod.previous_logs)
        elif pod.started_at is None or ("waiting" in state and not pod.logs):
            raise LogError(
                f'container "{container}" in pod "{name}" is waiting to start: {_waiting_message(pod)}'
            )
        else:
            lines = list(pod.logs)
    parsed = [_parse_line(line) for line in lines]
    if query.get("sinceSeconds"):
        try:
            cutoff = world.now - timedelta(seconds=int(query["sinceSeconds"]))
        except ValueError as exc:
            raise LogError(f"invalid sinceSeconds: {query['sinceSeconds']}") from exc
        parsed = [(t, text) for t, text in parsed if t is None or t >= cutoff]
    if query.get("tailLines"):
        try:
            tail = int(query["tailLines"])
        except ValueError as exc:
            raise LogError(f"invalid tailLines: {query['tailLines']}") from exc
        parsed = parsed[-tail:] if tail > 0 else []
    timestamps = query.get("timestamps") in ("true", "1", "True")
    out = []
    for stamp, text in parsed:
        if timestamps and stamp is not None:
            out.append(stamp.strftime("%Y-%m-%dT%H:%M:%S.%f000Z") + " " + text)
        else:
            out.append(text)
    body = "".join(line + "\n" for line in out)
    if query.get("limitBytes"):
        body = body.encode()[: int(query["limitBytes"])].decode(errors="ignore")
    return body
