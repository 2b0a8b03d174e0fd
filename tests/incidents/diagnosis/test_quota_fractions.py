"""Project/queue quota counts GPU units as the scheduler charges them: a 0.5 share is 0.5, a MIG 3g instance 3.

A 0.5-GPU job under a quota of 4 with 3.5 in use fits; one more 1-GPU pod does not, and the finding's words
and numbers say fractions ("3.5 of 4").
"""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis.actions import propose
from incidents.diagnosis.allocation import project_allocated
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduling import check_scheduling
from incidents.diagnosis.types import Ref

from .dx_world import job, node, pod, queue, world

JOB = Ref("job", "nb", "vision")


def share(j, fraction):
    j.state["gpu_share"] = {"fraction": fraction, "memory_mib": None, "gpu_index": None, "group": ""}
    j.state["gpus_per_pod"] = 0
    j.state["gpus_total"] = 0
    j.state["gpu_units"] = fraction * int(j.state["pods"])
    return j


def shared_pod(name, job_name, fraction, node_name="h100-01"):
    p = pod(name, job_name, "vision", node_name=node_name, gpus=0)
    p.state["gpu_units"] = fraction
    p.state["gpu_share"] = {"fraction": fraction, "memory_mib": None, "gpu_index": 0, "group": ""}
    return p


def fraction_world(*, want: float | None = 0.5, whole: int = 0, quota: int = 4, limit: int | None = None):
    # vision holds 3 whole GPUs and a 0.5 share: 3.5 of its quota of 4, all of it non-preemptible (inference), so
    # a non-preemptible job's quota counts all of it.
    pods = [
        pod("a-0", "a", "vision", node_name="h100-01", gpus=3, priority_class="inference"),
        shared_pod("b-0", "b", 0.5),
    ]
    pending = job("nb", gpus_per_pod=whole, priority_class="inference")
    if want is not None:
        share(pending, want)
    return world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[
            pending,
            job("a", phase="Running", gpus_per_pod=3, priority_class="inference"),
            share(job("b", phase="Running", priority_class="inference"), 0.5),
        ],
        pods=pods,
        queues=[queue("vision", quota, limit)],
    )


def test_a_share_is_charged_its_fraction():
    di = fraction_world()
    assert project_allocated(di, "vision", "vision") == 3.5
    req = job_request(di, di.jobs[0])
    assert req.units == 0.5 and req.total == 0


def test_a_half_gpu_job_fits_the_half_gpu_left_in_its_quota():
    di = fraction_world(want=0.5)
    q = quota_at(di, di.jobs[0], job_request(di, di.jobs[0]), 0)
    assert q is not None
    assert (q.allocated, q.requested, q.after, q.quota) == (3.5, 0.5, 4.0, 4.0)
    assert q.within_quota and not q.blocks
    refuted = [f for f in check_scheduling(di) if f.code == C.PROJECT_QUOTA_EXHAUSTED]
    assert refuted and refuted[0].status != "supported"
    assert "uses 3.5 of 4 GPUs of quota" in refuted[0].statement


def test_a_whole_gpu_more_exceeds_the_quota_and_says_fractions():
    di = fraction_world(want=None, whole=1)  # non-preemptible 1-GPU pod: 3.5 + 1 > 4
    findings = {f.code: f for f in check_scheduling(di)}
    f = findings[C.PROJECT_QUOTA_EXHAUSTED]
    assert f.status == "supported"
    assert "uses 3.5 of 4 GPUs of quota" in f.statement and "4.5 would exceed the quota" in f.statement
    assert f.facts["allocated"] == 3.5 and f.facts["requested"] == 1
    actions = [a for a in propose(di, [f]) if a.code == C.PROJECT_QUOTA_EXHAUSTED]
    # a quota is raised to whole GPUs: 4.5 -> 5
    assert actions and "from 4 to 5" in actions[0].title, actions[0].title


def test_a_share_over_the_limit_blocks_by_its_fraction():
    di = fraction_world(want=0.75, limit=4)
    q = quota_at(di, di.jobs[0], job_request(di, di.jobs[0]), 0)
    assert q is not None and q.over_limit and q.blocks and q.after == 4.25
