"""A small HTTP server for fault injection: answers chosen paths with 500, 401, a hang past the client timeout,
or malformed JSON, and proxies everything else to an upstream (the simulator) unchanged."""

from __future__ import annotations

import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = ("500", "401", "hang", "garbage", "refused")


class FaultServer:
    def __init__(
        self,
        upstream: str = "",
        faults: dict[str, str] | None = None,
        hang_s: float = 3.0,
        bodies: dict[str, bytes] | None = None,
        upstream_ca: str | None = None,
    ) -> None:
        """``upstream_ca``: the CA file an https upstream's certificate is checked against (the simulator's).
        ``faults``: path substring → fault ("500" | "401" | "403" | "hang" | "garbage"); first match wins.
        ``bodies``: path substring → a recorded JSON answer served as is."""
        self.bodies = dict(bodies or {})
        self.upstream = upstream.rstrip("/")
        self.faults = dict(faults or {})
        self.hang_s = hang_s
        self.upstream_context = ssl.create_default_context(cafile=upstream_ca) if upstream_ca else None
        self.methods: list[str] = []
        self.paths: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                server.methods.append(self.command)
                server.paths.append(self.path)
                fault = next((f for sub, f in server.faults.items() if sub in self.path), None)
                body = next((b for sub, b in server.bodies.items() if sub in self.path), None)
                if fault is None and body is not None:
                    self._send(200, body)
                elif fault == "expired-watch":  # what the API server streams for a too old resourceVersion
                    self._send(
                        200,
                        b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
                        b'"message":"too old resource version: 1 (5000)","reason":"Expired","code":410}}\n',
                    )
                elif fault in ("500", "401", "403", "410"):
                    body = (
                        b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","code":%s}'
                        % fault.encode()
                    )
                    self._send(int(fault), body)
                elif fault == "hang":
                    time.sleep(server.hang_s)
                    self._send(200, b'{"items": []}')
                elif fault == "garbage":
                    self._send(200, b"<html>this is not json</html>", "text/html")
                elif server.upstream:
                    self._proxy()
                else:
                    self._send(404, b'{"message":"no upstream"}')

            def _proxy(self) -> None:
                req = urllib.request.Request(
                    server.upstream + self.path,
                    method=self.command,
                    headers={k: v for k, v in self.headers.items() if k.lower() != "host"},
                )
                try:
                    with urllib.request.urlopen(req, timeout=30, context=server.upstream_context) as resp:
                        self._send(
                            resp.status, resp.read(), resp.headers.get("Content-Type", "application/json")
                        )
                except urllib.error.HTTPError as exc:
                    self._send(exc.code, exc.read(), exc.headers.get("Content-Type", "application/json"))

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def fault_server(
    upstream: str = "",
    faults: dict[str, str] | None = None,
    hang_s: float = 3.0,
    bodies: dict[str, bytes] | None = None,
    upstream_ca: str | None = None,
) -> Iterator[FaultServer]:
    srv = FaultServer(upstream, faults, hang_s, bodies, upstream_ca).start()
    try:
        yield srv
    finally:
        srv.stop()


def refused_url() -> str:
    """A loopback URL nothing listens on."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def kubeconfig_for(url: str, path: str, token: str = "sim-kube-token", ca_file: str | None = None) -> str:
    """A kubeconfig pointing the kubernetes client at ``url`` (the fault server in front of the simulator, or
    the simulator itself: then ``ca_file`` is its CA)."""
    import yaml

    cluster: dict[str, str] = {"server": url}
    if ca_file:
        cluster["certificate-authority"] = ca_file
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "t",
        "clusters": [{"name": "t", "cluster": cluster}],
        "users": [{"name": "t", "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
    }
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    return path
