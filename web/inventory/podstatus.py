"""A pod's status as an operator reads it (kubectl's STATUS column), not only its phase.

Kubernetes keeps a crash-looping pod in phase Running and a pod whose image cannot be pulled in phase
Pending; kubectl shows the container's waiting reason instead (CrashLoopBackOff, ImagePullBackOff,
CreateContainerConfigError), or the reason its last run ended while it is not ready. Pages show this next to
the phase so that a failing workload never reads as a green "Running".
"""

from __future__ import annotations

from typing import Any


def container_trouble(state: dict[str, Any]) -> str:
    """The first reason a container of the pod is not running and ready ("" when none): waiting, then ended."""
    for c in state.get("containers") or []:
        if c.get("ready"):
            continue
        cur = c.get("state") or {}
        waiting = (cur.get("waiting") or {}).get("reason")
        if waiting:
            return str(waiting)
        ended = (cur.get("terminated") or {}).get("reason")
        if ended and state.get("phase") == "Running":
            return str(ended)
    return ""


def pod_status(state: dict[str, Any], phase: str | None) -> str:
    """kubectl's STATUS: the deleting mark, a container's trouble, else the phase."""
    if state.get("deleting"):
        return "Terminating"
    return container_trouble(state) or (phase or state.get("phase") or "")


def pods_in_trouble(pods: list[Any]) -> dict[str, int]:
    """{reason: pods} over EntityVersion-like rows with ``state``: what is wrong with a job's pods."""
    out: dict[str, int] = {}
    for p in pods:
        reason = container_trouble(getattr(p, "state", None) or {})
        if reason:
            out[reason] = out.get(reason, 0) + 1
    return out
