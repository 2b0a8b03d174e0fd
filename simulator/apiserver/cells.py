"""What every server-side Table shares: the Name and Age columns and how an age is written."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..durations import human as human_duration

Row = list[Any]

NAME_DOC = "Name must be unique within a namespace. Cannot be updated."
AGE_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created."


def column(name: str, type_: str = "string", priority: int = 0, description: str = "", fmt: str = "") -> dict:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


NAME = column("Name", fmt="name", description=NAME_DOC)
AGE = column("Age", description=AGE_DOC)


def parse_ts(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None


def since(ts: str | None, now: datetime) -> str:
    """translateTimestampSince: '<unknown>' for a missing time."""
    t = parse_ts(ts)
    if t is None:
        return "<unknown>"
    return human_duration((now - t.astimezone(UTC)).total_seconds())


def age(obj: dict, now: datetime) -> str:
    return since(obj.get("metadata", {}).get("creationTimestamp"), now)
