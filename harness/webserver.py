"""This Django app served from a thread of the current process (threaded WSGI server, as ``runserver`` uses).

The simulation harness (``harness.driver``) serves the app this way for ``manage.py demo`` (the console and the
webhook on ``--serve``) and ``manage.py run_scenario`` (the webhook the simulator's Alertmanager posts to, on a
free loopback port); ``bench/intake.py`` measures the webhook through it. Production serves with gunicorn.

Each request runs in a thread of its own with its own database connections, closed after the request (Django's
``ThreadedWSGIServer``): the database must be one that other threads can open (a file or a server, not an
in-memory SQLite database).

:class:`AlertPoster` posts the simulator's Alertmanager notifications to the webhook from a queue of its own,
held until the demo's console is up.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler, get_internal_wsgi_application

logger = logging.getLogger(__name__)


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


class AlertPoster:
    """The simulator's Alertmanager notifications, posted to the intake from a queue in a thread.

    Posting inline would stall the demo's fast-forward for as long as the intake takes to process a
    notification (evidence and diagnosis run inline without a Celery worker, and share SQLite's single writer
    with the sweeps). So notifications sent while fast-forwarding wait in the queue and are posted, in order,
    once :meth:`resume` is called (like an Alertmanager backlog); then the incidents appear as the intake gets
    through them. Same HTTP request, same bearer token as a real Alertmanager.
    """

    def __init__(self, url: str, token: str, stop: threading.Event, timeout_s: float = 300.0) -> None:
        import requests

        self.url = url
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.timeout_s = timeout_s
        self.stop = stop
        self.posted = 0
        self.failed = 0
        self.go = threading.Event()  # set by resume(): until then notifications wait in the queue
        threading.Thread(target=self._run, name="harness-alerts", daemon=True).start()

    def resume(self) -> None:
        self.go.set()

    def __call__(self, payload: dict[str, Any]) -> None:
        self.queue.put(payload)

    def _run(self) -> None:
        import requests

        while not self.go.wait(0.5):
            if self.stop.is_set():
                return
        while not self.stop.is_set():
            try:
                payload = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                resp = self.session.post(self.url, json=payload, timeout=self.timeout_s)
                if resp.status_code >= 300:
                    self.failed += 1
                    logger.warning("alert intake answered %s: %s", resp.status_code, resp.text[:200])
                else:
                    self.posted += 1
            except requests.RequestException as exc:
                self.failed += 1
                logger.warning("alert intake unreachable: %s", exc)
