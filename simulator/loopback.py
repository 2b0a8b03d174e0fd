"""One threaded HTTP server on loopback: what the simulator's Prometheus and Run:ai servers share."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """Binds ``handler_cls`` (given ``sim=self``) on host:port (0 = a free port); start/stop in a daemon thread."""

    thread_name = "sim-http"

    def _bind(self, handler_cls: type[BaseHTTPRequestHandler], host: str, port: int) -> None:
        handler = type(f"Bound{handler_cls.__name__}", (handler_cls,), {"sim": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        bound, self.port = self.httpd.server_address[:2]
        self.host = bound.decode() if isinstance(bound, bytes | bytearray) else bound  # AF_INET: a str
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, args=(0.05,), name=self.thread_name, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.thread:
            self.thread.join(timeout=5)
