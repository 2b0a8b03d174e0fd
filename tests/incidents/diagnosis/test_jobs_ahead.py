"""One count of the jobs ahead (issue "one page, two stories"): the incident's "N pending jobs are served before
it", the why-pending panel's position and its "Ahead in the queue" list, and the job list's rank
(``ahead.cluster_order``, what ``waiting_order.cluster_ranks`` lists) give a waiting job one place.

A job ahead that cannot start (no room, its quota) is charged nothing: its queue keeps its turn, in KAI's fair
share as in Kueue's borrowing. Charging it as if it started reorders the queues behind it."""

from __future__ import annotations

import re
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from incidents.diagnosis import codes as C
from incidents.diagnosis.ahead import cluster_order, jobs_ahead
from incidents.diagnosis.explain import explain_job
from incidents.diagnosis.types import Ref

from .dx_world import T0, job, node, pod, queue, world

queue_specs = st.lists(
    st.tuples(
        st.integers(0, 1),  # priority
        st.integers(0, 12),  # deserved quota
        st.sampled_from([None, 8, 16]),  # limit
        st.sampled_from([0, 1, 2]),  # over-quota weight
    ),
    min_size=2,
    max_size=3,
)
job_specs = st.lists(
    st.tuples(
        st.integers(0, 2),  # queue index
        st.integers(0, 90),  # minutes after T0
        st.sampled_from(["train", "inference"]),
        st.integers(1, 2),  # pods
        st.sampled_from([1, 2, 4, 8]),  # GPUs per pod
    ),
    min_size=2,
    max_size=7,
)
node_specs = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 2)), min_size=1, max_size=3)  # free, holder


def _world(queues, jobs, nodes, scheduler: str, subject: str = "w0"):
    """8-GPU nodes, each with ``free`` GPUs free and the rest held by a running pod of one queue; jobs wait in
    the queues."""
    qs = []
    for i, (prio, quota, limit, weight) in enumerate(queues):
        q = queue(f"q{i}", quota, limit, priority=prio)
        q.state["over_quota_weight"] = weight
        q.state["scheduler"] = scheduler
        qs.append(q)
    waiting = [
        job(
            f"w{i}",
            f"q{qi % len(queues)}",
            pods=pods,
            gpus_per_pod=gpus,
            submitted=T0 + timedelta(minutes=m),
            priority_class=cls,
        )
        for i, (qi, m, cls, pods, gpus) in enumerate(jobs)
    ]
    held = [
        pod(f"r{i}-0", f"r{i}", f"q{holder % len(queues)}", node_name=f"n{i}", gpus=8 - free)
        for i, (free, holder) in enumerate(nodes)
        if free < 8
    ]
    running = [
        job(f"r{i}", f"q{holder % len(queues)}", phase="Running", gpus_per_pod=8 - free)
        for i, (free, holder) in enumerate(nodes)
        if free < 8
    ]
    di = world(
        subjects=[Ref("job", subject, waiting[int(subject[1:])].namespace)],
        nodes=[node(f"n{i}") for i in range(len(nodes))],
        pods=held,
        jobs=[*waiting, *running],
        queues=qs,
    )
    di.scheduler = scheduler
    return di


_COUNT = re.compile(r"^(\d+) pending job\(s\) are (?:served|ordered) before ")


def _incident_count(causes: list[dict]) -> int | None:
    """The jobs ahead the incident's queue-order finding counts (None: it states no count)."""
    for c in causes:
        if c["code"] != C.QUEUE_PRIORITY:
            continue
        if c["statement"].startswith("No pending job is ordered before"):
            return 0
        m = _COUNT.match(c["statement"])
        if m:
            return int(m.group(1))
    return None


@settings(max_examples=60, deadline=None)
@given(queue_specs, job_specs, node_specs, st.sampled_from(["kai", "kueue"]))
def test_the_incident_the_why_panel_and_the_job_list_give_one_count_of_the_jobs_ahead(
    queues, jobs, nodes, scheduler
):
    for i in range(len(jobs)):
        name = f"w{i}"
        di = _world(queues, jobs, nodes, scheduler, name)
        me = di.find("job", name, di.subjects[0].namespace)
        assert me is not None
        ex = explain_job(di, me)
        pos = ex.position
        assert pos is not None and pos.in_cluster is not None, name
        # the why-pending panel: its position and its list of the jobs ahead
        assert len(ex.ahead) == pos.in_cluster - 1, (name, [a.job.name for a in ex.ahead], pos.in_cluster)
        assert ex.base_pass is not None
        assert [a.job.ref.label for a in ex.ahead] == [c.label for c in ex.base_pass.considered][: len(ex.ahead)]
        # the incident (the same checks, at the same t)
        told = _incident_count([*ex.causes, *ex.ruled_out])
        assert told is None or told == pos.in_cluster - 1, (name, told, pos.in_cluster, ex.causes)
        # the job list's rank
        with di.indexed():
            rank = [(j.namespace, j.name) for j in cluster_order(di)].index((me.namespace, me.name)) + 1
        assert rank == pos.in_cluster, name


def test_a_queue_whose_job_ahead_cannot_start_keeps_its_turn():
    """KAI, q0 (priority 1) and q1 (priority 0), each with a deserved quota of 8; 4 GPUs free. q0's 8-GPU job is
    served first and finds no room: q0 is charged nothing, stays within its quota, and its 1-GPU job goes next,
    before q1's. Charged as if the 8-GPU job had started, q0 would be over its quota and fall behind both of q1's
    jobs (the old count: 3 jobs ahead of q0/w2, the position 2nd)."""
    di = _world(
        [(1, 8, None, 1), (0, 8, None, 1)],
        [(0, 0, "train", 1, 8), (1, 1, "train", 1, 1), (0, 2, "train", 1, 1), (1, 3, "train", 1, 1)],
        [(4, 1)],
        "kai",
        "w2",
    )
    me = di.find("job", "w2", "q0")
    assert me is not None
    ex = explain_job(di, me)
    assert ex.base_pass is not None
    assert [(c.label, c.outcome) for c in ex.base_pass.considered] == [
        ("q0/w0", "no room"),
        ("q0/w2", "starts"),
        ("q1/w1", "starts"),
        ("q1/w3", "starts"),
    ]
    assert ex.position is not None and ex.position.in_cluster == 2
    with di.indexed():
        ahead = jobs_ahead(di, me)
    assert ahead.count == 1 and [a.job.name for a in ahead.jobs] == [a.job.name for a in ex.ahead] == ["w0"]
    assert _incident_count([*ex.causes, *ex.ruled_out]) == 1
