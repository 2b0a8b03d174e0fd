"""recent_change: deliberate changes on related objects shortly before the symptom began, and only those."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import codes as C
from incidents.diagnosis.change_categories import loosens
from incidents.diagnosis.changes import check_changes
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.types import Ref

from .dx_world import T0, change, job, node, pod, queue, world

JOB = Ref("job", "train", "vision")


def test_it_links_a_quota_cut_before_the_wait_to_the_exhausted_quota():
    pending = job("train", pods=2, valid_from=T0 + timedelta(hours=1, minutes=10))
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[pending],
        queues=[queue("vision", 8, 8)],
        t=T0 + timedelta(hours=1, minutes=30),
        history={JOB: [pending]},
        changes=[change("queue", "vision", "quota_gpus", 16, 8, T0 + timedelta(hours=1), "platform-admin")],
    )
    ranked = run_checks(di).findings
    assert ranked[0].code == C.PROJECT_QUOTA_EXHAUSTED
    rc = next(f for f in ranked if f.code == C.RECENT_CHANGE)
    assert rc.status == "supported" and "platform-admin" in rc.statement and rc.confidence >= 0.7
    codes = [f.code for f in ranked if f.supported]
    assert codes.index(C.RECENT_CHANGE) > codes.index(C.PROJECT_QUOTA_EXHAUSTED)


def test_it_refutes_a_change_made_after_the_job_already_waited():
    pending = job("train", pods=2, valid_from=T0 + timedelta(minutes=10))
    busy = [pod("x-0", "x", "llm", node_name="h100-01"), pod("x-1", "x", "llm", node_name="h100-02")]
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[pending],
        pods=busy,
        queues=[queue("vision", 16)],
        t=T0 + timedelta(hours=1),
        history={JOB: [pending]},
        changes=[
            change("job", "train", "image", "vit:2.1", "vit:2.2", T0 + timedelta(minutes=40), "ci", "vision")
        ],
    )
    rc = next(f for f in run_checks(di).findings if f.code == C.RECENT_CHANGE)
    assert rc.status == "refuted" and "after the symptom began" in rc.statement and rc.refutes


def test_it_refutes_when_nothing_changed_and_cites_the_empty_window():
    di = world(subjects=[Ref("node", "h100-01")], nodes=[node("h100-01")])
    f = check_changes(di)[0]
    assert f.status == "refuted" and f.refutes[0].kind == "changes_window"


def test_it_ignores_what_the_system_moves_by_itself():
    di = world(
        subjects=[Ref("node", "h100-01")],
        nodes=[node("h100-01")],
        changes=[
            change("node", "h100-01", "conditions.Ready.status", "True", "False", T0 + timedelta(hours=2))
        ],
    )
    assert check_changes(di)[0].status == "refuted"


def test_it_words_a_container_image_change_by_the_field_that_differs():
    pending = job("train", pods=2, valid_from=T0 + timedelta(hours=1, minutes=10))
    runtime = {"gpus": 8, "env": {}, "ready": True, "restart_count": 0}
    old = [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.08-py3-research-build-1.4", **runtime}]
    new = [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.08-py3-research-build-1.5", **runtime}]
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01")],
        jobs=[pending],
        pods=[pod("train-0", "train", "vision", phase="Pending", containers=new)],
        queues=[queue("vision", 16)],
        t=T0 + timedelta(hours=1, minutes=30),
        history={JOB: [pending]},
        changes=[change("pod", "train-0", "containers", old, new, T0 + timedelta(hours=1), "ci", "vision")],
    )
    rc = next(f for f in run_checks(di).findings if f.code == C.RECENT_CHANGE)
    assert rc.status == "supported", rc.statement
    assert (
        "containers[main].image: nvcr.io/nvidia/pytorch:24.08-py3-research-build-1.4 → "
        "nvcr.io/nvidia/pytorch:24.08-py3-research-build-1.5" in rc.statement
    ), rc.statement


def _waiting_job_changed(*edits: tuple[str, int, int]) -> object:
    """recent_change of a job that waits unplaced (the nodes are full of another project's pods) after the
    admin's edits (field, old, new) of its queue, an hour after T0."""
    pending = job("train", pods=2, valid_from=T0 + timedelta(hours=1, minutes=10))
    busy = [pod("x-0", "x", "llm", node_name="h100-01"), pod("x-1", "x", "llm", node_name="h100-02")]
    at = T0 + timedelta(hours=1)
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02")],
        jobs=[pending],
        pods=busy,
        queues=[queue("vision", 16, 24)],
        t=T0 + timedelta(hours=1, minutes=30),
        history={JOB: [pending]},
        changes=[change("queue", "vision", f, old, new, at, "platform-admin") for f, old, new in edits],
    )
    return next(f for f in run_checks(di).findings if f.code == C.RECENT_CHANGE)


def test_a_quota_raise_just_before_the_wait_is_no_cause_of_it():
    rc = _waiting_job_changed(("quota_gpus", 8, 16), ("limit_gpus", 16, 24))
    assert rc.status == "refuted", rc.statement
    assert "more room" in rc.statement and "platform-admin" in rc.statement, rc.statement
    assert len(rc.refutes) == 2 and not rc.supports  # it cites the raises it set aside


def test_a_cut_beside_a_raise_is_still_the_change_that_counts():
    rc = _waiting_job_changed(("limit_gpus", 16, 24), ("quota_gpus", 16, 8))
    assert rc.status == "supported", rc.statement
    assert "16 → 8" in rc.statement and "24" not in rc.statement, rc.statement


def test_a_raise_for_a_job_that_runs_is_still_context():
    running = job("train", pods=1, phase="Running", valid_from=T0 + timedelta(hours=1, minutes=10))
    di = world(
        subjects=[JOB],
        nodes=[node("h100-01")],
        jobs=[running],
        pods=[pod("train-0", "train", "vision", phase="Running", node_name="h100-01")],
        queues=[queue("vision", 16)],
        t=T0 + timedelta(hours=1, minutes=30),
        history={JOB: [running]},
        changes=[change("queue", "vision", "quota_gpus", 8, 16, T0 + timedelta(hours=1), "platform-admin")],
    )
    rc = next(f for f in run_checks(di).findings if f.code == C.RECENT_CHANGE)
    assert rc.status == "supported", rc.statement


def test_what_gives_a_waiting_job_more_room():
    at = T0 + timedelta(hours=1)
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    condition = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}
    more = [
        ("queue", "quota_gpus", 4, 8),
        ("queue", "over_quota_weight", 1, 2),
        ("queue", "limit_gpus", 8, 12),
        ("queue", "limit_gpus", 8, None),  # the limit lifted
        ("job", "gpus_per_pod", 8, 4),
        ("job", "pods", 4, 2),
        ("node", "unschedulable", True, False),
        ("node", "taints", [taint, condition], [condition]),
        ("job", "tolerations", None, [taint]),
    ]
    less = [
        ("queue", "quota_gpus", 8, 4),
        ("queue", "quota_gpus", None, 4),  # unknown before: not known to be a raise
        ("queue", "limit_gpus", None, 12),  # a limit where there was none
        ("queue", "limit_gpus", 12, 8),
        ("job", "gpus_per_pod", 4, 8),
        ("node", "unschedulable", False, True),
        ("node", "taints", [condition], [taint]),
        ("node", "taints", [taint], [taint, condition]),  # only the controller's taint moved
        ("job", "tolerations", [taint], []),
        ("job", "image", "a:1", "a:2"),
    ]
    for kind, field, old, new in more:
        assert loosens(change(kind, "x", field, old, new, at)), (field, old, new)
    for kind, field, old, new in less:
        assert not loosens(change(kind, "x", field, old, new, at)), (field, old, new)


def _cordoned_world(small: dict) -> list:  # type: ignore[type-arg]
    """research/big (1 x 8) waits: h100-01 is full; ops-bot cordoned h100-03 before the wait. ``small``: how
    h100-03 lost its eighth GPU (fell off the bus: capacity 7; withdrawn by the device plugin: allocatable 7)."""
    cordon = change("node", "h100-03", "spec.unschedulable", False, True, T0 - timedelta(minutes=20), "ops-bot")
    di = world(
        subjects=[Ref("job", "big", "research")],
        nodes=[node("h100-01"), node("h100-03", unschedulable=True, **small)],
        pods=[pod("serve-0", "serve", "prod", node_name="h100-01", gpus=8)],
        jobs=[job("big", "research", submitted=T0)],
        queues=[queue("research", 64), queue("prod", 64)],
        changes=[cordon],
    )
    return [f for f in run_checks(di).findings if f.code == C.RECENT_CHANGE]


def test_a_cordon_of_a_node_too_small_for_a_pod_even_uncordoned_is_no_context():
    """An 8-GPU pod cannot go to a node that offers 7 GPUs, cordoned or not: reverting the cordon would not start
    it, so the cordon is neither its cause nor context for its wait, whether the GPU fell off the bus or the
    device plugin withdrew it."""
    for small in ({"capacity": 7}, {"allocatable": 7}):
        (change_finding,) = _cordoned_world(small)
        assert not change_finding.supported, (small, change_finding.statement)
        assert "h100-03" not in change_finding.statement
    # a node that would hold the pod once uncordoned: the cordon is still a recent change
    (change_finding,) = _cordoned_world({})
    assert change_finding.supported and "h100-03" in change_finding.statement


def test_a_cordon_of_a_node_without_the_mig_profile_is_no_context_but_a_relabel_is():
    from .test_mig import mig_job, mig_node

    mig = Ref("job", "ft", "vision")

    def recent(ch):  # type: ignore[no-untyped-def]
        di = world(
            subjects=[mig],
            nodes=[mig_node("a100-01", {"1g.10gb": 28}), node("h100-03", unschedulable=True)],
            jobs=[mig_job()],
            queues=[queue("vision", 16)],
            changes=[ch],
        )
        (found,) = [f for f in run_checks(di).findings if f.code == C.RECENT_CHANGE]
        return found

    before = T0 - timedelta(minutes=20)
    assert not recent(change("node", "h100-03", "spec.unschedulable", False, True, before, "ops-bot")).supported
    relabel = change(
        "node", "a100-01", "metadata.labels", {"nvidia.com/mig.config": "all-3g.40gb"},
        {"nvidia.com/mig.config": "all-1g.10gb"}, before, "node-ops",
    )  # fmt: skip
    assert recent(relabel).supported
