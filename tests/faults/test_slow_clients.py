"""Slow clients against the image's web server.

Injects: ``deploy/serve``, the command the image runs (Dockerfile, docker-compose.yml), on a loopback port
against the test database; 200 clients open connections and trickle them a byte a second: half send their
request headers and never end them, half send whole headers of a webhook post (a 64 KiB body announced) and
trickle the body.
Must hold: every ``/healthz`` probe made meanwhile answers 200 within a second, the webhook still stores a
notification posted whole, and the whole test takes well under a minute. (The image's former command, gunicorn
``gthread`` with 3 × 4 threads, gave each trickler a thread until it finished: 12 of them starved every probe.)
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.utils import timezone

from incidents.models import Alert
from tests.faults.services import BIN, ROOT, Proc, app_env, database_url, free_port, wait_until
from tests.incidents.fixtures.alertmanager import alert, payload

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        os.environ.get("RCAWEB_SERVICES_TESTS") != "1",
        reason="real PostgreSQL/Redis/Celery tests run in CI's second pass (.ci/run)",
    ),
]

TRICKLERS = 200
PROBES = 20
PROBE_TIMEOUT_S = 1.0
WEBHOOK = "/api/v1/alerts/alertmanager"


def start_serve(env: dict[str, str], log_dir: Path) -> tuple[Proc, str]:
    """``deploy/serve`` on a free loopback port (its gunicorn from this venv); ready when /healthz answers."""
    port = free_port()
    env = {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}
    # --no-control-socket: gunicorn's control socket has one path per user, and test servers must not share it
    web = Proc(
        "serve", [str(ROOT / "deploy" / "serve"), f"127.0.0.1:{port}", "--no-control-socket"], env, log_dir
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if not web.alive():
            raise AssertionError(f"deploy/serve exited:\n{web.output()[-3000:]}")
        with contextlib.suppress(requests.RequestException):
            return requests.get(base + "/healthz", timeout=1).status_code == 200
        return False

    try:
        wait_until(ready, 40, "deploy/serve to answer /healthz")
    except AssertionError:
        web.kill()
        raise
    return web, base


class Tricklers:
    """``count`` connections, each sent one more byte every second from one thread, until :meth:`stop`."""

    def __init__(self, port: int, count: int) -> None:
        self.socks: list[socket.socket] = []
        self.dropped = 0
        self._stop = threading.Event()
        token = settings.WEBHOOK_TOKENS[0]
        for i in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if i % 2:  # headers that never end
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            else:  # whole headers, then a body that never ends
                s.sendall(
                    f"POST {WEBHOOK} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: 65536\r\n\r\n[".encode()
                )
            s.setblocking(False)
            self.socks.append(s)
        self._thread = threading.Thread(target=self._trickle, daemon=True)
        self._thread.start()

    def _trickle(self) -> None:
        while not self._stop.wait(1.0):
            for s in self.socks:
                if s.fileno() < 0:
                    continue
                try:
                    s.send(b" ")
                except OSError:  # the server closed it: it holds nothing of ours any more
                    self.dropped += 1
                    s.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for s in self.socks:
            s.close()


def test_it_answers_healthz_within_a_second_while_200_clients_trickle_headers_and_bodies(
    redis_server, procs, tmp_path
):
    started = time.monotonic()
    web, base = start_serve(app_env(database=database_url(), redis=redis_server.url), tmp_path)
    procs.add(web)
    port = int(base.rsplit(":", 1)[1])

    tricklers = Tricklers(port, TRICKLERS)
    try:
        time.sleep(3)  # every trickler has sent its first bytes and more: a threaded server is full by now
        slow = []
        for _ in range(PROBES):
            sent = time.monotonic()
            try:
                r = requests.get(base + "/healthz", timeout=PROBE_TIMEOUT_S)
                answer = f"{r.status_code} in {time.monotonic() - sent:.2f} s"
                if r.status_code != 200 or time.monotonic() - sent > PROBE_TIMEOUT_S:
                    slow.append(answer)
            except requests.RequestException as exc:
                slow.append(f"no answer in {PROBE_TIMEOUT_S:g} s: {exc.__class__.__name__}")
            time.sleep(0.5)
        assert not slow, f"{len(slow)} of {PROBES} /healthz probes failed: {slow}"

        # the app behind the worker's threads still serves, too: a whole notification is stored
        t0 = timezone.now().replace(microsecond=0) - timedelta(minutes=10)
        body = payload([alert("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet"}, t0)])
        auth = {"Authorization": f"Bearer {settings.WEBHOOK_TOKENS[0]}"}
        r = requests.post(base + WEBHOOK, json=body, headers=auth, timeout=10)
        assert r.status_code == 200, r.text
        assert Alert.objects.count() == 1
        # the tricklers were held, not dropped (dropping them would also have answered the probes)
        assert tricklers.dropped < TRICKLERS // 10, f"{tricklers.dropped} tricklers dropped"
    finally:
        tricklers.stop()
    assert time.monotonic() - started < 60
