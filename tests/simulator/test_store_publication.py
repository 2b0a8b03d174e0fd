"""The API store is published when read (every tick only while a watch is open): what a reader gets at any
moment is what a store synced at every tick serves, resourceVersions aside."""

from __future__ import annotations

import json
import threading
import urllib.request
from datetime import timedelta
from typing import Any

from simulator.server import SimServer
from tests.collectors.simhelpers import served, small_world

PATHS = (
    "/api/v1/pods",
    "/api/v1/nodes",
    "/api/v1/events",
    "/apis/batch/v1/jobs",
    "/apis/scheduling.run.ai/v2/queues",
    "/apis/scheduling.run.ai/v2alpha2/podgroups",
)


def _get(sim: SimServer, path: str) -> dict[str, Any]:
    req = urllib.request.Request(
        f"{sim.kube_url}{path}", headers={"Authorization": f"Bearer {sim.kube_token}"}
    )
    with urllib.request.urlopen(req, context=sim.kube_tls.client_context()) as resp:
        return json.loads(resp.read())


def _without_versions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_versions(v) for k, v in value.items() if k != "resourceVersion"}
    if isinstance(value, list):
        return [_without_versions(v) for v in value]
    return value


def _counting_syncs(sim: SimServer) -> list[int]:
    calls: list[int] = []
    sync = sim.store.sync

    def counted(world: Any, **kwargs: Any) -> int:
        calls.append(1)
        return sync(world, **kwargs)

    sim.store.sync = counted  # type: ignore[method-assign]
    return calls


def test_a_store_read_after_unread_ticks_serves_what_one_synced_every_tick_serves() -> None:
    every, lazily = small_world("kai"), small_world("kai")
    with served(every) as read_every_tick, served(lazily) as read_at_the_end:
        syncs = _counting_syncs(read_at_the_end)
        for minute in range(1, 91):  # jobs submitted, placed, crash-looping, finished; a quota cut
            t = every.start + timedelta(minutes=minute)
            read_every_tick.advance_to(t)
            read_at_the_end.advance_to(t)
            for path in PATHS:
                _get(read_every_tick, path)
        assert syncs == []  # nobody read: nothing rendered
        for path in PATHS:
            assert _without_versions(_get(read_at_the_end, path)) == _without_versions(
                _get(read_every_tick, path)
            ), path
        assert len(syncs) == 1  # published once, at the first read
        assert read_at_the_end.store.rv < read_every_tick.store.rv  # the unread states got no version


def test_an_open_watch_gets_every_tick_published_at_once() -> None:
    world = small_world("kai")
    with served(world) as sim:
        syncs = _counting_syncs(sim)
        sim.store.watch_opened()  # as the watch handler does while its stream is open
        try:
            for minute in range(1, 6):
                sim.advance_to(world.start + timedelta(minutes=minute))
            assert len(syncs) == 5
        finally:
            sim.store.watch_closed()
        sim.advance_to(world.start + timedelta(minutes=6))
        assert len(syncs) == 5


def _watch_types(sim: SimServer, rv: str) -> list[str]:
    got: list[str] = []

    def watch() -> None:
        req = urllib.request.Request(
            f"{sim.kube_url}/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1",
            headers={"Authorization": f"Bearer {sim.kube_token}"},
        )
        with urllib.request.urlopen(req, context=sim.kube_tls.client_context()) as resp:
            got.extend(json.loads(line)["type"] for line in resp if line.strip())

    thread = threading.Thread(target=watch)
    thread.start()
    thread.join(timeout=30)
    return got


def test_a_watch_gets_the_changes_made_while_nobody_read_and_expires_as_if_each_tick_was_published() -> None:
    world = small_world("kai")
    with served(world) as sim:
        sim.advance_to(world.start + timedelta(minutes=8))
        rv = _get(sim, "/api/v1/pods")["metadata"]["resourceVersion"]
        for minute in range(9, 13):  # resnet-train's pod created at 10 min, unread
            sim.advance_to(world.start + timedelta(minutes=minute))
        assert "ADDED" in _watch_types(sim, rv)
        rv = _get(sim, "/api/v1/pods")["metadata"]["resourceVersion"]
        for minute in range(13, 31):  # 18 unread minutes: what changed first is past the 5-minute history
            sim.advance_to(world.start + timedelta(minutes=minute))
        assert _watch_types(sim, rv) == ["ERROR"]  # 410 Expired: re-list
