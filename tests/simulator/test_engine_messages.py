"""The schedulers' messages match the real texts (copied from their sources and issues, cited per test)."""

from __future__ import annotations

from simulator.engine import messages as m


def test_it_writes_kube_schedulers_fit_error() -> None:
    # docs/design.md §8 quotes the kube-scheduler FitError with its preemption part.
    reasons = [(m.INSUFFICIENT, None)] * 2 + [(m.TAINT, {"key": "nvidia.com/gpu", "value": "true"})] * 6
    assert m.kube_fit_message(8, reasons) == (
        "0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6 node(s) had untolerated taint {nvidia.com/gpu: true}. "
        "preemption: 0/8 nodes are available: 2 No preemption victims found for incoming pod, 6 Preemption is not "
        "helpful for scheduling."
    )


def test_it_writes_the_unreachable_taint_without_a_value() -> None:
    assert (
        m.taint_text({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"})
        == "{node.kubernetes.io/unreachable: }"
    )


def test_it_writes_kais_non_preemptible_over_quota_message() -> None:
    # NVIDIA/KAI-Scheduler pkg/scheduler/api unschedule_info_test: GetBuildOverCapacityMessageForQueue.
    assert m.kai_non_preemptible_over_quota("test-queue", 3, 4, 2) == (
        "Non-preemptible workload is over quota. Workload requested 3 GPUs, but test-queue quota is 4 GPUs, "
        "while 2 GPUs are already allocated for non-preemptible pods. Use a preemptible workload to go over quota."
    )


def test_it_writes_kais_over_limit_message() -> None:
    # KAI GetJobOverMaxAllowedMessageForQueue.
    assert m.kai_over_limit("vision", 8, 0, 16) == (
        "vision quota has reached the allowable limit of GPUs. Limit is 8 GPUs, currently 0 GPUs allocated and "
        "workload requested 16 GPUs"
    )


def test_it_writes_kais_gang_fit_message() -> None:
    # As a KAI PodGroup condition reads when 2 of 3 gang members fit.
    reasons = m.kai_fit_reasons([(m.INSUFFICIENT, None)] * 3)
    assert m.kai_fit_message("kai-lab", "gang3-0", 2, 3, reasons) == (
        "PodSchedulingErrors: Resources were found for 2 pods while 3 are required for gang scheduling. Additional "
        "pods cannot be scheduled due to: no nodes with enough resources were found: 3 node(s) didn't have enough "
        "resources: GPUs.."
    )
    assert m.kai_fit_reasons([(m.TAINT, None)] * 2 + [(m.INSUFFICIENT, None)] * 5) == (
        "no nodes with enough resources were found: 2 node(s) had untolerated taint(s). \n5 node(s) didn't have "
        "enough resources: GPUs."
    )


def test_it_writes_kueues_quota_message() -> None:
    # kubernetes-sigs/kueue flavorassigner: "insufficient unused quota for %s in flavor %s, %s more needed".
    assert m.kueue_insufficient(8) == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        "default-flavor, 8 more needed"
    )


def test_it_writes_kais_reclaim_messages() -> None:
    assert m.kai_reclaim_message("kai-lab", "batch-hog-2", "kai-lab", "pg-infer-claim-2") == (
        "Pod kai-lab/batch-hog-2 was preempted by workload kai-lab/pg-infer-claim-2."
    )
    # KAI GetReclaimQueueDetailsMessage with ResourceRequirements.String().
    assert m.kai_queue_details("Batch Eval", 2, 1, 1, 100) == (
        "Batch Eval uses <GPU: 2, CPU: 16 (cores), memory: 137.44 (GB)> with a quota of <GPU: 1, CPU: 0 (cores), "
        "memory: 0 (GB)>, fair-share of <GPU: 1, CPU: 0 (cores), memory: 0 (GB)> and queue priority of <100>."
    )
