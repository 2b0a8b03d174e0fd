"""The lease that lets one worker, and one only, watch a cluster."""

from __future__ import annotations

import logging
import threading
from typing import Any

from collectors.sweep.redis_client import redis_client

logger = logging.getLogger(__name__)


class Lease:
    """The right to watch one cluster: a Redis lock with a TTL (process-local without Redis).

    While held, a heartbeat thread renews it every third of its TTL, so a long relist keeps it; a worker
    that dies stops renewing and the lease expires. ``renew`` returns False once the lease was lost (it
    expired and another worker took it): the holder must stop."""

    def __init__(self, cluster: str, ttl_s: float) -> None:
        self.key = f"rcaweb:watch-lease:{cluster}"
        self.ttl_s = float(ttl_s)
        self._lock: Any = None
        self._local: threading.Lock | None = None
        self._beat: threading.Thread | None = None
        self._quiet = threading.Event()
        self.held = False

    def acquire(self) -> bool:
        client = redis_client()
        if client is not None:
            import redis

            try:
                # thread_local=False: the heartbeat thread renews with the token the acquiring thread got
                self._lock = client.lock(self.key, timeout=self.ttl_s, blocking=False, thread_local=False)
                self.held = bool(self._lock.acquire(blocking=False))
                if self.held:
                    self._quiet = threading.Event()
                    self._beat = threading.Thread(
                        target=self._heartbeat, name=f"lease-{self.key}", daemon=True
                    )
                    self._beat.start()
                return self.held
            except redis.RedisError as exc:
                logger.warning("redis lease unavailable (%s); using a process-local lease", exc)
                self._lock = None
        with _local_guard:
            self._local = _local_leases.setdefault(self.key, threading.Lock())
        self.held = self._local.acquire(blocking=False)
        return self.held

    def renew(self) -> bool:
        if not self.held:
            return False
        if self._lock is None:
            return True
        import redis

        try:
            self._lock.reacquire()  # raises LockNotOwnedError when the lease expired and someone took it
        except redis.exceptions.LockError:
            logger.warning("watch lease %s was lost", self.key)
            self.held = False
        except redis.RedisError as exc:
            logger.warning("watch lease %s not renewed: %s", self.key, exc)
        return self.held

    def _heartbeat(self) -> None:
        while not self._quiet.wait(self.ttl_s / 3) and self.held:
            self.renew()

    def stop_renewing(self) -> None:
        """No more heartbeats (``release`` does it; a test plays a dead worker with it)."""
        self._quiet.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=5)
        self._beat = None

    def release(self) -> None:
        self.stop_renewing()
        if not self.held:
            return
        self.held = False
        if self._lock is not None:
            import redis

            try:
                self._lock.release()
            except redis.RedisError:
                logger.warning("watch lease %s expired before release", self.key)
        elif self._local is not None:
            self._local.release()


_local_leases: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()
