"""A read-only Kubernetes API server over the simulated world (core/v1, batch/v1, KAI, Kueue).

The official ``kubernetes`` client, pointed at the kubeconfig SimServer
writes, works unmodified against it: lists with pagination and selectors,
gets, watches with resourceVersion and 410 Gone, pod logs. See ../API.md.
"""

from __future__ import annotations

import logging
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from collectors.sim.apiserver.handler import KubeHandler
from collectors.sim.apiserver.store import Store

__all__ = ["KubeAPIServer", "Store"]

logger = logging.getLogger(__name__)


class KubeAPIServer:
    """Serves ``store`` on host:port in a daemon thread. ``lock`` guards direct world reads (logs)."""

    def __init__(
        self,
        world: Any,
        store: Store,
        lock: threading.RLock,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.world = world
        self.store = store
        self.lock = lock
        self.token = token
        handler = type("BoundKubeHandler", (KubeHandler,), {"sim": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self.thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, args=(0.05,), name="sim-kube-apiserver", daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.store.close()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.thread:
            self.thread.join(timeout=5)
