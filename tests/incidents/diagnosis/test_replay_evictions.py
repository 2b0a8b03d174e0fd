"""The replay's starts by eviction at t (``replay_evictions.evictions``): weighed once for a forecast's draws,
which ask the same of the same state there, and weighed again for any other state."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from incidents.diagnosis import replay_evictions as RE
from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.durations import Basis
from incidents.diagnosis.eta import forecast
from incidents.diagnosis.replay_room import build
from incidents.diagnosis.types import DiagnosisInput, iso

from .dx_world import T0, job, node, pod, queue, world

T = T0 + timedelta(hours=1)


def _world() -> DiagnosisInput:
    """b holds 2 of its quota 1, c nothing of its quota 1: c1 and c2 reclaim from b at t."""
    jobs, pods = [], []
    for name, project, gpus, minutes in (("a1", "a", 2, 0), ("b1", "b", 1, 0), ("b2", "b", 1, 1)):
        j = job(name, project, phase="Running", gpus_per_pod=gpus)
        j.state.update(
            started=iso(T0 + timedelta(minutes=minutes)), submitted=iso(T0 + timedelta(minutes=minutes))
        )
        j.state["active_deadline_seconds"] = 3 * 3600
        jobs.append(j)
        pods.append(pod(f"{name}-0", name, project, node_name="n1", gpus=gpus))
    jobs += [job(f"c{i}", "c", gpus_per_pod=1, submitted=T0 + timedelta(minutes=30 + i)) for i in (1, 2)]
    return world(
        subjects=[],
        t=T,
        nodes=[node("n1", gpus=4)],
        pods=pods,
        jobs=jobs,
        queues=[queue("a", 2), queue("b", 1, priority=5), queue("c", 1)],
    )


def _starts(fc: Any) -> list[dict[str, tuple[object, ...]]]:
    return [{label: (s.at, s.nodes, s.evicted) for label, s in run.starts.items()} for run in fc.runs]


# a's finished jobs ran 1 to 3 hours: a1's end has a spread, so each draw dates it afresh
SPREAD = Basis(
    window=timedelta(hours=24), durations={("a", 1, "2"): [3600.0 * h for h in (1, 1.5, 2, 2.5, 3)]}
)


def test_the_draws_weigh_the_evictions_at_t_once_and_start_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    di = _world()
    with di.indexed():
        base = SP.cluster_pass(di)
    weighed: list[object] = []
    inner = RE._evictions

    def counted(*args: Any) -> list[RE.Eviction]:
        weighed.append(args[-1])
        return inner(*args)

    monkeypatch.setattr(RE, "_evictions", counted)
    once = _starts(forecast(di, base, SPREAD))
    assert len(once) > 1
    at_t = [w for w in weighed if w == T]
    assert len(at_t) == 1
    assert all(run["c/c1"] == (T, {"n1": 1}, ["b/b2"]) for run in once)
    weighed.clear()
    monkeypatch.setattr(RE, "_as_at_t", lambda room, holders: False)
    every = _starts(forecast(di, base, SPREAD))
    assert len([w for w in weighed if w == T]) == len(once)
    assert once == every


def test_evictions_on_other_books_than_at_t_are_weighed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    di = _world()
    with di.indexed():
        base = SP.cluster_pass(di)
        room = build(di, base)
        reclaimers = [w for w in room.waiting if w.label in ("c/c1", "c/c2")]
        weighed: list[int] = []
        inner = RE._evictions

        def counted(*args: Any) -> list[RE.Eviction]:
            weighed.append(1)
            return inner(*args)

        monkeypatch.setattr(RE, "_evictions", counted)
        holders = {k: replace(h, gpus=dict(h.gpus)) for k, h in room.holders.items()}
        first = RE.evictions(room, holders, reclaimers, set(), set(), T)
        again = RE.evictions(room, dict(holders), reclaimers, set(), set(), T)
        assert (
            len(weighed) == 1
            and first
            and [(e.waiter, e.nodes, e.victims) for e in first]
            == [(e.waiter, e.nodes, e.victims) for e in again]
        )
        fewer = {k: h for k, h in holders.items() if k != "a/a1"}  # a1 ended
        RE.evictions(room, fewer, reclaimers, set(), {"a/a1"}, T)
        RE.evictions(room, holders, reclaimers, set(), set(), T + timedelta(minutes=2))
        RE.evictions(room, holders, reclaimers[:1], set(), set(), T)
        assert len(weighed) == 4


def test_a_larger_cluster_weighs_fewer_steps_for_evictions_and_always_the_step_at_t() -> None:
    from incidents.diagnosis.queue_order import QueueOrder
    from incidents.diagnosis.replay_room import Room

    def steps(n: int, scheduler: str = "kai") -> int:
        di = world(subjects=[], t=T, nodes=[node(f"n{i:04d}") for i in range(n)])
        di.scheduler = scheduler
        return RE.weighed_steps(Room(di, [], {}, {}, QueueOrder(di, [])))

    assert [steps(n) for n in (12, 400, 533, 800, 1213, 5000)] == [4, 4, 3, 2, 1, 1]
    assert steps(12, "kueue") == 0
