"""When a waiting job will start (incidents.diagnosis.eta): the queue replayed forward from t with the running
jobs' expected ends, by their runtime limit or by the durations of finished jobs of the same project and shape."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.durations import Basis, expected_end, shape_of
from incidents.diagnosis.eta import DRAWS, eta, forecast
from incidents.diagnosis.replay import MAX_STEPS
from incidents.diagnosis.types import iso

from .dx_world import T0, job, node, pod, queue, world

T = T0 + timedelta(hours=1)
DAY = timedelta(hours=24)


def _running(name, project="vision", node_name="h100-01", gpus=8, started=T0, limit=None):
    j = job(name, project, phase="Running", gpus_per_pod=gpus)
    j.state["started"] = iso(started)
    if limit is not None:
        j.state["active_deadline_seconds"] = limit
    return j, pod(f"{name}-0", name, project, node_name=node_name, gpus=gpus)


def _world(running, waiting, nodes=None):
    jobs = [j for j, _ in running] + list(waiting)
    return world(
        subjects=[],
        t=T,
        nodes=nodes or [node("h100-01")],
        pods=[p for _, p in running],
        jobs=jobs,
        queues=[queue("vision", 64, 64), queue("nlp", 64, 64)],
    )


def _eta(di, label, basis):
    ns, name = label.split("/")
    with di.indexed():
        base = SP.cluster_pass(di)
    return eta(di, di.find("job", name, ns), base, basis)


def test_a_running_jobs_runtime_limit_bounds_its_end_and_the_waiting_job_starts_then():
    di = _world([_running("r", limit=3 * 3600)], [job("w", submitted=T0 + timedelta(minutes=5))])
    e = _eta(di, "vision/w", Basis(window=DAY))
    assert (e.lo, e.hi) == (T0 + timedelta(hours=3), T0 + timedelta(hours=3))
    assert e.words == "likely 03:00: 1 running job(s) end by then (1 by its runtime limit)"


def test_without_a_limit_the_spread_of_finished_jobs_of_the_same_project_and_shape_gives_a_range():
    di = _world([_running("r")], [job("w", submitted=T0 + timedelta(minutes=5))])
    runs = [2 * 3600, 3 * 3600, 4 * 3600, 5 * 3600, 6 * 3600]
    basis = Basis(window=DAY, durations={("vision", 1, "8"): runs, ("nlp", 1, "8"): [60.0]})
    e = _eta(di, "vision/w", basis)
    # the quartiles of 2..6 h from a start at 00:00, and their median
    assert (e.lo, e.likely, e.hi) == (
        T0 + timedelta(hours=3),
        T0 + timedelta(hours=4),
        T0 + timedelta(hours=5),
    )
    assert e.words.startswith(
        "likely 03:00–05:00, most likely 04:00: 1 running job(s) end by then (1 by the durations of finished"
    )


def test_a_job_ahead_takes_the_first_room_and_the_next_end_starts_it():
    # two running jobs end at 02:00 and 04:00 (limits); the job ahead takes the first node, it gets the second
    nodes = [node("h100-01"), node("h100-02")]
    running = [_running("r1", limit=2 * 3600), _running("r2", node_name="h100-02", limit=4 * 3600)]
    ahead = job("a", submitted=T0)
    ahead.state["active_deadline_seconds"] = 10 * 3600  # it runs past 04:00 once started
    mine = job("w", submitted=T0 + timedelta(minutes=5))
    di = _world(running, [ahead, mine], nodes)
    e = _eta(di, "vision/w", Basis(window=DAY))
    assert (e.lo, e.hi) == (T0 + timedelta(hours=4), T0 + timedelta(hours=4))
    assert [x.label for x in e.ended] == ["vision/r1", "vision/r2"]
    assert e.started_first == ["vision/a"]
    assert e.words.endswith("and 1 job(s) ahead start first")


def test_a_job_the_next_pass_starts_starts_now():
    di = _world([], [job("w")])
    e = _eta(di, "vision/w", Basis(window=DAY))
    assert e.now and e.words == "now: the next scheduling pass starts it"


def test_it_is_unknown_when_no_running_job_has_a_limit_or_a_history_and_says_why():
    # nlp's finished job is no service's kind, nor is its age: a service runs until stopped
    r = _running("r")
    r[0].state.update(priority_class="inference", preemptible=False)
    di = _world([r], [job("w")])
    e = _eta(di, "vision/w", Basis(window=DAY, durations={("nlp", 1, "8"): [3600.0]}))
    assert e.lo is None and e.unknown
    assert e.words == (
        "unknown: none of the 1 running job(s) has a runtime limit, nor finished jobs of its project and shape "
        "over the 24 h before t"
    )
    # nor train work, where no job of the cluster ended over the window: no age is a measure then
    assert _eta(_world([_running("r")], [job("w")]), "vision/w", Basis(window=DAY)).unknown


def test_with_no_finished_job_of_its_project_train_work_is_read_from_its_age_not_other_projects():
    # r (vision, train) has run an hour; vision has no finished job, nlp's ran 2, 3 and 4 hours: nlp's say nothing
    # of vision's. Having run an hour, r most likely runs two (an hour more), between 20 minutes and 3 hours more
    # one time in two
    w = job("w", submitted=T0 + timedelta(minutes=5))
    w.state["active_deadline_seconds"] = 10 * 3600
    di = _world([_running("r")], [w])
    basis = Basis(window=DAY, durations={("nlp", 1, "4"): [2 * 3600.0, 3 * 3600.0, 4 * 3600.0]})
    basis.observe(di)
    end = expected_end(di.find("job", "r", "vision"), T, basis)
    assert end is not None and (end.lo, end.likely, end.hi) == (
        T + timedelta(minutes=20),
        T + timedelta(hours=1),
        T + timedelta(hours=3),
    )
    # w waits for r alone: its draws are r's, their median r's likely end, their middle half within r's
    e = _eta(di, "vision/w", basis)
    assert e.likely == T + timedelta(hours=1)
    assert e.lo is not None and e.hi is not None and end.lo < e.lo < e.likely < e.hi < end.hi
    assert e.words.endswith("(1 by how long their projects' jobs have run, none of which finished)")


def test_a_job_the_replay_starts_in_a_project_with_no_history_runs_as_long_as_its_running_jobs():
    # vision has no finished job; its two running jobs have run 30 minutes: its jobs most likely run an hour.
    # A job that starts now is read from them, not from its own age (none), nor from nlp's 5-minute jobs
    running = [
        _running("r1", started=T - timedelta(minutes=30)),
        _running("r2", node_name="h100-02", started=T - timedelta(minutes=30)),
    ]
    di = _world(running, [], nodes=[node("h100-01"), node("h100-02")])
    basis = Basis(window=DAY, durations={("nlp", 1, "8"): [300.0] * 5})
    basis.observe(di)
    fresh = job("f", phase="Running")
    fresh.state["started"] = iso(T)
    e = expected_end(fresh, T, basis)
    assert e is not None and e.likely == T + timedelta(hours=1)
    assert (e.lo, e.hi) == (T + timedelta(minutes=20), T + timedelta(hours=3))
    # where no job of the cluster ended over the window, the window is shorter than the jobs run (a day of
    # trainings that run for days): their ages say nothing of when they end
    quiet = Basis(window=DAY)
    quiet.observe(di)
    assert expected_end(fresh, T, quiet) is None
    # a service of such a project: it runs until stopped, its age says nothing of when
    fresh.state.update(priority_class="inference", preemptible=False)
    assert expected_end(fresh, T, basis) is None


def test_it_is_unknown_when_the_ends_it_can_foresee_never_make_room_for_it():
    # a 16-GPU job on 8-GPU nodes: no end ever starts it
    di = _world([_running("r", limit=3600)], [job("w", gpus_per_pod=16)])
    e = _eta(di, "vision/w", Basis(window=DAY))
    assert e.unknown.startswith(
        "once every running job with an expected end has ended, the replay still does not"
    )
    assert e.passes <= 2 * MAX_STEPS


def test_a_job_that_ran_past_every_finished_one_of_its_kind_has_no_expected_end():
    j, _ = _running("r", started=T0 - timedelta(hours=10))
    basis = Basis(window=DAY, durations={("vision", 1, "8"): [3600.0, 7200.0]})
    assert expected_end(j, T, basis) is None
    # nor is it read from another project's longer jobs, nor from its age: its project has a history, it is past it
    longer = Basis(
        window=DAY, durations={("vision", 1, "8"): [3600.0, 7200.0], ("nlp", 1, "8"): [20 * 3600.0] * 4}
    )
    assert expected_end(j, T, longer) is None
    j2, _ = _running("r2", started=T0 - timedelta(minutes=30))
    end = expected_end(j2, T, basis)
    # 1 h 30 in at t: of the finished jobs, only the 2 h one ran that long, so it ends 2 h after its start
    assert end is not None and (end.lo, end.likely, end.hi) == (T0 + timedelta(hours=1, minutes=30),) * 3
    assert end.samples == 1


def test_a_running_jobs_end_is_read_from_the_finished_jobs_that_ran_longer_than_it_has():
    runs = [20 * 60.0, 30 * 60.0, 40 * 60.0, 100 * 60.0, 110 * 60.0, 120 * 60.0]
    basis = Basis(window=DAY, durations={("vision", 1, "8"): runs})
    j, _ = _running("r", started=T - timedelta(minutes=50))
    end = expected_end(j, T, basis)
    # 50 minutes in: the 100, 110 and 120-minute jobs are its kind now; not the short ones, long ended
    assert end is not None
    assert (end.lo, end.likely, end.hi) == (
        T + timedelta(minutes=50),
        T + timedelta(minutes=60),
        T + timedelta(minutes=70),
    )
    fresh, _ = _running("f", started=T)
    e2 = expected_end(fresh, T, basis)
    # half of the six had ended by 40 minutes and the other half ran 100 or more: the median is midway, as
    # statistics.median's of the six (the lower of the two middle runs dated every even count's median early)
    assert e2 is not None and e2.likely == T + timedelta(minutes=70)


def test_the_jobs_still_running_count_as_durations_not_yet_over():
    # finished: 20, 30 and 40 minutes; three jobs of the same kind have run 90 minutes and go on. Read from the
    # finished jobs alone, half end by 30 minutes; counting the three running ones, a third have ended by 30
    finished = {("vision", 1, "8"): [20 * 60.0, 30 * 60.0, 40 * 60.0]}
    running = [
        _running(f"r{i}", node_name=f"h100-0{i}", started=T - timedelta(minutes=90)) for i in (1, 2, 3)
    ]
    fresh = _running("f", node_name="h100-04", started=T)
    di = _world([*running, fresh], [], nodes=[node(f"h100-0{i}") for i in (1, 2, 3, 4)])
    alone = expected_end(fresh[0], T, Basis(window=DAY, durations=finished))
    assert alone is not None and alone.likely == T + timedelta(minutes=30)
    basis = Basis(window=DAY, durations=finished)
    basis.observe(di)
    weighed = expected_end(fresh[0], T, basis)
    # 20, 30 and 40 ended, three are past 90 (and the fresh one): half have ended by 40
    assert weighed is not None and weighed.likely == T + timedelta(minutes=40)
    assert weighed.lo == T + timedelta(minutes=30)


def test_one_replay_answers_every_waiting_job_and_which_start_within_the_hour():
    # three 8-GPU nodes held by jobs ending at 00:30, 01:20 and 03:00 (limits from T0); three jobs wait in order
    nodes = [node("h100-01"), node("h100-02"), node("h100-03")]
    running = [
        _running("r1", limit=90 * 60),
        _running("r2", node_name="h100-02", limit=140 * 60),
        _running("r3", node_name="h100-03", limit=5 * 3600),
    ]
    waiting = [job(f"w{i}", submitted=T0 + timedelta(minutes=i)) for i in (1, 2, 3)]
    for w in waiting:
        w.state["active_deadline_seconds"] = 10 * 3600  # once started, they run past 05:00
    di = _world(running, waiting, nodes)
    with di.indexed():
        base = SP.cluster_pass(di)
    fc = forecast(di, base, Basis(window=DAY))
    assert {k: (s.at, list(s.nodes)) for k, s in fc.likely_starts().items()} == {
        "vision/w1": (T0 + timedelta(minutes=90), ["h100-01"]),
        "vision/w2": (T0 + timedelta(minutes=140), ["h100-02"]),
        "vision/w3": (T0 + timedelta(hours=5), ["h100-03"]),
    }
    assert set(fc.starts_within(timedelta(hours=1))) == {"vision/w1"}
    e3 = eta(di, di.find("job", "w3", "vision"), base, Basis(window=DAY), fc)
    assert e3.likely == T0 + timedelta(hours=5) and e3.started_first == ["vision/w1", "vision/w2"]


def test_a_strict_fifo_head_that_cannot_start_holds_its_queue_in_the_replay():
    nodes = [node("h100-01")]
    running = [_running("r", limit=2 * 3600)]
    head = job("big", gpus_per_pod=16, submitted=T0)
    behind = job("small", submitted=T0 + timedelta(minutes=1))
    di = _world(running, [head, behind], nodes)
    q = di.find("queue", "vision")
    q.state["queueing_strategy"] = "StrictFIFO"
    with di.indexed():
        base = SP.cluster_pass(di)
    fc = forecast(di, base, Basis(window=DAY))
    assert fc.likely_starts() == {}
    q.state["queueing_strategy"] = "BestEffortFIFO"
    with di.indexed():
        base = SP.cluster_pass(di)
    assert set(forecast(di, base, Basis(window=DAY)).likely_starts()) == {"vision/small"}


def test_shapes_tell_shares_and_mig_from_whole_gpus():
    assert shape_of({"project": "v", "pods": 2, "gpus_per_pod": 8}) == ("v", 2, "8")
    assert shape_of({"project": "v", "pods": 1, "gpus_per_pod": 0, "gpu_share": {"fraction": 0.5}}) == (
        "v",
        1,
        "0.5",
    )
    assert shape_of({"queue": "v", "mig": {"1g.10gb": 2}}) == ("v", 1, "mig:2x1g.10gb")


def test_a_job_its_quota_holds_starts_when_its_own_project_gives_back_gpus_not_when_room_frees():
    # vision (limit 8) runs r1 on h100-01 to 03:00; nlp's r2 on h100-02 ends at 02:00, leaving room vision's
    # waiting job may not take: it starts at 03:00, when vision's own job ends
    nodes = [node("h100-01"), node("h100-02")]
    running = [
        _running("r1", limit=3 * 3600),
        _running("r2", project="nlp", node_name="h100-02", limit=2 * 3600),
    ]
    di = _world(running, [job("w", submitted=T0 + timedelta(minutes=5))], nodes)
    di.queues[0] = queue("vision", 8, 8)
    with di.indexed():
        base = SP.cluster_pass(di)
    assert base.find("vision", "w").outcome == SP.QUOTA
    fc = forecast(di, base, Basis(window=DAY))
    assert fc.likely_starts()["vision/w"].at == T0 + timedelta(hours=3)
    assert [e.label for e in fc.likely_starts()["vision/w"].ended] == ["nlp/r2", "vision/r1"]


def test_a_job_whose_pods_are_bound_runs_from_t_and_its_end_frees_the_node():
    # p's pod is bound to the only node (its containers start): it runs from t for its 2 h limit, then w starts
    placed = job("p", submitted=T0)
    placed.state["active_deadline_seconds"] = 2 * 3600
    bound = pod("p-0", "p", "vision", node_name="h100-01", phase="Pending")
    di = world(
        subjects=[],
        t=T,
        nodes=[node("h100-01")],
        pods=[bound],
        jobs=[placed, job("w", submitted=T0 + timedelta(minutes=5))],
        queues=[queue("vision", 64, 64)],
    )
    with di.indexed():
        base = SP.cluster_pass(di)
    assert base.find("vision", "p").outcome == SP.PLACED
    fc = forecast(di, base, Basis(window=DAY))
    assert fc.likely_starts()["vision/w"].at == T + timedelta(hours=2)


def test_an_ends_basis_reads_as_what_it_was_read_from():
    from incidents.diagnosis.durations import BY_AGE, SAME_SHAPE, End

    at = T0 + timedelta(hours=1)
    assert End("a/x", at, at, True).basis_words == "its runtime limit"
    assert (
        End("a/x", at, at, False, 3, kind=SAME_SHAPE).basis_words
        == "3 finished jobs of its project and shape"
    )
    assert (
        End("a/x", at, at, False, 1, kind=SAME_SHAPE).basis_words == "1 finished job of its project and shape"
    )
    aged = End("a/x", at, at, False, 0, kind=BY_AGE).basis_words
    assert "finished job" not in aged.split(":")[0] and "how long it" in aged


def test_an_eta_names_whose_durations_its_ends_come_from_without_nested_brackets():
    from incidents.diagnosis.durations import SAME_PROJECT, SAME_SHAPE, End
    from incidents.diagnosis.eta import Eta

    at = T0 + timedelta(hours=1)
    e = Eta(t=T0, window=timedelta(hours=24))
    e.ended = [
        End(f"a/{i}", at, at, False, 3, kind=k) for i, k in enumerate([SAME_SHAPE, SAME_SHAPE, SAME_PROJECT])
    ]
    assert e.basis_words == (
        "3 running job(s) end by then (3 by the durations of finished jobs: 2 of the same project and shape, "
        "1 of the same project, any shape)"
    )


def _four_running_and(waiting):
    """Four 8-GPU nodes, each full with a job started at 00:00 whose kind ran 1 to 5 hours (each most likely
    ends at 03:00); ``waiting`` waits."""
    nodes = [node(f"h100-0{i}") for i in (1, 2, 3, 4)]
    running = [_running(f"r{i}", node_name=f"h100-0{i}") for i in (1, 2, 3, 4)]
    runs = [3600.0 * h for h in (1, 1.5, 2, 2.5, 3, 3, 3.5, 4, 4.5, 5)]
    di = world(
        subjects=[],
        t=T,
        nodes=nodes,
        pods=[p for _, p in running],
        jobs=[j for j, _ in running] + list(waiting),
        queues=[queue("vision", 64, 64)],
    )
    basis = Basis(window=DAY, durations={("vision", 1, "8"): runs})
    basis.observe(di)
    median = expected_end(di.find("job", "r1", "vision"), T, basis)
    assert median is not None and median.likely == T0 + timedelta(hours=3)
    return di, basis, median.likely


def test_a_job_waiting_for_the_first_of_several_ends_starts_before_their_median_one_for_all_after():
    # every end at its median would date both at 03:00; drawn, the first of four ends comes earlier and the
    # last later, as the ends of four jobs do
    first, _b, median = _four_running_and([job("w", submitted=T0 + timedelta(minutes=5))])
    e = _eta(first, "vision/w", _b)
    assert e.likely is not None and e.likely < median
    gang = job("g", pods=4, submitted=T0 + timedelta(minutes=5))
    gang.state["active_deadline_seconds"] = 10 * 3600
    every, basis, median = _four_running_and([gang])
    e = _eta(every, "vision/g", basis)
    assert e.likely is not None and e.likely > median
    assert e.lo is not None and e.hi is not None and e.lo <= e.likely <= e.hi


def test_the_draws_are_the_same_for_the_same_state_and_once_where_no_end_has_a_spread():
    di, basis, _median = _four_running_and([job("w", submitted=T0 + timedelta(minutes=5))])
    with di.indexed():
        base = SP.cluster_pass(di)
    one, two = forecast(di, base, basis), forecast(di, base, basis)
    assert len(one.runs) == DRAWS
    assert {k: s.at for k, s in one.likely_starts().items()} == {
        k: s.at for k, s in two.likely_starts().items()
    }
    limits = _world([_running("r", limit=3 * 3600)], [job("w", submitted=T0 + timedelta(minutes=5))])
    with limits.indexed():
        base = SP.cluster_pass(limits)
    assert len(forecast(limits, base, Basis(window=DAY)).runs) == 1
