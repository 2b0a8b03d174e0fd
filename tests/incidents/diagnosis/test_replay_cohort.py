"""The queue replayed forward (incidents.diagnosis.replay) on Kueue reads a cohort's unused quota on its own
books at each step: a ClusterQueue borrows what the others' ending jobs give back, and no more."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.durations import Basis
from incidents.diagnosis.eta import forecast
from incidents.diagnosis.kueue_quota import Quotas
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.request import job_request
from incidents.diagnosis.whatif import apply_edits, parse_edits

from .dx_world import T0, job, limited, node, queue, world

T = T0 + timedelta(hours=1)
DAY = timedelta(hours=24)


def _kueue(name, nominal, limit, cohort):
    q = queue(name, nominal, limit)
    q.state.update(scheduler="kueue", cohort=cohort)
    return q


def _cohort_world():
    # cohort "research": a (nominal 4, may borrow 8) holds its 4, b (nominal 8) its 8; c, outside it, holds 8.
    # wa (a, 8 GPUs) borrows 8: nothing of the cohort is unused until b1 ends at 05:00, though c1's end frees
    # a node at 02:00
    running = [
        limited("a1", "a", "n1", 4, 20),
        limited("b1", "b", "n2", 8, 5),
        limited("c1", "c", "n3", 8, 2),
    ]
    wa = job("wa", "a", gpus_per_pod=8, submitted=T0 + timedelta(minutes=30))
    di = world(
        subjects=[],
        t=T,
        nodes=[node("n1"), node("n2"), node("n3")],
        pods=[p for _, p in running],
        jobs=[*(j for j, _ in running), wa],
        queues=[_kueue("a", 4, 12, "research"), _kueue("b", 8, 8, "research"), _kueue("c", 8, 8, "")],
    )
    di.scheduler = "kueue"
    return di


def test_a_borrowing_queue_starts_when_its_cohort_has_unused_quota_not_when_room_frees():
    di = _cohort_world()
    with di.indexed():
        base = SP.cluster_pass(di)
    # within a's limit (4 + 8 of 12), but b holds all it lends: Kueue's admission keeps it for quota
    held = base.find("a", "wa")
    assert (held.outcome, held.why) == (SP.QUOTA, "cohort research: no unused quota it may borrow")
    s = forecast(di, base, Basis(window=DAY)).likely_starts()["a/wa"]
    assert s.at == T0 + timedelta(hours=5)  # b1's end, not c1's (02:00)
    assert "b/b1" in [e.label for e in s.ended]  # the end that left the cohort's quota unused


def test_it_starts_at_the_first_free_room_when_the_cohort_lends_enough():
    di = _cohort_world()
    b = di.find("queue", "b")
    b.state.update(quota_gpus=16, limit_gpus=16)  # b leaves 8 of its 16 unused: a may borrow them now
    with di.indexed():
        base = SP.cluster_pass(di)
    s = forecast(di, base, Basis(window=DAY)).likely_starts()["a/wa"]
    assert s.at == T0 + timedelta(hours=2)


def test_admits_reads_the_cohorts_unused_quota_on_the_usage_given():
    di = _cohort_world()
    quotas = Quotas(di)
    wa = di.find("job", "wa", "a")
    held = {("a", "default"): 4.0, ("b", "default"): 8.0}
    assert quotas.admits(wa, "a", 8, held) is None
    assert quotas.admits(wa, "a", 8, {**held, ("b", "default"): 0.0}) == "default"
    # within its own nominal quota it needs nothing of the cohort's
    assert quotas.admits(wa, "a", 4, {**held, ("a", "default"): 0.0}) == "default"
    # never past its borrowing limit (nominal 4 + 8), whatever the cohort lends
    assert quotas.admits(wa, "a", 16, {("a", "default"): 0.0, ("b", "default"): 0.0}) is None
    assert quotas.in_cohort("a") and not quotas.in_cohort("c")


def test_the_pass_at_t_admits_a_borrowing_queue_only_within_what_its_cohort_leaves_unused():
    # a free node (n4) does not start wa while b holds all it lends; with 8 of b's 16 unused it does, and the
    # next borrower of the cohort then finds them taken
    di = _cohort_world()
    di.nodes.append(node("n4"))
    with di.indexed():
        assert SP.cluster_pass(di).find("a", "wa").outcome == SP.QUOTA
    di = _cohort_world()
    di.nodes.extend([node("n4"), node("n5")])
    di.find("queue", "b").state.update(quota_gpus=16, limit_gpus=16)
    di.queues.append(_kueue("d", 0, 8, "research"))
    di.jobs.append(job("wd", "d", gpus_per_pod=8, submitted=T0 + timedelta(minutes=40)))
    with di.indexed():
        cp = SP.cluster_pass(di)
    assert cp.find("a", "wa").outcome == SP.STARTS
    wd = cp.find("d", "wd")
    assert (wd.outcome, wd.why) == (SP.QUOTA, "cohort research: no unused quota it may borrow")


def test_a_quota_edit_moves_the_flavors_kueue_admits_by():
    # as the inventory records a ClusterQueue: its flavors' quotas beside the GPU totals. A quota edit of the
    # total moves the first flavor's nominal quota, a limit edit its borrowing limit
    di = _cohort_world()
    di.nodes.append(node("n4"))
    for name, nominal, borrow in (("a", 4, 8), ("b", 8, 0)):
        di.find("queue", name).state["flavor_quotas"] = [
            {"flavor": "default", "nominal": nominal, "borrowing_limit": borrow, "lending_limit": None}
        ]

    def outcome(**edits):
        with (after := apply_edits(di, parse_edits(edits))).indexed():
            return SP.cluster_pass(after).find("a", "wa").outcome

    assert outcome() == SP.QUOTA  # b lends nothing
    assert outcome(quota=["b:16"]) == SP.STARTS  # b leaves 8 unused: a borrows them
    assert outcome(quota=["a:12"]) == SP.STARTS  # within a's own quota
    assert outcome(quota=["b:16"], limit=["a:8"]) == SP.QUOTA  # a may borrow 4 at most


def test_over_its_nominal_quota_a_kueue_queue_borrows_what_its_cohort_lends_not_free_gpus():
    di = _cohort_world()
    di.nodes.append(node("n4"))  # 8 free GPUs
    wa = di.find("job", "wa", "a")
    req = job_request(di, wa)
    assert quota_at(di, wa, req, 8).reason == "over quota, nothing to borrow"  # b holds all it lends
    di.find("queue", "b").state.update(quota_gpus=16, limit_gpus=16)
    assert quota_at(di, wa, req, 8).reason == "over quota, borrowing possible"


def test_a_kueue_queue_outside_a_cohort_never_borrows_whatever_its_limit():
    # c (nominal 8, no cohort) holds its 8 until 02:00; its limit of 16 lends it nothing: wc waits for c1's end
    # though n4 is free
    di = _cohort_world()
    di.nodes.append(node("n4"))
    di.find("queue", "c").state.update(limit_gpus=16)
    di.jobs.append(job("wc", "c", gpus_per_pod=8, submitted=T0 + timedelta(minutes=30)))
    with di.indexed():
        base = SP.cluster_pass(di)
    wc = base.find("c", "wc")
    assert (wc.outcome, wc.why) == (SP.QUOTA, "its nominal quota used, no cohort")
    s = forecast(di, base, Basis(window=DAY)).likely_starts()["c/wc"]
    assert s.at == T0 + timedelta(hours=2)
