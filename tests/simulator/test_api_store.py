"""The API server's store serves the same from its incremental path as from a full re-render every tick."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from simulator import World, load_scenario
from simulator.apiserver.store import Store, encode

SCENARIOS = Path(__file__).resolve().parents[2] / "simulator" / "scenarios"


class Unstamped:
    """The engine's world without its resourceVersion: a store then keeps no signature from one tick to
    the next and lists every event again (what a world whose objects change in place gets)."""

    def __init__(self, world: World) -> None:
        self._world = world

    def __getattr__(self, name: str) -> Any:
        if name == "resource_version":
            raise AttributeError(name)
        return getattr(self._world, name)


def served(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    snap = store.snapshot()
    return {
        resource: [
            (key, e.rv, e.data, e.labels, e.fields)
            for key in snap.order[resource]
            for e in [snap.entries[resource][key]]
        ]
        for resource in snap.order
    }


# MIG, shares and a crash loop under KAI; a busy Kueue cluster; preemptions: pods deleted and recreated
EVERY_KIND = ("shared-mig-department-crashloop", "busy-device-plugin-kueue", "preempted-by-reclaim")


@pytest.mark.parametrize("name", sorted(p.stem for p in SCENARIOS.glob("*.yaml")))
def test_the_incremental_sync_serves_what_a_full_render_every_tick_serves(name: str) -> None:
    """Every bundled scenario (every fault and event kind the format has): the kept signatures hold only if
    the engine stamps every write with a new resourceVersion, as an API server does."""
    world = World.from_scenario(
        load_scenario(SCENARIOS / f"{name}.yaml", now=datetime(2026, 11, 29, tzinfo=UTC))
    )
    incremental, full = Store(), Store()
    ticks = 0
    kinds: set[str] = set()
    while True:
        since = incremental.rv
        assert incremental.sync(world) == full.sync(Unstamped(world))
        assert incremental.rv == full.rv
        written = incremental.events_since(since)
        assert written is not None and written == full.events_since(since)  # same entries, same bytes
        kinds |= {kind for _, _, kind, _, _ in written}
        assert served(incremental) == served(full)
        if world.now >= world.end:
            break
        world.advance_to(world.now + timedelta(seconds=60))
        ticks += 1
    if name in EVERY_KIND:
        assert ticks >= 100 and incremental.rv > 100
        assert kinds == {"ADDED", "MODIFIED", "DELETED"}


def _reference(value: Any) -> Any:
    """The store's encoding before orjson: None dropped from dicts, json.dumps compact (ensure_ascii)."""
    if type(value) is dict:
        return {k: _reference(v) for k, v in value.items() if v is not None}
    if type(value) is list:
        return [_reference(v) for v in value]
    return value


class Name(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "naïve – 東京",  # non-ASCII: json escapes it
        'del \x7f, tab \t, nul \x00, quote ", backslash \\, slash /',
        0.1,
        1e-05,
        1e16,
        2.0,
        float("nan"),
        float("inf"),
        2**70,  # past orjson's 64 bits
        -(2**63),
        True,
        None,
        [None, 1, "a", [None, {"x": None}]],
        {"nested": {"gone": None, "kept": 0}},
        {1: "int key"},
        Name("a str subclass"),
    ],
)
def test_an_object_encodes_to_the_bytes_json_dumps_wrote(value: Any) -> None:
    obj = {"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "value": value, "none": None}
    expected = _reference(obj)
    expected["metadata"]["resourceVersion"] = "7"
    entry = encode(obj, 7)
    assert entry.data == json.dumps(expected, separators=(",", ":")).encode()
    assert obj["metadata"] == {"name": "p", "labels": {"a": "b"}}  # the rendering is not written to
    assert entry.labels == {"a": "b"} and entry.fields["metadata.name"] == "p"
