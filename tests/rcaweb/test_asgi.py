"""rcaweb.asgi.ReadWhole: requests read whole before they take a thread, at most THREADS at once."""

from __future__ import annotations

import asyncio
from typing import Any

from django.test import override_settings

from rcaweb.asgi import ReadWhole


def scope(path: str = "/api/v1/changes") -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "headers": []}


def receiver(*chunks: bytes) -> Any:
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # the client stays until the test ends
        return {"type": "http.disconnect"}

    return receive


async def ignore(message: Any) -> None:
    pass


def test_it_hands_the_app_the_body_read_whole():
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(await receive())

    asyncio.run(ReadWhole(app)(scope(), receiver(b"ab", b"cd", b"e"), ignore))
    assert seen == [{"type": "http.request", "body": b"abcde", "more_body": False}]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=4)
def test_it_answers_413_past_the_upload_limit_without_calling_the_app():
    sent: list[Any] = []
    called: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(True)

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(ReadWhole(app)(scope(), receiver(b"abc", b"de", b"more"), send))
    assert not called
    assert sent[0]["status"] == 413
    assert sent[1]["body"] == b'{"error": "body larger than 4 bytes"}'


def test_it_never_calls_the_app_for_a_client_that_left():
    called: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(True)

    async def left() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    asyncio.run(ReadWhole(app)(scope(), left, ignore))
    assert not called


def test_it_runs_at_most_threads_requests_at_once_and_healthz_past_them():
    running: list[str] = []
    most = 0
    release = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal most
        running.append(scope["path"])
        most = max(most, len(running))
        if scope["path"] != "/healthz":
            await release.wait()
        running.remove(scope["path"])

    async def main() -> None:
        server = ReadWhole(app, threads=2)
        busy = [asyncio.create_task(server(scope(), receiver(b"{}"), ignore)) for _ in range(5)]
        await asyncio.sleep(0.01)
        assert len(running) == 2  # three wait, read whole, for a slot
        await asyncio.wait_for(server(scope("/healthz"), receiver(b""), ignore), 1)
        release.set()
        await asyncio.gather(*busy)

    asyncio.run(main())
    assert most == 3  # two requests and the probe
    assert not running
