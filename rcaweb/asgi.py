"""The app as the image serves it (``deploy/serve``: gunicorn's asyncio ``asgi`` worker).

A request is read whole on the event loop before it takes one of :data:`THREADS` slots, each a thread with its
own database connection: a client that trickles its headers or its body holds a socket, never a thread, so
slow clients cannot starve the others (``tests/faults/test_slow_clients.py``). The slots keep what the
threaded server had, 4 requests at once per process, and so the database connections bounded; a body over
``DATA_UPLOAD_MAX_MEMORY_SIZE`` is answered 413 before it is read further, as the JSON API would.

``/healthz`` takes no slot: liveness says the process serves, and busy threads are not a dead process.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

THREADS = 4  # per worker process, as gthread's --threads 4 before: 3 processes, 12 database connections
UNBOUNDED = frozenset({"/healthz"})


class ReadWhole:
    """Reads each HTTP request's body before the app runs, then runs at most ``threads`` requests at once."""

    def __init__(self, app: App, threads: int = THREADS) -> None:
        self.app = app
        self.threads = threads
        self._slots: asyncio.Semaphore | None = None  # made on the worker's event loop, at its first request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        body = await self._read_body(receive, send)
        if body is None:  # the client left, or was answered 413
            return
        replay = _Replay(body, receive)
        if scope["path"] in UNBOUNDED:
            return await self.app(scope, replay, send)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.threads)
        async with self._slots:
            await self.app(scope, replay, send)

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


class _Replay:
    """``receive`` for the app: the body read already, then the client's own (its disconnect)."""

    def __init__(self, body: bytes, receive: Receive) -> None:
        self.body: bytes | None = body
        self.receive = receive

    async def __call__(self) -> Message:
        if self.body is None:
            return await self.receive()
        body, self.body = self.body, None
        return {"type": "http.request", "body": body, "more_body": False}


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


application = ReadWhole(get_asgi_application())
