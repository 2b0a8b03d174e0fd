"""The job page's "why is this not running at t" panel on hand-built inventory."""

from __future__ import annotations

from incidents.diagnosis.explain import explain_job
from incidents.diagnosis.types import Ref

from .dx_world import job, node, pod, queue, world

JOB = Ref("job", "train", "vision")


def test_it_shows_per_node_blockers_totals_quota_and_the_queue():
    taint = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01", taints=[taint]), node("h100-02", unschedulable=True), node("h100-03")],
        pods=[pod("a-0", "a", "nlp", node_name="h100-03", gpus=4)],
        jobs=[job("train"), job("other", submitted=job("x").valid_from)],
        queues=[queue("vision", 16, 24)],
    )
    ex = explain_job(di, di.find("job", "train", "vision"))
    rows = {r.node: r for r in ex.nodes}
    assert "taint" in rows["h100-01"].blockers and "cordoned" in rows["h100-02"].blockers
    assert rows["h100-03"].free == 4 and "insufficient_gpu" in rows["h100-03"].blockers
    assert (
        ex.totals.capacity == 24
        and ex.totals.largest_free_block == 8
        and ex.totals.largest_eligible_block == 4
    )
    assert ex.quota.quota == 16 and ex.quota.over_quota_possible
    assert any("Not enough GPUs" in v for v in ex.verdict)
    assert ex.to_dict()["nodes"][0]["node"] == "h100-01"


def test_it_says_when_the_job_did_not_exist():
    di = world(subjects=[JOB])
    assert not explain_job(di, None, "vision/train").exists


def test_its_jobs_ahead_are_the_schedulers_order_across_queues():
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01")],
        jobs=[job("train"), job("first", "nlp")],
        queues=[queue("vision", 16, 24, priority=1), queue("nlp", 16, 24, priority=5)],
    )
    ex = explain_job(di, di.find("job", "train", "vision"))
    assert [(a.queue, a.why) for a in ex.ahead] == [("nlp", "higher queue priority")]
    assert (
        "1st of 1 waiting in queue vision, 2nd of 2 in the cluster's order; ahead of it for the same GPUs: "
        "nlp/first (starts on h100-01); one pass at t would not start it (no room)." in ex.verdict
    )
    assert ex.whatif_edit is not None and (ex.whatif_edit.kind, ex.whatif_edit.value) == ("hold", "nlp/first")
    assert ex.whatif_starts is True  # checked with one pass over the edited state


def test_its_jobs_ahead_follow_the_models_order_not_a_second_one():
    """KAI serves the queue further below its fair share first: nlp (quota 16, nothing running) before vision
    (over its quota of 8), although vision's job waited first and both queues have the same priority. The panel's
    "ahead" list is the cluster pass's order (ahead.jobs_ahead), the order the position reads."""
    from datetime import timedelta

    from .dx_world import T0

    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        pods=[pod("v-0", "running", "vision", node_name="h100-01", gpus=8)],
        jobs=[
            job("train", submitted=T0),
            job("running", phase="Running", submitted=T0),
            job("later", "nlp", submitted=T0 + timedelta(minutes=30)),
        ],
        queues=[queue("vision", 8, 24), queue("nlp", 16, 24)],
    )
    ex = explain_job(di, di.find("job", "train", "vision"))
    assert [(a.job.name, a.why) for a in ex.ahead] == [("later", "its queue is further below its fair share")]
    assert ex.position is not None and [c.label for c in ex.position.competitors] == ["nlp/later"]
