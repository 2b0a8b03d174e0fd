"""The app as the image serves it (``deploy/serve``: gunicorn's asyncio ``asgi`` worker).

A request is read whole on the event loop; only then does Django's WSGI handler serve it, on one of
:data:`THREADS` threads of the process. A client that trickles its headers or its body holds a socket, never a
thread, so slow clients cannot starve the others (``tests/faults/test_slow_clients.py``).

Django's own ASGI handler reads a request whole as well, but it runs every request at once, each in a new thread
with a new database connection: the connections are unbounded, and opening one per request (with its prepared
statements) tripled the webhook's CPU per alert (``bench/intake.py --worker-class asgi``). Here the threads
last, as gthread's did, and so do their connections (``CONN_MAX_AGE``): 3 processes × 4 threads, 12 at most.

A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is answered 413 before more of it is read, as the JSON API would.
``/healthz`` has a thread of its own: liveness says the process serves, and busy threads are not a dead process.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")

logger = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

THREADS = 4  # per worker process, as gthread's --threads 4 before: 3 processes, 12 database connections
OWN_THREAD = frozenset({"/healthz"})
STREAM_PIECE = 64 * 1024


class ReadWhole:
    """An ASGI app: each HTTP request read whole, then served by the WSGI ``app`` on one of ``threads`` threads."""

    def __init__(self, app: WsgiApp, threads: int = THREADS) -> None:
        self.app = app
        self.threads = ThreadPoolExecutor(threads, thread_name_prefix="web")
        self.own_thread = ThreadPoolExecutor(1, thread_name_prefix="web-probe")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan (deploy/serve turns it off) and websockets: none here
            return
        body = await self._read_body(receive, send)
        if body is None:  # the client left, or was answered 413
            return
        loop = asyncio.get_running_loop()
        threads = self.own_thread if scope["path"] in OWN_THREAD else self.threads
        await loop.run_in_executor(threads, self._serve, environ(scope, body), send, loop)

    async def _read_body(self, receive: Receive, send: Send) -> bytes | None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if limit is not None and size > limit:
                await _too_large(send, limit)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _serve(self, environ: dict[str, Any], send: Send, loop: asyncio.AbstractEventLoop) -> None:
        """In a thread: the WSGI app's answer, sent on the event loop (a streamed one chunk by chunk)."""
        start: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if exc_info is not None and start.get("sent"):
                raise exc_info[1].with_traceback(exc_info[2])
            start["message"] = {
                "type": "http.response.start",
                "status": int(status.split(" ", 1)[0]),
                "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
            }
            return _no_write

        def push(*messages: Message) -> None:
            asyncio.run_coroutine_threadsafe(_send_all(send, messages), loop).result()

        result = self.app(environ, start_response)
        try:
            if not getattr(result, "streaming", False):  # one answer, one hop to the loop
                body = b"".join(result)
                push(start["message"], {"type": "http.response.body", "body": body})
                return
            pending: list[bytes] = []  # a streamed answer goes in pieces of 64 KiB (a file comes in 4 KiB)
            for chunk in result:
                pending.append(chunk)
                if sum(map(len, pending)) >= STREAM_PIECE:
                    push(*_pieces(start, pending, more=True))
                    pending = []
            push(*_pieces(start, pending, more=False))
        except ClientGone as exc:
            logger.debug("client gone while answered: %s", exc)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()  # request_finished: Django closes what it must of the thread's connection


class ClientGone(Exception):
    """The server could not send (the client went away); the rest of the answer is dropped."""


def _pieces(start: dict[str, Any], chunks: list[bytes], *, more: bool) -> list[Message]:
    messages: list[Message] = []
    if not start.get("sent"):
        start["sent"] = True
        messages.append(start["message"])
    messages.append({"type": "http.response.body", "body": b"".join(chunks), "more_body": more})
    return messages


def environ(scope: Scope, body: bytes) -> dict[str, Any]:
    """The WSGI environ of an ASGI request, as gunicorn's WSGI worker builds it."""
    raw = scope.get(
        "raw_path"
    )  # as sent: a path that is not UTF-8 reaches Django as gunicorn's WSGI gives it
    path = (unquote_to_bytes(raw.split(b"?", 1)[0]) if raw else scope["path"].encode()).decode("latin-1")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    server = scope.get("server") or ("localhost", 80)
    env: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": root,
        "PATH_INFO": path,
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] or 80),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "CONTENT_LENGTH": str(len(body)),  # what was read, chunked or not
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if scope.get("client"):
        env["REMOTE_ADDR"], env["REMOTE_PORT"] = str(scope["client"][0]), str(scope["client"][1])
    for name, value in scope.get("headers", []):
        key = name.decode("latin-1").upper()
        if (
            "_" in key
        ):  # X_Forwarded_For would pass for X-Forwarded-For: dropped, as gunicorn's WSGI worker does
            continue
        key = key.replace("-", "_")
        if key == "CONTENT_LENGTH":
            continue
        if key != "CONTENT_TYPE":
            key = "HTTP_" + key
        text = value.decode("latin-1")
        env[key] = f"{env[key]},{text}" if key in env else text
    return env


async def _send_all(send: Send, messages: Iterable[Message]) -> None:
    try:
        for message in messages:
            await send(message)
    except (OSError, RuntimeError) as exc:  # gunicorn's send on a closed connection
        raise ClientGone(str(exc)) from exc


def _no_write(data: bytes) -> None:
    raise NotImplementedError("rcaweb.asgi: the WSGI write() callable is not supported")


async def _too_large(send: Send, limit: int) -> None:
    body = json.dumps({"error": f"body larger than {limit} bytes"}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
        (b"connection", b"close"),  # the rest of the body is never read
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


application = ReadWhole(get_wsgi_application())
