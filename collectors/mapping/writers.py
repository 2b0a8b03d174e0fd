"""Who wrote an object, read from its ``managedFields``: its creator, its last writer, its spec's and its
status' writers."""

from __future__ import annotations

from typing import Any

from collectors.mapping.metadata import meta


def actor(obj: dict[str, Any], *, spec_only: bool = False) -> str:
    """Who wrote the object last: the manager of the most recent managedFields entry.

    The newest field set is what caused the change a sweep sees (kubelet for status, an operator or
    kubectl for spec). ``spec_only`` skips the status subresource, for objects whose inventory state is
    all spec (queues: the quota writer, not the controller that refreshes usage). "" when nobody is named.
    """
    latest, latest_time = "", None
    for e in meta(obj).get("managedFields") or ():
        if not isinstance(e, dict) or not e.get("manager"):
            continue
        if spec_only and e.get("subresource") == "status":
            continue
        when = str(e.get("time") or "")
        if latest_time is None or when >= latest_time:  # ties: the later entry wins
            latest, latest_time = str(e["manager"]), when
    return latest[:200]


def _writers(obj: dict[str, Any], *, status: bool) -> list[dict[str, Any]]:
    return [
        e
        for e in meta(obj).get("managedFields") or []
        if isinstance(e, dict) and e.get("manager") and (e.get("subresource") == "status") == status
    ]


def creator(obj: dict[str, Any]) -> str:
    """Who created the object: the manager of the oldest spec (non-status) managedFields entry — the job
    controller for a Job's pod, kubectl or a CI bot for the Job — not the scheduler or kubelet that wrote
    its status since. "" when nobody is named."""
    entries = _writers(obj, status=False)
    if not entries:
        return ""
    first = min(enumerate(entries), key=lambda ie: (str(ie[1].get("time") or ""), ie[0]))[1]
    return str(first.get("manager", ""))[:200]


def status_writer(obj: dict[str, Any]) -> str:
    """The newest writer of the status subresource (the controller reporting what happened), else
    :func:`actor`."""
    entries = _writers(obj, status=True)
    if not entries:
        return actor(obj)
    latest = max(enumerate(entries), key=lambda ie: (str(ie[1].get("time") or ""), ie[0]))[1]
    return str(latest.get("manager", ""))[:200]


def spec_writer_time(obj: dict[str, Any]) -> tuple[str, str]:
    """(manager, time) of the newest non-status managedFields entry; ("", "") when none."""
    entries = [
        e
        for e in meta(obj).get("managedFields") or []
        if isinstance(e, dict) and e.get("manager") and e.get("subresource") != "status"
    ]
    if not entries:
        return "", ""
    latest = max(enumerate(entries), key=lambda ie: (str(ie[1].get("time") or ""), ie[0]))[1]
    return str(latest.get("manager", ""))[:200], str(latest.get("time") or "")
