"""``World.snapshot()``: the whole state as JSON-able data, for determinism checks and debugging."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .ids import rfc3339

if TYPE_CHECKING:
    from .world import World


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return rfc3339(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_plain(v) for v in value]
    return value


def snapshot(world: World) -> dict[str, Any]:
    return {
        "cluster": world.cluster_name,
        "scheduler": world.scheduler,
        "now": rfc3339(world.now),
        "resource_version": world.resource_version,
        "nodes": [_plain(n) for n in world.nodes.values()],
        "projects": [_plain(p) for p in world.projects.values()],
        "departments": [_plain(d) for d in world.departments.values()],
        "reservations": [_plain(p) for p in world.reservations.values()],
        "jobs": [_plain(j) for j in world.jobs.values()],
        "pods": [_plain(p) for p in world.pods.values()],
        "deleted_pods": [_plain(p) for p in world.deleted_pods],
        "events": [_plain(e) for e in world.events],
        "changes": [_plain(c) for c in world.changes],
        "preemptions": _plain(world.preemptions),
        "alerts": world.alerts(include_pending=True),
    }
