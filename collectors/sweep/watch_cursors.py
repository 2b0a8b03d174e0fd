"""Where each watch of a cluster stands, kept in Redis for ``/metrics`` and for the next session."""

from __future__ import annotations

import logging
from typing import Any

from collectors.sweep.redis_client import redis_client

logger = logging.getLogger(__name__)


def save_cursors(cluster: str, cursors: dict[str, str], **extra: Any) -> None:
    """Where each watch of ``cluster`` stands (Redis hash ``rcaweb:watch:<cluster>``; nothing without Redis)."""
    client = redis_client()
    if client is None:
        return
    import redis

    mapping_ = {f"rv:{call}": rv for call, rv in cursors.items()}
    mapping_.update({k: str(v) for k, v in extra.items()})
    try:
        client.hset(f"rcaweb:watch:{cluster}", mapping=mapping_)
        client.expire(f"rcaweb:watch:{cluster}", 7 * 86400)
    except redis.RedisError as exc:
        logger.warning("watch cursors of %s not saved: %s", cluster, exc)


def load_cursors(cluster: str) -> dict[str, str]:
    """The saved state of ``cluster``'s watch: ``rv:<listing>`` → resourceVersion, plus ``applied_at`` etc."""
    client = redis_client()
    if client is None:
        return {}
    import redis

    try:
        raw = client.hgetall(f"rcaweb:watch:{cluster}")
    except redis.RedisError:
        return {}
    return {k.decode(): v.decode() for k, v in raw.items()}
