"""A job that waits on missing GPUs gets their repair as its action: the node(s) whose GPUs are missing, the
least disruptive step first, every number from the state, never a step already taken."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import codes as C
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.types import Ref

from .dx_world import T0, gpu, job, node, pod, world

WAITER = Ref("job", "big", "research")


def missing_world(*, h3_pods=(), lost: bool = True, cordoned: bool = False, others=()):  # type: ignore[no-untyped-def]
    """research/big (1 × 8 GPUs) waits: h100-01 is full, h100-03 advertises 7 of its 8 GPUs."""
    busy = [pod("other-0", "other", "prod", node_name="h100-01", gpus=8), *h3_pods]
    return world(
        subjects=[WAITER],
        nodes=[node("h100-01"), node("h100-03", capacity=7, unschedulable=cordoned)],
        jobs=[job("big", "research", submitted=T0), *others],
        pods=busy,
        gpus=[gpu("GPU-aaa", "h100-03", 7, present=not lost)],
    )


def missing_actions(di):  # type: ignore[no-untyped-def]
    result = run_checks(di)
    top = [f for f in result.findings if f.supported]
    assert top and top[0].code == C.GPU_MISSING and top[0].subject == WAITER, [
        (f.code, f.statement) for f in top
    ]
    assert "node" not in top[0].facts  # a job-level cause: no faulty node of its own to drain
    return [a for a in result.actions if a.code == C.GPU_MISSING]


def test_a_job_waiting_on_a_gpu_that_fell_off_the_bus_gets_the_nodes_reboot_and_rma():
    (reboot,) = missing_actions(missing_world())
    assert reboot.title == "Reboot h100-03 to recover GPU 7; replace it (RMA) if it stays missing"
    assert reboot.command.startswith("kubectl cordon h100-03; # then reboot h100-03")
    assert "kubectl drain" not in reboot.command  # nothing runs there
    assert "Evicts nothing" in reboot.impact and "(15 → 8)" in reboot.impact
    assert "would start, in queue order: research/big" in reboot.impact
    assert "advertising 8 GPUs" in reboot.verify and "uncordon h100-03" in reboot.rollback


def test_a_gpu_the_driver_still_reports_gets_a_device_plugin_restart_first():
    plugin, reboot = missing_actions(missing_world(lost=False))
    assert plugin.title == "Restart the NVIDIA device plugin on h100-03 to register its 8 GPUs"
    assert plugin.impact.startswith("Evicts nothing: nothing runs on it.")
    assert "advertises 7 of its 8 GPUs" in plugin.impact
    assert reboot.title.startswith("Reboot h100-03 to recover 1 missing GPU;")


def test_a_cordoned_node_with_pods_is_drained_not_cordoned_again():
    running = [pod("small-0", "small", "prod", node_name="h100-03", gpus=4)]
    # cordoned, h100-03 takes no new pod: its GPUs are not what keeps the job waiting, so no job-level cause
    di = missing_world(h3_pods=running, cordoned=True)
    assert not any(
        f.code == C.GPU_MISSING and f.subject == WAITER and f.supported for f in run_checks(di).findings
    )
    # not cordoned, with a pod on its healthy GPUs: the reboot drains it first and says whom it evicts
    di = missing_world(h3_pods=[pod("small-0", "small", "prod", node_name="h100-03", gpus=0)])
    (reboot,) = missing_actions(di)
    assert "kubectl cordon h100-03 && kubectl drain h100-03" in reboot.command
    assert "Evicts 1 pod(s) holding 0 GPUs: project prod: prod/small-0" in reboot.impact


def test_the_room_goes_to_the_job_first_in_line_not_to_every_waiter():
    earlier = job("first", "research", submitted=T0 - timedelta(hours=1))
    di = missing_world(others=[earlier])
    result = run_checks(di)
    # research/first is ahead in the queue: the repair starts it, so it is not research/big's cause
    assert not any(f.code == C.GPU_MISSING and f.supported and f.subject == WAITER for f in result.findings)
    from incidents.diagnosis.actions_repair import repairs
    from incidents.diagnosis.types import Finding

    f = Finding(C.GPU_MISSING, "", "supported", 0.8, subject=WAITER, facts={"nodes": ["h100-03"]})
    (reboot,) = repairs(di, f, "h100-03")
    assert "would start, in queue order: research/first (" in reboot.impact


def test_a_node_that_advertises_all_its_gpus_again_gets_no_repair():
    from incidents.diagnosis.actions_repair import repairs
    from incidents.diagnosis.types import Finding

    di = world(subjects=[WAITER], nodes=[node("h100-03")], jobs=[job("big", "research")])
    f = Finding(C.GPU_MISSING, "", "supported", 0.8, subject=WAITER, facts={"nodes": ["h100-03"]})
    assert repairs(di, f, "h100-03") == []


def test_a_job_waiting_for_a_node_cordoned_for_its_lost_gpu_gets_that_nodes_repair():
    """ops-bot cordoned h100-03 after GPU 4 fell off the bus; nlp/small (1 × 4) would fit on its healthy GPUs
    once it is back in service. The uncordon waits for the repair: the action is the repair, ending with the
    uncordon, and says whom it evicts and whom it starts."""
    small = Ref("job", "small", "nlp")
    running = [pod(f"r-{i}", f"r{i}", "prod", node_name="h100-03", gpus=1) for i in range(3)]
    di = world(
        subjects=[small],
        nodes=[node("h100-01"), node("h100-03", capacity=7, unschedulable=True)],
        pods=[pod("serve-0", "serve", "prod", node_name="h100-01", gpus=8), *running],
        jobs=[job("small", "nlp", gpus_per_pod=4, submitted=T0)],
        gpus=[gpu("GPU-aaa", "h100-03", 4, present=False, xid=79)],
    )
    result = run_checks(di)
    top = [f for f in result.findings if f.supported and f.scope == "cause"]
    assert top[0].code == C.GPU_NODE_UNAVAILABLE and top[0].subject == small, [f.statement for f in top]
    (reboot,) = [a for a in result.actions if a.code == C.GPU_NODE_UNAVAILABLE]
    assert reboot.title == "Reboot h100-03 to recover GPU 4; replace it (RMA) if it stays missing"
    assert "kubectl cordon" not in reboot.command  # cordoned already
    assert reboot.command.startswith("kubectl drain h100-03")
    assert reboot.command.endswith("once it lists 8 GPUs: kubectl uncordon h100-03")
    assert "Evicts 3 pod(s) holding 3 GPUs" in reboot.impact and "already cordoned" in reboot.impact
    assert "and is uncordoned, the waiting jobs that would start, in queue order: nlp/small" in reboot.impact


def test_a_repair_that_starts_the_jobs_ahead_says_the_waiting_job_is_not_among_them():
    """The repaired node's 8 GPUs go to research/first (8 GPUs, ahead in the queue): the repair's impact says so
    rather than implying it starts research/big."""
    from incidents.diagnosis.actions_repair import repairs
    from incidents.diagnosis.types import Finding

    di = missing_world(others=[job("first", "research", submitted=T0 - timedelta(hours=1))])
    f = Finding(C.GPU_MISSING, "", "supported", 0.8, subject=WAITER, facts={"nodes": ["h100-03"]})
    (reboot,) = repairs(di, f, "h100-03")
    assert reboot.impact.endswith(
        "in queue order: research/first (research/big is not among them: the jobs ahead take that room first)."
    )


def test_a_node_cordoned_for_a_gpu_its_device_plugin_withdrew_gets_that_gpus_repair():
    """Every GPU is still on the bus, but double-bit ECC errors made the device plugin withdraw GPU 3 and ops-bot
    cordon the node: the waiting job's action is that GPU's repair (the node has no missing GPU to recover)."""
    small = Ref("job", "small", "nlp")
    di = world(
        subjects=[small],
        nodes=[node("h100-01"), node("h100-03", allocatable=7, unschedulable=True)],
        pods=[pod("serve-0", "serve", "prod", node_name="h100-01", gpus=8)],
        jobs=[job("small", "nlp", gpus_per_pod=4, submitted=T0)],
        gpus=[gpu("GPU-bbb", "h100-03", 3, dbe=2)],
    )
    result = run_checks(di)
    top = [f for f in result.findings if f.supported and f.scope == "cause"]
    assert top[0].code == C.GPU_NODE_UNAVAILABLE and top[0].subject == small, [f.statement for f in top]
    titles = [a.title for a in result.actions if a.code == C.GPU_NODE_UNAVAILABLE]
    assert titles == ["Reboot h100-03 to recover GPU 3; replace it (RMA) if it stays missing"]
