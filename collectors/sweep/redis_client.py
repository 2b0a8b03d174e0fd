"""The Redis client of the watch's lease and cursors (None without ``REDIS_URL``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings


def redis_client() -> Any:
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    import redis

    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
