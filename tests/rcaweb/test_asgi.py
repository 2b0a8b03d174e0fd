"""rcaweb.asgi.ReadWhole: requests read whole on the event loop, then served by the WSGI app on a few threads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from django.test import override_settings

from rcaweb.asgi import ReadWhole, environ


def run(coro: Any) -> Any:
    """``asyncio.run`` in a thread of its own: a test run before this one in the same worker (a browser test's
    sync Playwright) may leave an event loop running in this thread, where asyncio.run refuses to start."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the test's thread
            out["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")


def scope(path: str = "/api/v1/changes", **extra: Any) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [],
        "server": ("127.0.0.1", 8000),
        "client": ("10.1.2.3", 50000),
        **extra,
    }


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


class Sent(list):
    async def __call__(self, message: Any) -> None:
        self.append(message)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self if m["type"] == "http.response.body")


def ok_app(seen: list[dict[str, Any]]) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append({**environ, "body": environ["wsgi.input"].read()})
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    return app


def test_it_hands_the_app_the_body_read_whole():
    seen: list[dict[str, Any]] = []
    sent = Sent()
    run(ReadWhole(ok_app(seen))(scope(), receiver(b"ab", b"cd", b"e"), sent))
    assert seen[0]["body"] == b"abcde"
    assert seen[0]["CONTENT_LENGTH"] == "5"
    assert sent[0]["status"] == 200
    assert sent.body == b"ok"


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=4)
def test_it_answers_413_past_the_upload_limit_without_calling_the_app():
    seen: list[dict[str, Any]] = []
    sent = Sent()
    run(ReadWhole(ok_app(seen))(scope(), receiver(b"abc", b"de", b"more"), sent))
    assert not seen
    assert sent[0]["status"] == 413
    assert sent.body == b'{"error": "body larger than 4 bytes"}'


def test_it_never_calls_the_app_for_a_client_that_left():
    seen: list[dict[str, Any]] = []

    async def left() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    run(ReadWhole(ok_app(seen))(scope(), left, Sent()))
    assert not seen


def test_it_serves_at_most_threads_requests_at_once_and_healthz_on_a_thread_of_its_own():
    running: list[str] = []
    most = 0
    lock = threading.Lock()
    release = threading.Event()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        nonlocal most
        with lock:
            running.append(environ["PATH_INFO"])
            most = max(most, len(running))
        if environ["PATH_INFO"] != "/healthz":
            release.wait(10)
        with lock:
            running.remove(environ["PATH_INFO"])
        start_response("200 OK", [])
        return [b""]

    async def main() -> None:
        server = ReadWhole(app, threads=2)
        busy = [asyncio.create_task(server(scope(), receiver(b"{}"), Sent())) for _ in range(5)]
        await asyncio.sleep(0.2)
        assert len(running) == 2  # three wait, read whole, for a thread
        probe = Sent()
        await asyncio.wait_for(server(scope("/healthz", method="GET"), receiver(b""), probe), 2)
        assert probe[0]["status"] == 200
        release.set()
        await asyncio.gather(*busy)

    run(main())
    assert most == 3  # two requests and the probe
    assert not running


def test_it_streams_an_answer_in_pieces():
    class Streamed:
        streaming = True

        def __iter__(self) -> Any:
            return iter([b"x" * 40_000] * 5)

    def app(environ: dict[str, Any], start_response: Any) -> Streamed:
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return Streamed()

    sent = Sent()
    run(ReadWhole(app)(scope(method="GET"), receiver(b""), sent))
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert sent[0]["type"] == "http.response.start"
    assert len(bodies) == 3  # 80 KB, 80 KB, then the last 40 KB
    assert sent.body == b"x" * 200_000
    assert bodies[-1]["more_body"] is False


def test_its_environ_is_gunicorns():
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"999"),
        (b"x-forwarded-for", b"a"),
        (b"x_forwarded_for", b"smuggled"),
        (b"accept", b"text/html"),
        (b"accept", b"*/*"),
    ]
    env = environ(
        scope("/c/a%FFb/nodes/", raw_path=b"/c/a%FFb/nodes/", query_string=b"t=1&w=2h", headers=headers),
        b"{}",
    )
    assert env["PATH_INFO"] == "/c/a\xffb/nodes/"  # bytes as latin-1, as WSGI wants them
    assert env["QUERY_STRING"] == "t=1&w=2h"
    assert env["REMOTE_ADDR"] == "10.1.2.3"
    assert env["CONTENT_TYPE"] == "application/json"
    assert env["CONTENT_LENGTH"] == "2"  # what was read
    assert env["HTTP_X_FORWARDED_FOR"] == "a"
    assert env["HTTP_ACCEPT"] == "text/html,*/*"
