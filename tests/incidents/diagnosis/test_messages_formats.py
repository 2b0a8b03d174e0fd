"""Real messages of every format issue 14 names: kube-scheduler from the per-node lines of 1.2–1.4 to today,
cluster-autoscaler, Volcano, HAMi and Kueue's lifecycle reasons. Each text carries its public source."""

from __future__ import annotations

import time

import pytest

from incidents.diagnosis import codes as C
from incidents.diagnosis.messages import MAX_TEXT, parse_message
from incidents.diagnosis.scheduler_words import said_codes


def codes(p) -> list[tuple[str, int | None]]:
    return [(r.code, r.count) for r in p.reasons]


#
# kube-scheduler
#
def test_it_reads_the_per_node_fit_failure_lines_with_their_inner_commas():
    # kubernetes/website content/en/docs/tasks/debug/debug-application/debug-running-pod.md (Kubernetes 1.4-era event)
    text = (
        "pod (nginx-deployment-1370807587-fz9sd) failed to fit in any node\n"
        "fit failure on node (kubernetes-node-6ta5): Node didn't have enough resource: CPU, requested: 1000, used: 1420, capacity: 2000\n"
        "fit failure on node (kubernetes-node-wul5): Node didn't have enough resource: CPU, requested: 1000, used: 1100, capacity: 2000\n"
    )
    p = parse_message(text)
    assert (p.source, p.total_nodes) == ("kube-scheduler", 2)
    assert [(r.code, r.count, r.resource) for r in p.reasons] == [("insufficient_cpu", 2, "cpu")]
    assert p.reasons[0].text.endswith("capacity: 2000")
    assert p.summary == "2 nodes considered: 2 lack free cpu."


def test_it_counts_each_node_once_per_mechanism_in_the_per_node_form():
    # kubernetes/kubernetes plugin/pkg/scheduler/generic_scheduler.go FitError.Error() (1.2–1.5):
    # "fit failure on node (%s): %s\n" per node, reasons joined by ", "; GPU resource of that era alpha.kubernetes.io/nvidia-gpu
    text = (
        "pod (tf-0) failed to fit in any node\n"
        "fit failure on node (gpu-1): Insufficient alpha.kubernetes.io/nvidia-gpu, PodToleratesNodeTaints\n"
        "fit failure on node (gpu-2): Insufficient alpha.kubernetes.io/nvidia-gpu\n"
        "fit failure on node (cpu-1): MatchNodeSelector\n"
    )
    p = parse_message(text)
    assert p.total_nodes == 3
    assert codes(p) == [("insufficient_gpu", 2), ("untolerated_taint", 1), ("node_selector_mismatch", 1)]
    assert said_codes(p) == {C.GPU_CAPACITY_SHORTAGE, C.UNTOLERATED_TAINT, C.NODE_SELECTOR_MISMATCH}


def test_it_reads_insufficient_pods_in_the_fit_failure_summary():
    # https://github.com/kubernetes/kubernetes/issues/41070 (1.5.1)
    p = parse_message(
        "pod (test-1012964845-v8915) failed to fit in any node\nfit failure summary on nodes : Insufficient pods (2), PodToleratesNodeTaints (1)"
    )
    assert codes(p) == [("too_many_pods", 2), ("untolerated_taint", 1)]


def test_it_reads_a_disk_pressure_taint_as_a_taint_not_as_not_ready():
    # https://github.com/secretflow/secretflow/issues/1442 (with the caller's ", reject the pod ... even after PostFilter." suffix)
    p = parse_message(
        "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/disk-pressure: }. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling., "
        "reject the pod pyps-oxcgedyz-node-36-0 even after PostFilter."
    )
    assert [(r.code, r.count, r.taint) for r in p.reasons] == [
        ("untolerated_taint", 1, {"key": "node.kubernetes.io/disk-pressure", "value": ""})
    ]
    assert [r.code for r in p.preemption.reasons] == ["preemption_not_helpful"]
    said = said_codes(p)
    assert C.UNTOLERATED_TAINT in said and C.GPU_NODE_UNAVAILABLE not in said


@pytest.mark.parametrize(
    ("taint", "code"),
    [
        # kubernetes/kubernetes pkg/apis/core/well_known_taints.go: the condition taints of a Ready node
        ("node.kubernetes.io/disk-pressure", "untolerated_taint"),
        ("node.kubernetes.io/memory-pressure", "untolerated_taint"),
        ("node.kubernetes.io/pid-pressure", "untolerated_taint"),
        # ... and of a node that is not Ready
        ("node.kubernetes.io/not-ready", "node_not_ready"),
        ("node.kubernetes.io/unreachable", "node_not_ready"),
    ],
)
def test_it_tells_pressure_taints_from_not_ready_taints(taint, code):
    # Format: kubernetes/kubernetes pkg/scheduler/framework/plugins/tainttoleration (1.26+ "had untolerated taint {k: v}")
    p = parse_message(f"0/2 nodes are available: 2 node(s) had untolerated taint {{{taint}: }}.")
    assert p.reasons[0].code == code


def test_it_reads_the_pre_taint_pressure_predicates_as_node_pressure():
    # kubernetes/kubernetes pkg/scheduler/algorithm/predicates/error.go (1.10–1.12):
    # ErrNodeUnderMemoryPressure "node(s) had memory pressure", ErrNodeUnderDiskPressure "node(s) had disk pressure"
    p = parse_message("0/3 nodes are available: 1 node(s) had memory pressure, 2 node(s) had disk pressure.")
    assert codes(p) == [("node_pressure", 1), ("node_pressure", 2)]
    # 1.8–1.9 wrote the predicate name
    assert (
        parse_message("0/2 nodes are available: 2 NodeUnderDiskPressure.").reasons[0].code == "node_pressure"
    )


def test_it_reads_node_volume_limits_as_neither_volume_binding_nor_gpu_shortage():
    # kubernetes/kubernetes pkg/scheduler/framework/plugins/nodevolumelimits/csi.go ErrReasonMaxVolumeCountExceeded
    # "node(s) exceed max volume count" (1.10–1.17: pkg/scheduler/algorithm/predicates/error.go ErrMaxVolumeCountExceeded)
    p = parse_message("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) exceed max volume count.")
    assert codes(p) == [("insufficient_cpu", 1), ("volume_node_limit", 2)]
    assert "volume_binding" not in {r.code for r in p.reasons}
    assert said_codes(p) == {"cpu_memory_shortage"}  # the CPU reason corroborates; the volume limit none
    assert "volume limit" in p.summary
    # the plugin named in a PreFilter/Filter list, and the 1.11–1.16 per-driver attach limit resource
    assert (
        parse_message("0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeVolumeLimits].")
        .reasons[0]
        .code
        == "volume_node_limit"
    )
    assert (
        parse_message("0/1 nodes are available: 1 Insufficient attachable-volumes-aws-ebs.").reasons[0].code
        == "volume_node_limit"
    )


def test_it_still_reads_unbound_claims_as_volume_binding():
    # https://github.com/apache/apisix-helm-chart/issues/346
    p = parse_message(
        "0/3 nodes are available: 3 pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling."
    )
    assert codes(p) == [("volume_binding", 3)]


#
# cluster-autoscaler
#
def test_it_reads_not_trigger_scale_up_with_max_node_group_size():
    # https://github.com/kubernetes/autoscaler/issues/5692 (GKE)
    p = parse_message(
        "pod didn't trigger scale-up: 12 node(s) didn't match Pod's node affinity/selector, 3 max node group size reached."
    )
    assert p.source == "cluster-autoscaler"
    assert codes(p) == [("node_selector_mismatch", 12), ("max_node_group_size", 3)]
    assert p.total_nodes is None, "the counts are node groups"
    assert "3 are at their maximum size" in p.summary
    assert C.GPU_CAPACITY_SHORTAGE in said_codes(p)
    assert set(p.to_dict()) == {"source", "total_nodes", "reasons", "preemption", "summary"}


def test_it_reads_the_gpu_operator_not_trigger_scale_up():
    # https://github.com/NVIDIA/gpu-operator/issues/693 (formerly recorded here as an unknown message)
    p = parse_message(
        "pod didn't trigger scale-up: 1 max node group size reached, 2 node(s) didn't match Pod's node affinity/selector, "
        "1 Insufficient nvidia.com/mig-1g.10gb"
    )
    assert [(r.code, r.count, r.resource) for r in p.reasons] == [
        ("max_node_group_size", 1, None),
        ("node_selector_mismatch", 2, None),
        ("insufficient_gpu", 1, "nvidia.com/mig-1g.10gb"),
    ]


def test_it_reads_the_old_wouldnt_fit_wording():
    # https://github.com/kubernetes/autoscaler/issues/2506 (EKS, CA 1.1x)
    p = parse_message(
        "pod didn't trigger scale-up (it wouldn't fit if a new node is added): 6 Insufficient nvidia.com/gpu"
    )
    assert [(r.code, r.count, r.resource) for r in p.reasons] == [("insufficient_gpu", 6, "nvidia.com/gpu")]
    # https://github.com/kubernetes/autoscaler/issues/3268: the old name of max node group size
    p = parse_message(
        "pod didn't trigger scale-up (it wouldn't fit if a new node is added): 1 max limit reached"
    )
    assert codes(p) == [("max_node_group_size", 1)]


def test_it_reads_backoff_and_taints_with_their_inner_commas():
    # https://github.com/2i2c-org/infrastructure/issues/2185 (GKE); BackoffReason in kubernetes/autoscaler
    # cluster-autoscaler/core/scaleup/orchestrator/skippedreasons.go
    p = parse_message(
        "pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had taint "
        "{k8s.dask.org_dedicated: worker}, that the pod didn't tolerate, 1 in backoff after failed scale-up"
    )
    assert codes(p) == [("node_selector_mismatch", 1), ("untolerated_taint", 1), ("scale_up_backoff", 1)]
    assert p.reasons[1].taint == {"key": "k8s.dask.org_dedicated", "value": "worker"}
    assert said_codes(p) == {C.NODE_SELECTOR_MISMATCH, C.UNTOLERATED_TAINT}


def test_it_reads_a_not_trigger_scale_up_without_reasons():
    # https://github.com/kubernetes/autoscaler/pull/3855 (CA 1.18.1 log)
    p = parse_message("pod didn't trigger scale-up (it wouldn't fit if a new node is added)")
    assert (p.source, p.reasons) == ("cluster-autoscaler", [])
    assert "would not fit on a new node" in p.summary


def test_it_reads_a_triggered_scale_up():
    # kubernetes/autoscaler cluster-autoscaler/processors/status/eventing_scale_up_processor.go ("pod triggered
    # scale-up: %v", groups "{name from->to (max: n)}"), as quoted in https://github.com/2i2c-org/infrastructure/issues/2185
    p = parse_message(
        "pod triggered scale-up: [{eks-my-node-group-ecc5b3d1-f911-10e7-508d-0f2a93f8606c 0->1 (max: 50)}]"
    )
    assert (p.source, codes(p)) == ("cluster-autoscaler", [("scale_up_triggered", 1)])
    assert "0->1 (max 50)" in p.summary
    assert said_codes(p) == set()


#
# Volcano
#
def test_it_reads_volcano_fit_errors():
    # volcano-sh/volcano pkg/scheduler/api/unschedule_info.go FitErrors.Error(): "0/%v nodes are unavailable: %v."
    p = parse_message("0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu.")
    assert (p.source, p.total_nodes, p.cause, p.resource) == (
        "volcano",
        4,
        "insufficient_capacity",
        "nvidia.com/gpu",
    )
    assert codes(p) == [("insufficient_gpu", 4)]
    assert C.GPU_CAPACITY_SHORTAGE in said_codes(p)


def test_it_keeps_an_unknown_volcano_reason_as_other():
    # https://github.com/volcano-sh/volcano/issues/4511
    p = parse_message("0/1 nodes are unavailable: 1 hami-vgpuDeviceSharing error.")
    assert (p.source, p.cause, codes(p)) == ("volcano", "other", [("other", 1)])


def test_it_reads_a_volcano_task_fit_error():
    # https://github.com/volcano-sh/volcano/issues/474 (scheduler log); NodeResourceFitFailed in unschedule_info.go
    p = parse_message(
        "task default/lm-mpi-job-mpiworker-0 on node p40-3 fit failed: node(s) resource fit failed"
    )
    assert (p.cause, codes(p)) == ("insufficient_capacity", [("insufficient_other_resource", 1)])


def test_it_reads_the_volcano_gang_condition():
    # https://github.com/volcano-sh/volcano/issues/2416
    p = parse_message(
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Undetermined"
    )
    assert (p.source, p.cause) == ("volcano", "gang_unschedulable")
    assert p.numbers == {
        "tasks_unschedulable": 1,
        "tasks": 1,
        "tasks_pending": 1,
        "min_available": 1,
        "pending_undetermined": 1,
    }
    # https://github.com/volcano-sh/volcano/issues/2462
    p = parse_message("12/8 tasks in gang unschedulable: pod group is not ready, 20 minAvailable, 8 Running")
    assert (p.numbers["min_available"], p.numbers["tasks_running"]) == (20, 8)


def test_it_reads_the_volcano_gang_origin_reason():
    # Format: volcano-sh/volcano pkg/scheduler/api/job_info.go JobInfo.FitError() ("... . Origin reason is %v: %v")
    p = parse_message(
        "3/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; Pending: 3 Unschedulable, "
        "1 Schedulable. Origin reason is mpi-worker-0: 0/4 nodes are unavailable: 1 node(s) had untolerated taint "
        "{dedicated: infer}, 3 Insufficient nvidia.com/gpu."
    )
    assert (p.cause, p.total_nodes, p.resource) == ("insufficient_capacity", 4, "nvidia.com/gpu")
    assert codes(p) == [("untolerated_taint", 1), ("insufficient_gpu", 3)]
    assert "mpi-worker-0" in p.summary


def test_it_reads_volcano_enqueue_rejections():
    # https://github.com/volcano-sh/volcano/issues/4479 (PodGroup events, both)
    p = parse_message("queue resource quota insufficient")
    assert (p.source, p.cause, p.resource) == ("volcano", "quota_exhausted", None)
    assert C.PROJECT_QUOTA_EXHAUSTED in said_codes(p)
    p = parse_message("0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable")
    assert p.cause == "gang_unschedulable" and "no pods yet" in p.summary
    # volcano-sh/volcano pkg/scheduler/plugins/proportion/proportion.go + util.FormatResourceNames (2024+)
    p = parse_message("queue resource quota insufficient: insufficient nvidia.com/gpu, insufficient cpu")
    assert [r.resource for r in p.reasons] == ["nvidia.com/gpu", "cpu"]
    # volcano-sh/volcano pkg/scheduler/plugins/overcommit/overcommit.go
    p = parse_message("resource in cluster is overused: overused nvidia.com/gpu")
    assert (p.cause, p.resource) == ("insufficient_capacity", "nvidia.com/gpu")


def test_it_reads_the_volcano_job_controller_copy_of_the_gang_condition():
    # https://github.com/volcano-sh/volcano/issues/3198 (vc-controller-manager PodGroupPending event)
    p = parse_message(
        "PodGroup default:dlp-stage-ecu-test6 unschedule,reason: 1/0 tasks in gang unschedulable: pod group is not ready, "
        "1 minAvailable"
    )
    assert (p.source, p.cause, p.numbers["tasks"]) == ("volcano", "gang_unschedulable", 0)


#
# HAMi
#
def test_it_reads_hami_reasons_inside_a_kube_scheduler_message():
    # https://github.com/Project-HAMi/HAMi/issues/1527: "NodeUnfitPod" names no mechanism; "node unregistered" is
    # HAMi's (pkg/scheduler/scheduler.go getNodesUsage) for a node whose devices it does not know
    p = parse_message(
        "0/4 nodes are available: 1 NodeUnfitPod, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, "
        "2 node unregistered. preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, "
        "3 No preemption victims found for incoming pod.."
    )
    assert codes(p) == [("other", 1), ("node_not_ready", 1), ("gpu_unavailable", 2)]
    # https://github.com/Project-HAMi/HAMi/issues/75 (an old build's typo)
    p = parse_message(
        "0/10 nodes are available: 1 node unregisterd, 6 node(s) didn't match Pod's node affinity/selector."
    )
    assert codes(p) == [("gpu_unavailable", 1), ("node_selector_mismatch", 6)]


def test_it_reads_hami_filtering_failed_events():
    # Project-HAMi/HAMi pkg/scheduler/scheduler.go Filter: fmt.Errorf("no available node, %d nodes do not meet", ...)
    p = parse_message("no available node, 3 nodes do not meet")
    assert (p.source, p.total_nodes, codes(p)) == ("hami", 3, [("other", 3)])
    # Project-HAMi/HAMi test/utils/config.go ErrMessageFilteringFailed (older builds)
    assert parse_message("no available node, all node scores do not meet").source == "hami"
    # https://github.com/Project-HAMi/HAMi/issues/1332 and pkg/scheduler/score.go recordFilteringFailures ("%d nodes %s(%s)")
    p = parse_message("3 nodes failed: CardInsufficientMemory (node2,node3,node5)")
    assert p.source == "unknown", "the proposal's draft wording was never shipped; only the real one is read"
    p = parse_message("2 nodes CardInsufficientMemory(node-a,node-b)")
    assert [(r.code, r.count, r.resource) for r in p.reasons] == [("insufficient_gpu", 2, "gpu-memory")]
    # the same format with a UUID pin (nvidia.com/use-gpuuuid) excluding the node's card
    p = parse_message("1 nodes CardUuidMismatch(gpu-node-b)")
    assert codes(p) == [("device_mismatch", 1)]
    assert said_codes(p) == set()


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        # Project-HAMi/HAMi pkg/device/common/common.go reason constants
        ("CardInsufficientMemory", "insufficient_gpu"),
        ("CardInsufficientCore", "insufficient_gpu"),
        ("NumaNotFit", "insufficient_gpu"),
        ("NodeInsufficientDevice", "insufficient_gpu"),
        ("CardTypeMismatch", "device_mismatch"),
        ("CardUuidMismatch", "device_mismatch"),
        ("CardNotHealth", "gpu_unavailable"),
        ("ResourceQuotaNotFit", "resource_quota"),
    ],
)
def test_it_classifies_each_hami_reason_by_mechanism(reason, code):
    # common.GenReason per-node form "%d/%d %s" (cards with the reason / cards on the node)
    p = parse_message(f"1/4 {reason}")
    assert (p.source, p.reasons[0].code) == ("hami", code)


#
# Kueue lifecycle
#
def test_it_reads_the_pods_ready_timeout_eviction():
    # kubernetes-sigs/kueue pkg/controller/core/workload_controller.go: fmt.Sprintf("Exceeded the PodsReady timeout %s", req)
    p = parse_message("Exceeded the PodsReady timeout default/job-sample-a1b2c", reason="PodsReadyTimeout")
    assert (p.source, p.cause) == ("kueue", "pods_ready_timeout")
    assert (
        parse_message("Exceeded the PodsReady timeout default/job-sample-a1b2c").cause == "pods_ready_timeout"
    )
    # kubernetes-sigs/kueue pkg/controller/jobframework/reconciler.go notReadyMsg (PodsReady=False)
    assert parse_message("Not all pods are ready or succeeded").cause == "waiting_for_pods_ready"


def test_it_reads_deactivation_by_the_re_queuing_limit():
    # kubernetes-sigs/kueue workload_controller.go: "The workload is deactivated" + " due to " + the DeactivationTarget
    # message "exceeding the maximum number of re-queuing retries" (requeuingStrategy.backoffLimitCount)
    p = parse_message("The workload is deactivated due to exceeding the maximum number of re-queuing retries")
    assert (p.cause, p.mechanism) == ("deactivated", "requeuing_limit_exceeded")
    assert p.to_dict()["mechanism"] == "requeuing_limit_exceeded"
    assert "spec.active" in p.summary
    # the DeactivationTarget condition alone, reason RequeuingLimitExceeded
    p = parse_message("exceeding the maximum number of re-queuing retries", reason="RequeuingLimitExceeded")
    assert (p.cause, p.mechanism) == ("deactivated", "requeuing_limit_exceeded")


def test_it_reads_deactivation_by_the_maximum_execution_time():
    # kubernetes-sigs/kueue workload_controller.go: SetDeactivationTarget(..., "exceeding the maximum execution time")
    # and the event "The maximum execution time (%ds) exceeded"
    p = parse_message("The workload is deactivated due to exceeding the maximum execution time")
    assert (p.cause, p.mechanism) == ("deactivated", "maximum_execution_time_exceeded")
    p = parse_message("The maximum execution time (600s) exceeded", reason="MaximumExecutionTimeExceeded")
    assert (p.cause, p.numbers["max_execution_seconds"]) == ("deactivated", 600)


def test_it_reads_deactivation_by_a_rejected_admission_check():
    # kubernetes-sigs/kueue workload_controller.go buildAdmissionChecksMessage (2025+): "%s in %s state: %s"
    p = parse_message(
        'The workload is deactivated due to AdmissionCheck in Rejected state: "prov-req" (quota exceeded)'
    )
    assert (p.cause, p.mechanism, p.numbers["admission_checks"]) == (
        "deactivated",
        "admission_check_rejected",
        1,
    )
    # kubernetes-sigs/kueue@43b7374764 (2024): "Admission check(s): %v, were rejected"
    p = parse_message("The workload is deactivated due to Admission check(s): [prov-req], were rejected")
    assert (p.cause, p.mechanism) == ("deactivated", "admission_check_rejected")
    # a person set spec.active=false: no mechanism is claimed
    p = parse_message("The workload is deactivated", reason="Deactivated")
    assert (p.cause, p.mechanism) == ("deactivated", None)
    assert "mechanism" not in p.to_dict()


def test_it_reads_admission_checks_on_retry_and_failed():
    # kubernetes-sigs/kueue workload_controller.go: fmt.Sprintf("Evicted due to %s", buildAdmissionChecksMessage(...Retry))
    p = parse_message(
        'Evicted due to AdmissionChecks in Retry state: "check-a"; "check-b" (capacity not available)'
    )
    assert (p.cause, p.mechanism) == ("admission_check", "admission_check_retry")
    assert "check-a, check-b" in p.summary
    # kubernetes-sigs/kueue pkg/scheduler/scheduler.go nominate(): inadmissibleMsg
    assert parse_message("The workload has failed admission checks").cause == "admission_check"


def test_it_reads_every_queue_state_wording():
    # kubernetes-sigs/kueue workload_controller.go (2023–2024 log lines) and the eviction message "The ClusterQueue is stopped"
    for text in (
        "Workload is inadmissible because ClusterQueue is inactive",
        "Workload is inadmissible because of missing LocalQueue",
        "The ClusterQueue is stopped",
        "LocalQueue team-a doesn't exist",
        "ClusterQueue gpu-cq not found",
    ):
        p = parse_message(text)
        assert (p.source, p.cause) == ("kueue", "queue_missing_or_inactive"), text


@pytest.mark.parametrize(
    ("why", "mechanism"),
    [
        # kubernetes-sigs/kueue pkg/scheduler/preemption/preemption.go humanReadablePreemptionReasons
        ("prioritization in the ClusterQueue", "in_cluster_queue"),
        ("reclamation within the cohort", "cohort_reclamation"),
        ("Fair Sharing within the cohort", "fair_sharing"),
        ("reclamation within the cohort while borrowing", "cohort_reclaim_while_borrowing"),
    ],
)
def test_it_names_the_kueue_preemption_mechanism(why, mechanism):
    p = parse_message(
        f"Preempted to accommodate a workload (UID: wl-in, JobUID: job-in) due to {why}; preemptor path: /r/c/q; "
        "preemptee path: /r/c/q2"
    )
    assert (p.cause, p.mechanism) == ("preempted", mechanism)
    assert why in p.summary


#
# Honest unknowns, bounded work
#
@pytest.mark.parametrize(
    "text",
    [
        "the workload was deactivated yesterday by the on-call",
        "we hit an admission check in the release process",
        "pod triggered an alert",
        "2 nodes were upgraded (node-a,node-b)",
        "tasks in gang",
    ],
)
def test_it_does_not_turn_look_alike_prose_into_a_finding(text):
    assert parse_message(text).source == "unknown"


@pytest.mark.parametrize(
    "text",
    [
        "fit failure on node (" * 5000,
        "pod didn't trigger scale-up: " + "1 max node group size reached, " * 3000,
        "1/1 tasks in gang unschedulable: pod group is not ready" + ", 1 Pending" * 5000,
        "no available node, " + "9" * 20000 + " nodes do not meet",
        "The workload is deactivated due to " + "x" * 50000,
        "queue resource quota insufficient: " + "insufficient a, " * 5000,
        "0/1 nodes are unavailable: " + "{" * 20000,
        "Preempted to accommodate a workload (UID: " + "(" * 20000,
        "9" * 16000 + "/1 nodes are available: 1 Insufficient cpu.",
        "1/" * 8000 + " tasks in gang unschedulable",
        "0/3 nodes are available: " + "1" * 15000 + " Insufficient cpu.",
        "1" * 16000,
    ],
)
def test_it_bounds_hostile_input(text):
    start = time.perf_counter()
    d = parse_message(text).to_dict()
    assert time.perf_counter() - start < 2.0
    assert len(parse_message(text).text) <= MAX_TEXT
    assert d["summary"]
