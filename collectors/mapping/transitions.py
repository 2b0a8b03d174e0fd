"""When an object last changed, as the object itself says (creation, condition turns, container starts)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rcaweb.timestamps import timestamp_or_none


def latest_transition(*objs: dict[str, Any] | None) -> datetime | None:
    """The latest moment the objects say something about them changed: created, a condition turned
    (``lastTransitionTime``, not heartbeats), a container started or finished, a job started or completed,
    a spec or metadata writer wrote (``managedFields[].time``). None when they carry no time.

    A sweep sees a changed state some time after the change; this dates it (``Observed.since``), bounded
    by the previous listing (``collectors.version_rows.dated``)."""
    latest = ""  # the API server writes every time in UTC ("…Z"): the latest is the greatest text
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        m = obj.get("metadata")
        if isinstance(m, dict):
            latest = max(latest, _text(m.get("creationTimestamp")))
            for entry in m.get("managedFields") or ():
                # Spec and metadata writers only: status writers (the kubelet's heartbeats) write every few
                # seconds; the status' own transition times below date what changed there.
                if isinstance(entry, dict) and entry.get("subresource") != "status":
                    latest = max(latest, _text(entry.get("time")))
        st = obj.get("status")
        if not isinstance(st, dict):
            continue
        latest = max(latest, _text(st.get("startTime")), _text(st.get("completionTime")))
        for key in ("conditions", "schedulingConditions"):
            for cond in st.get(key) or ():
                if isinstance(cond, dict):
                    latest = max(latest, _text(cond.get("lastTransitionTime")))
        for key in ("initContainerStatuses", "containerStatuses"):
            for cs in st.get(key) or ():
                if not isinstance(cs, dict):
                    continue
                for which in ("state", "lastState"):
                    for detail in (cs.get(which) or {}).values():
                        if isinstance(detail, dict):
                            latest = max(
                                latest, _text(detail.get("startedAt")), _text(detail.get("finishedAt"))
                            )
    when = timestamp_or_none(latest)
    if when is None:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
