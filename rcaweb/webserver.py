"""This Django app served from a thread of the current process (threaded WSGI server, as ``runserver`` uses).

The simulation harness (``rcaweb.harness``) serves the app this way for ``manage.py demo`` (the console and the
webhook on ``--serve``) and ``manage.py run_scenario`` (the webhook the simulator's Alertmanager posts to, on a
free loopback port); ``bench/intake.py`` measures the webhook through it. Production serves with gunicorn.

Each request runs in a thread of its own with its own database connections, closed after the request (Django's
``ThreadedWSGIServer``): the database must be one that other threads can open (a file or a server, not an
in-memory SQLite database).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler, get_internal_wsgi_application


class _Handler(WSGIRequestHandler):
    # TCP_NODELAY: wsgiref writes the headers and the body in two sends; with Nagle the body waits for the
    # client's delayed ACK of the headers (40 ms on Linux), which was most of every webhook answer.
    disable_nagle_algorithm = True


class _QuietHandler(_Handler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class' name)
        pass


class WebServer:
    """The app on ``address`` (``HOST:PORT``; port 0: a free one), served from a daemon thread once started.

    ``quiet``: no access log lines. ``serialize``: one request at a time, under :attr:`busy`, which others may
    take to keep requests out while they write (the harness, before sweeping: SQLite has one writer).
    """

    def __init__(self, address: str, *, quiet: bool = False, serialize: bool = False) -> None:
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"--serve {address!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")
        self.busy: threading.Lock | None = threading.Lock() if serialize else None
        handler = _QuietHandler if quiet else _Handler
        self.httpd = ThreadedWSGIServer((host or "127.0.0.1", int(port)), handler, allow_reuse_address=True)
        self.httpd.daemon_threads = True
        app = get_internal_wsgi_application()
        self.httpd.set_app(self._serialized(app) if self.busy is not None else app)
        self.thread: threading.Thread | None = None

    def _serialized(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., list[bytes]]:
        busy = self.busy
        assert busy is not None

        def handle(environ: dict[str, Any], start_response: Any) -> list[bytes]:
            with busy:
                return list(app(environ, start_response))

        return handle

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        """Where a client on this machine reaches it (a wildcard address is reached on loopback)."""
        host = str(self.httpd.server_address[0])
        host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        return f"http://{host}:{self.port}"

    def start(self) -> WebServer:
        if self.thread is None:
            self.thread = threading.Thread(target=self.httpd.serve_forever, name="rcaweb-web", daemon=True)
            self.thread.start()
        return self

    def stop(self) -> None:
        if self.thread is not None:
            self.httpd.shutdown()
            self.thread.join()
            self.thread = None
        self.httpd.server_close()

    def __enter__(self) -> WebServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
