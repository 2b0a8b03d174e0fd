"""The per-cluster lock: two sweeps of one kind never run on one cluster at once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

logger = logging.getLogger(__name__)

_local_locks: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


@contextmanager
def cluster_lock(cluster: str, kind: str, ttl_s: int = 600) -> Iterator[bool]:
    """Yield True if this process may sweep ``cluster`` (``kind``) now; False when another sweep holds it.

    With REDIS_URL the lock is a Redis lock (workers on many machines); without, a process-local lock
    (the demo and tests run everything in one process). ``ttl_s`` frees a lock whose holder died.
    """
    key = f"rcaweb:sweep:{kind}:{cluster}"
    redis_url = getattr(settings, "REDIS_URL", "")
    if redis_url:
        import redis  # imported here: not needed without Redis

        try:
            client = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=2)
            lock = client.lock(key, timeout=ttl_s, blocking=False)
            got = bool(lock.acquire(blocking=False))
        except redis.RedisError as exc:
            logger.warning("redis lock unavailable (%s); using a process-local lock", exc)
        else:
            try:
                yield got
            finally:
                if got:
                    try:
                        lock.release()
                    except redis.RedisError:
                        logger.warning("sweep lock %s expired before release", key)
            return
    with _local_guard:
        local = _local_locks.setdefault(key, threading.Lock())
    got = local.acquire(blocking=False)
    try:
        yield got
    finally:
        if got:
            local.release()
