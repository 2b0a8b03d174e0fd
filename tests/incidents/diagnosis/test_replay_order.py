"""The queue replayed forward (incidents.diagnosis.replay) serves its waiting jobs at each step in the order the
scheduler would give on the replay's books (QueueOrder.moved): a queue whose running jobs end holds less, and
KAI's fair share (Kueue's borrowing) puts it first for the GPUs they free."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.durations import Basis
from incidents.diagnosis.eta import forecast
from incidents.diagnosis.queue_order import QueueOrder

from .dx_world import T0, job, limited, node, queue, world

T = T0 + timedelta(hours=1)
DAY = timedelta(hours=24)


def _two_queues(scheduler="kai", limit=None):
    # a and b hold 8 of their quota 8 each; a's job ends at 02:00, b's at 10:00. wb (b) waits longer than wa (a):
    # at t they tie on KAI's fair share and Kueue's borrowing, so wb goes first; once a1 has ended, a holds
    # nothing and wa is within a's quota: wa goes first for a1's GPUs.
    running = [limited("a1", "a", "n1", 8, 2), limited("b1", "b", "n2", 8, 10)]
    wa = job("wa", "a", gpus_per_pod=8, submitted=T0 + timedelta(minutes=30))
    wb = job("wb", "b", gpus_per_pod=8, submitted=T0 + timedelta(minutes=20))
    di = world(
        subjects=[],
        t=T,
        nodes=[node("n1"), node("n2")],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), wa, wb],
        queues=[queue("a", 8, limit), queue("b", 8, limit)],
    )
    di.scheduler = scheduler
    with di.indexed():
        base = SP.cluster_pass(di)
    return di, base


def test_the_queue_whose_job_ended_goes_first_for_the_gpus_it_freed():
    di, base = _two_queues()
    assert [c.label for c in base.considered] == ["b/wb", "a/wa"]  # the order at t
    fc = forecast(di, base, Basis(window=DAY))
    wa, wb = fc.likely_starts()["a/wa"], fc.likely_starts()["b/wb"]
    # wa takes a1's GPUs as they free, evicting nobody (served in the order at t, wb would take them first, and
    # wa reclaim them from it)
    assert (wa.at, wa.nodes, wa.evicted) == (T0 + timedelta(hours=2), {"n1": 1}, [])
    assert (wb.at, wb.nodes, wb.evicted) == (T0 + timedelta(hours=10), {"n2": 1}, [])


def test_on_kueue_the_queue_that_stops_borrowing_goes_first():
    di, base = _two_queues("kueue", limit=16)  # each may borrow up to 16
    assert [c.label for c in base.considered] == ["b/wb", "a/wa"]
    fc = forecast(di, base, Basis(window=DAY))
    assert fc.likely_starts()["a/wa"].at == T0 + timedelta(hours=2)
    assert fc.likely_starts()["b/wb"].at == T0 + timedelta(hours=10)


def test_a_moved_order_weighs_the_moved_holdings_and_leaves_its_own_as_they_were():
    di, _base = _two_queues()
    waiting = [j for j in di.jobs if j.name in ("wa", "wb")]
    with di.indexed():
        order = QueueOrder(di, waiting)
        moved = order.moved(waiting, {"a": (-8.0, (0.0, 0.0))})
    assert [j.name for j in moved] == ["wa", "wb"]
    assert [j.name for j in order] == ["wb", "wa"]
    assert (moved.queue["a"].used, order.queue["a"].used) == (0.0, 8.0)
    assert moved.queue["a"].fair == order.queue["a"].fair
    # only the jobs still waiting are served
    assert [j.name for j in order.moved(waiting[:1], {})] == ["wa"]
