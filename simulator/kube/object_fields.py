"""Helpers shared by the Kubernetes object renderers: timestamps, stable ids, managedFields.

Renderers are pure functions of the world's state at ``world.now``; they never
set ``metadata.resourceVersion`` (the API server's store owns that counter).
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any, overload

GPU = "nvidia.com/gpu"
_NS = uuid.UUID("6b1f3c1e-3d1a-4c59-9d0b-7a8f5d4e2c10")


@overload
def ts(value: datetime) -> str: ...
@overload
def ts(value: None) -> None: ...
@overload
def ts(value: datetime | None) -> str | None: ...
def ts(value: datetime | None) -> str | None:
    """RFC 3339 UTC with a Z suffix and seconds precision, as the API server writes metav1.Time."""
    if value is None:
        return None
    return _ts(value)


@functools.lru_cache(maxsize=65536)
def _ts(value: datetime) -> str:
    # the same few thousand instants repeat across objects; isoformat is also much cheaper than strftime
    return value.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


def stable_uid(*parts: str) -> str:
    """A uid for objects the state has no uid for (namespaces, podgroups, ...): stable per name."""
    return str(uuid.uuid5(_NS, "/".join(parts)))


def short_hash(*parts: str, length: int = 5) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def ip_for(kind: str, name: str) -> str:
    """A deterministic private address: nodes in 10.0/16, pods in 10.244/16."""
    digest = hashlib.sha256(f"{kind}/{name}".encode()).digest()
    prefix = "10.0" if kind == "node" else "10.244"
    return f"{prefix}.{digest[0]}.{max(digest[1], 2)}"


def jsonable(value: Any) -> Any:
    """Containers from the state may hold datetimes (container state startedAt...)."""
    if isinstance(value, datetime):
        return ts(value)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def managed_field(
    manager: str,
    api_version: str,
    when: datetime | None,
    fields: dict[str, Any] | None = None,
    operation: str = "Update",
    subresource: str | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": ts(when),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields or {},
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def gpu_quantity(value: float | int) -> str:
    """Kubernetes quantities are strings; whole GPUs print without a fraction."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:g}"
