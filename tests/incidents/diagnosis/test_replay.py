"""The queue replayed forward (incidents.diagnosis.replay) starts jobs as KAI does when the room alone does not:
by reclaiming from a queue over its share (replay_evictions), and by moving running jobs out of the way of a gang
whose GPUs are free in total (replay_moves)."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.durations import Basis
from incidents.diagnosis.eta import forecast
from incidents.diagnosis.replay_evictions import state_at
from incidents.diagnosis.replay_room import build

from .dx_world import T0, job, limited, node, queue, world

T = T0 + timedelta(hours=1)
DAY = timedelta(hours=24)


def _forecast(di):
    with di.indexed():
        base = SP.cluster_pass(di)
    return base, forecast(di, base, Basis(window=DAY))


def test_a_gang_whose_gpus_are_free_in_total_starts_once_a_running_job_is_moved_out_of_its_way():
    # 4 GPUs free on each node: the 8-GPU job fits on neither until b (the newer) moves next to a
    running = [limited("a", "vision", "n1", 4, 5), limited("b", "vision", "n2", 4, 5, minutes=1)]
    w = job("w", "vision", gpus_per_pod=8, submitted=T0 + timedelta(minutes=30))
    di = world(
        subjects=[],
        t=T,
        nodes=[node("n1"), node("n2")],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), w],
        queues=[queue("vision", 16)],
    )
    base, fc = _forecast(di)
    assert base.find("vision", "w").outcome == SP.NO_ROOM
    s = fc.likely_starts()["vision/w"]
    assert (s.at, s.nodes, s.evicted) == (T, {"n2": 1}, ["vision/b"])


def test_a_queue_below_its_deserved_quota_reclaims_and_its_victim_waits_again():
    # b holds 2 of its quota 1, c nothing of its quota 1: c1 takes b's newest job at t, which starts again when
    # room frees (a's job ends at 02:00)
    running = [
        limited("a1", "a", "n1", 2, 2),
        limited("b1", "b", "n1", 1, 5),
        limited("b2", "b", "n1", 1, 5, minutes=1),
    ]
    c1 = job("c1", "c", gpus_per_pod=1, submitted=T0 + timedelta(minutes=30))
    di = world(
        subjects=[],
        t=T,
        nodes=[node("n1", gpus=4)],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), c1],
        queues=[queue("a", 2), queue("b", 1, priority=5), queue("c", 1)],
    )
    _base, fc = _forecast(di)
    s = fc.likely_starts()["c/c1"]
    assert (s.at, s.nodes, s.evicted) == (T, {"n1": 1}, ["b/b2"])
    assert fc.likely_starts()["b/b2"].at == T0 + timedelta(hours=2)


def test_a_kueue_cluster_is_not_weighed_for_evictions():
    running = [limited("a", "vision", "n1", 4, 5), limited("b", "vision", "n2", 4, 5)]
    w = job("w", "vision", gpus_per_pod=8, submitted=T0 + timedelta(minutes=30))
    di = world(
        subjects=[],
        t=T,
        nodes=[node("n1"), node("n2")],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), w],
        queues=[queue("vision", 16)],
    )
    di.scheduler = "kueue"
    _base, fc = _forecast(di)
    assert fc.likely_starts()["vision/w"].at == T0 + timedelta(hours=5)


def test_the_books_written_back_as_a_state_drop_the_ended_and_bind_the_started():
    running = [limited("a", "vision", "n1", 8, 2)]
    w = job("w", "vision", gpus_per_pod=8, submitted=T0 + timedelta(minutes=30))
    di = world(
        subjects=[],
        t=T,
        nodes=[node("n1")],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), w],
        queues=[queue("vision", 16)],
    )
    with di.indexed():
        base = SP.cluster_pass(di)
        room = build(di, base)
    later = T0 + timedelta(hours=2)
    holders = {"vision/w": room.holders["vision/a"].__class__(w, {"n1": 8}, 8.0, ("vision", "vision"), later)}
    state = state_at(room, holders, set(), {"vision/a"}, later)
    assert state.t == later
    assert {j.name: j.get("phase") for j in state.jobs} == {"a": "Succeeded", "w": "Running"}
    assert [(p.get("job"), p.get("node"), p.get("gpus")) for p in state.pods] == [("w", "n1", 8)]


def test_a_job_placed_in_a_session_is_not_evicted_by_a_reclaimer_of_the_same_session(monkeypatch):
    # s starts at t in the free room; a reclaim weighed at t that names s as its victim (as a chain of reclaimers
    # would: each evicting the one placed before it) is not taken: the session's victims ran before it began
    import incidents.diagnosis.replay as R
    from incidents.diagnosis.replay_evictions import Eviction

    running = [limited("a1", "a", "n1", 3, 2)]
    s = job("s", "a", gpus_per_pod=1, submitted=T0 + timedelta(minutes=10))
    w = job("w", "c", gpus_per_pod=1, submitted=T0 + timedelta(minutes=20))
    w.state["node_selector"] = {"pool": "elsewhere"}  # no room of its own: only an eviction could start it
    di = world(
        subjects=[],
        t=T,
        nodes=[node("n1", gpus=4)],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), s, w],
        queues=[queue("a", 2), queue("c", 1)],
    )

    def chain(room, holders, reclaimers, evicted, done, when):
        return [Eviction(r, {"n1": 1}, ["a/s"]) for r in reclaimers if r.label == "c/w" and "a/s" in holders]

    monkeypatch.setattr(R, "evictions", chain)
    monkeypatch.setattr(R, "weighed_steps", lambda room: 4)
    base, fc = _forecast(di)
    assert base.find("a", "s").outcome == SP.STARTS
    started = fc.likely_starts().get("c/w")
    assert started is None or started.at > T


def test_a_step_moves_a_running_job_once_however_many_gangs_its_moves_would_start():
    # four nodes half full (a, b, c, d: 4 GPUs each, d the newest); w1 and w2 each need a whole node. KAI's
    # session weighs the jobs running when it began: a job it moved for w1 stays where it went for w2
    running = [limited(n, "vision", f"n{i}", 4, 5, minutes=i) for i, n in enumerate("abcd", start=1)]
    waiting = [
        job(w, "vision", gpus_per_pod=8, submitted=T0 + timedelta(minutes=30 + i))
        for i, w in enumerate(("w1", "w2"))
    ]
    di = world(
        subjects=[],
        t=T,
        nodes=[node(f"n{i}") for i in range(1, 5)],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), *waiting],
        queues=[queue("vision", 32)],
    )
    _base, fc = _forecast(di)
    moved = [set(s.evicted) for s in fc.runs[0].starts.values() if s.at == T]
    assert moved and all(a.isdisjoint(b) for i, a in enumerate(moved) for b in moved[i + 1 :])
