"""Real processes the fault tests start, break and restart: a private Redis, a TCP proxy in front of
PostgreSQL, gunicorn and Celery workers running rcaweb against the test database.

Everything here is private to one test: the machine's shared PostgreSQL and Redis are never stopped (other
tests and helpers use them). Subprocesses run in their own process group so a SIGKILL takes the whole
worker (main process and pool children) down at once, as an OOM kill or a lost node would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
        return True
    return False


class RedisServer:
    """A private ``redis-server`` on a free loopback port, no persistence: stop() is a real outage."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = workdir  # its own --dir: never loads a dump.rdb someone left in the working directory
        self.log = workdir / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        argv = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        argv += ["--dir", str(self.dir), "--logfile", str(self.log)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(
            lambda: port_open(self.port) or self.proc.poll() is not None, 10, f"redis on port {self.port}"
        )
        if self.proc.poll() is not None:  # e.g. the port was taken meanwhile: then that is not our Redis
            raise AssertionError(f"redis-server exited:\n{self.log.read_text(errors='replace')[-2000:]}")
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None
        if port_open(self.port):
            raise AssertionError(f"port {self.port} still answers after our redis-server was killed")


def database_url(*, via_port: int | None = None) -> str:
    """The test database (``test_…``) as a URL for subprocesses, so they see what the test writes;
    ``via_port``: through a loopback proxy on that port instead."""
    s = connection.settings_dict
    auth = quote(s["USER"]) + (f":{quote(s['PASSWORD'])}" if s["PASSWORD"] else "")
    where = f"127.0.0.1:{via_port}" if via_port else f"{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}"
    return f"postgres://{auth}@{where}/{quote(s['NAME'])}"


def app_env(*, database: str, redis: str = "", **extra: str) -> dict[str, str]:
    """Production-like settings for a subprocess: not under pytest, so tasks go to the broker (not eager)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RCAWEB_", "PYTEST_", "DJANGO_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="rcaweb.settings",
        DATABASE_URL=database,
        REDIS_URL=redis,
        RCAWEB_DEBUG="false",
        RCAWEB_SECRET_KEY=settings.SECRET_KEY,  # sessions signed by the test process stay valid
        RCAWEB_WEBHOOK_TOKEN=settings.WEBHOOK_TOKENS[0],
        RCAWEB_PLAIN_STATIC="true",
        RCAWEB_SECURE_COOKIES="false",
        RCAWEB_CELERY_EAGER="false",
        RCAWEB_LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class Proc:
    """A subprocess in its own process group, its output in a log file shown when a test fails."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._fh = self.log.open("ab")
        self.proc = subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole group: no graceful shutdown, no ack, no requeue by the dying process."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._fh.close()

    def stop(self) -> None:
        """SIGTERM to the main process (warm shutdown: running tasks finish), SIGKILL if it lingers."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(8)
        self.kill()


def start_worker(name: str, env: dict[str, str], log_dir: Path, *, concurrency: int = 1) -> Proc:
    """``celery -A rcaweb worker`` as in production (prefork pool), ready when it logs "ready"."""
    worker = Proc(
        name,
        [
            str(BIN / "celery"),
            "-A",
            "rcaweb",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            str(concurrency),
            "--hostname",
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        env,
        log_dir,
    )
    try:
        wait_until(lambda: " ready." in worker.output() or not worker.alive(), 30, f"{name} to be ready")
    except AssertionError:
        worker.kill()
        raise AssertionError(f"{name} did not start:\n{worker.output()[-3000:]}")
    if not worker.alive():
        raise AssertionError(f"{name} exited:\n{worker.output()[-3000:]}")
    return worker


def _no_control_socket() -> list[str]:
    """gunicorn >= 27 opens a control socket at one fixed path per user; parallel test servers must not share it."""
    import gunicorn

    return ["--no-control-socket"] if int(gunicorn.__version__.split(".")[0]) >= 27 else []


def start_gunicorn(
    env: dict[str, str], log_dir: Path, *, workers: int = 2, threads: int = 4
) -> tuple[Proc, str]:
    """rcaweb under gunicorn (gthread) on a free loopback port; returns the process and its base URL."""
    port = free_port()
    web = Proc(
        "gunicorn",
        [
            str(BIN / "gunicorn"),
            "rcaweb.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--timeout",
            "30",
            *_no_control_socket(),
        ],
        env,
        log_dir,
    )
    try:
        listening = f"Listening at: http://127.0.0.1:{port} "
        wait_until(lambda: listening in web.output() or not web.alive(), 30, "gunicorn to listen")
    except AssertionError:
        web.kill()
        raise
    if not web.alive():
        raise AssertionError(f"gunicorn exited:\n{web.output()[-3000:]}")
    return web, f"http://127.0.0.1:{port}"


class TcpProxy:
    """A loopback TCP proxy to PostgreSQL that the test can cut and restore.

    ``cut()`` is what a PostgreSQL restart looks like from the application: every open connection is
    reset and new connections are refused (the listening socket is closed). ``restore()`` listens on the
    same port again. Chosen over a private ``initdb`` cluster because it needs no second server (no
    schema to migrate into it, no seconds of startup per restart), switches in milliseconds, and never
    touches the shared server other tests use.
    """

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.accepted = 0

    def restore(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._thread.start()
        return self

    start = restore

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()  # new connections: refused
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:  # open connections: reset
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                s.close()
        if self._thread is not None:
            self._thread.join(2)

    stop = cut

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # cut while connecting
                    client.close()
                    server.close()
                    return
                self._conns += [client, server]
                self.accepted += 1
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while True:
                readable, _, _ = select.select([a, b], [], [], 1.0)
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        raise OSError("closed")
                    peers[s].sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()
            with self._lock:
                self._conns = [s for s in self._conns if s not in (a, b)]


@contextlib.contextmanager
def running(*procs: Proc) -> Iterator[None]:
    """Stop the processes on the way out, whatever happened (their connections must not outlive the test)."""
    try:
        yield
    finally:
        for p in procs:
            p.kill()


def send_task(broker_url: str, name: str, *args: object) -> None:
    """Publish a task to ``broker_url`` as beat or the web app would (a client app: the test's own is eager)."""
    from celery import Celery

    client = Celery("faults-client", broker=broker_url)
    try:
        client.send_task(name, args=list(args))
    finally:
        client.close()


def broker_idle(broker_url: str) -> bool:
    """Nothing queued and nothing delivered-but-unacked on ``broker_url`` (Celery's default queue)."""
    import redis

    client = redis.Redis.from_url(broker_url, socket_timeout=2)
    try:
        return client.llen("celery") == 0 and client.hlen("unacked") == 0
    finally:
        client.close()
