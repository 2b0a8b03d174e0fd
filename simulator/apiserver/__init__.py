"""A read-only Kubernetes API server over the simulated world (core/v1, batch/v1, coordination/v1, KAI, Kueue).

Served over HTTPS (``tls``: a CA of its own, see tls.py). The official ``kubernetes`` client and kubectl,
pointed at the kubeconfig SimServer writes, work unmodified against it: lists with pagination and
selectors, server-side Table output, gets, watches with resourceVersion and 410 Gone, pod logs; every
write is 403 Forbidden. See ../API.md.
"""

from __future__ import annotations

import logging
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from simulator.apiserver.handler import KubeHandler
from simulator.apiserver.store import Store
from simulator.apiserver.tls import ServerTLS

__all__ = ["KubeAPIServer", "Store"]

logger = logging.getLogger(__name__)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A failed TLS handshake (a plain-HTTP client, one that does not trust the CA) or a dropped
        # connection: the client sees its own error; no traceback on the server's stderr.
        logger.debug("kube connection from %s failed", client_address, exc_info=True)


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
        tls: ServerTLS | None = None,
    ) -> None:
        self.world = world
        self.store = store
        self.lock = lock
        self.token = token
        handler = type("BoundKubeHandler", (KubeHandler,), {"sim": self})
        self.httpd = _Server((host, port), handler)
        self.httpd.daemon_threads = True
        self.tls = tls
        if tls is not None:
            # The handshake happens on the handler's first read, in its own thread: a slow or plain-HTTP
            # client never blocks the accept loop.
            self.httpd.socket = tls.server_context().wrap_socket(
                self.httpd.socket, server_side=True, do_handshake_on_connect=False
            )
        bound, self.port = self.httpd.server_address[:2]
        self.host = bound.decode() if isinstance(bound, bytes | bytearray) else bound  # AF_INET: a str
        self.thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

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
