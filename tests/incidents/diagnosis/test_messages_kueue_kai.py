"""Kueue Workload and KAI PodGroup messages: recorded messages, then one test per format."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from incidents.diagnosis.messages import parse_message

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "scheduler_messages.json").read_text())
QUEUE = FIXTURES["queue"]
UNKNOWN = FIXTURES["unknown"]


def test_it_has_at_least_fifteen_kueue_and_kai_messages_with_origins():
    assert len(QUEUE) >= 15
    assert {m["expected"]["source"] for m in QUEUE} == {"kueue", "kai"}
    assert all(m["origin"] for m in QUEUE)


@pytest.mark.parametrize("case", QUEUE, ids=[f"{i:02d}-{m['format']}" for i, m in enumerate(QUEUE)])
def test_it_reads_each_recorded_queue_message(case):
    exp = case["expected"]
    d = parse_message(case["text"], reason=case.get("reason")).to_dict()
    assert d["source"] == exp["source"]
    assert d["cause"] == exp["cause"]
    assert d["resource"] == exp["resource"]
    assert d["needed"] == exp["needed"]
    if "queue" in exp:
        assert d["queue"] == exp["queue"]
    for key, value in exp.get("numbers", {}).items():
        assert d["numbers"][key] == value
    if "codes" in exp:
        counts: dict[str, int] = defaultdict(int)
        for r in d["reasons"]:
            counts[r["code"]] += r["count"] or 0
        assert dict(counts) == exp["codes"]
    assert {
        "source",
        "total_nodes",
        "reasons",
        "preemption",
        "summary",
        "cause",
        "resource",
        "needed",
    } <= set(d)
    assert d["reasons"], "a recognised message keeps the scheduler's words"
    assert d["summary"]


def test_its_recorded_messages_are_read_the_same_without_a_reason_hint():
    for case in QUEUE:
        with_hint = parse_message(case["text"], reason=case.get("reason")).to_dict()
        without = parse_message(case["text"]).to_dict()
        assert without["source"] == with_hint["source"], case["text"]
        assert without["cause"] == with_hint["cause"], case["text"]


@pytest.mark.parametrize("case", UNKNOWN, ids=[m["format"] for m in UNKNOWN])
def test_it_leaves_other_components_messages_unknown(case):
    d = parse_message(case["text"]).to_dict()
    assert d == {
        "source": "unknown",
        "total_nodes": None,
        "reasons": [],
        "preemption": None,
        "summary": d["summary"],
    }
    assert "nothing was inferred" in d["summary"]


#
# Kueue, one test per format
#
def test_it_reads_kueue_2022_more_needed_after_borrowing():
    p = parse_message(
        "Couldn't assign flavors for podSet main: insufficient quota for nvidia.com/gpu flavor a100, 4 more needed after borrowing"
    )
    assert (p.source, p.cause, p.resource, p.needed) == ("kueue", "quota_exhausted", "nvidia.com/gpu", 4)


def test_it_reads_kueue_2022_exceeds_wording_in_clusterqueue():
    p = parse_message(
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu flavor a100 in ClusterQueue"
    )
    assert (p.cause, p.resource, p.needed) == ("exceeds_max_capacity", "nvidia.com/gpu", None)


def test_it_reads_kueue_unused_quota_in_cohort():
    p = parse_message(
        "couldn't assign flavors to pod set main: insufficient unused quota in cohort for cpu flavor default, 2 more needed"
    )
    assert (p.cause, p.resource, p.needed) == ("quota_exhausted", "cpu", 2)


def test_it_reads_kueue_request_above_maximum_capacity():
    p = parse_message(
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default-flavor, request > maximum capacity (24 > 16)"
    )
    assert (p.cause, p.needed) == ("exceeds_max_capacity", 8)
    assert p.numbers == {"requested": 24, "max_capacity": 16}
    assert "24 requested > 16 maximum" in p.summary


def test_it_reads_kueue_previously_considered_podsets():
    p = parse_message(
        "couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in flavor h100, previously considered "
        "podsets requests (16) + current podset request (8) > maximum capacity (16)"
    )
    assert (p.cause, p.needed) == ("exceeds_max_capacity", 8)
    assert p.numbers == {"requested": 8, "max_capacity": 16, "previously_requested": 16}


def test_it_keeps_a_non_integer_quantity_out_of_needed():
    p = parse_message(
        "couldn't assign flavors to pod set main: insufficient unused quota for memory in flavor default, 10Gi more needed"
    )
    assert (p.cause, p.resource, p.needed) == ("quota_exhausted", "memory", None)
    assert "10Gi more needed" in p.reasons[0].text


def test_it_reads_kueue_untolerated_flavor_taint():
    p = parse_message(
        "couldn't assign flavors to pod set main: untolerated taint {spot true NoSchedule <nil>} in flavor spot"
    )
    assert (p.cause, p.reasons[0].flavor) == ("flavor_mismatch", "spot")


def test_it_reads_kueue_flavor_missing_and_resource_not_provided():
    p = parse_message(
        "couldn't assign flavors to pod set main: flavor a100 not found, flavor h100 does not provide resource nvidia.com/gpu"
    )
    assert p.cause == "flavor_mismatch"
    assert [r.flavor for r in p.reasons] == ["a100", "h100"]


def test_it_prefers_waiting_for_preemption_when_kueue_says_so():
    p = parse_message(
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed. Pending the preemption of 3 workload(s)"
    )
    assert (p.cause, p.needed, p.numbers["preemptions_pending"]) == ("waiting_for_preemption", 8, 3)


@pytest.mark.parametrize(
    ("text", "queue"),
    [
        ("ClusterQueue gpu-cq is inactive", "gpu-cq"),
        ("ClusterQueue gpu-cq doesn't exist", "gpu-cq"),
        ("LocalQueue team-a doesn't exist", "team-a"),
        ("LocalQueue team-a is stopped", "team-a"),
        ("ClusterQueue gpu-cq is terminating or missing", "gpu-cq"),
    ],
)
def test_it_reads_kueue_queue_states(text, queue):
    p = parse_message(text)
    assert (p.source, p.cause, p.queue) == ("kueue", "queue_missing_or_inactive", queue)


def test_it_reads_a_kueue_admission_as_admission_not_as_a_blocker():
    p = parse_message("Quota reserved in ClusterQueue gpu-cq, wait time since queued was 3s")
    assert (p.source, p.cause, p.queue) == ("kueue", "other", "gpu-cq")
    assert p.summary.startswith("Kueue admitted the workload")


def test_it_uses_a_granular_kueue_reason_when_the_text_is_new():
    p = parse_message("the workload asks for more than ever fits", reason="ExceedsMaxQuota")
    assert (p.source, p.cause) == ("kueue", "exceeds_max_capacity")
    assert "ExceedsMaxQuota" in p.summary


def test_it_does_not_trust_a_generic_reason_alone():
    assert parse_message("something happened", reason="Pending").source == "unknown"
    assert parse_message("something happened", reason="Preempted").source == "unknown"


#
# KAI, one test per format
#
def test_it_reads_kai_non_preemptible_over_quota_for_cpu():
    p = parse_message(
        "Non-preemptible workload is over quota. Workload requested 4 CPU cores, but research quota is 8 cores, while 6 cores "
        "are already allocated for non-preemptible pods. Use a preemptible workload to go over quota."
    )
    assert (p.source, p.cause, p.resource, p.needed, p.queue) == (
        "kai",
        "quota_exhausted",
        "cpu",
        2,
        "research",
    )


def test_it_reads_kai_non_preemptible_request_larger_than_quota():
    p = parse_message(
        "Non-preemptible workload is over quota. Workload requested 32 GPUs, but vision quota is 16 GPUs, while 0 GPUs are "
        "already allocated for non-preemptible pods. Use a preemptible workload to go over quota."
    )
    assert (p.cause, p.needed) == ("exceeds_max_capacity", 16)


def test_it_reads_a_kai_explanation_list_with_reason_prefix():
    p = parse_message("QueueDoesNotExist: Queue 'nlp' does not exist\n")
    assert (p.source, p.cause, p.queue) == ("kai", "queue_missing_or_inactive", "nlp")


def test_it_reads_kai_no_node_in_node_pool_has_the_resource():
    p = parse_message(
        "The pod a/b requires GPU: 1, CPU: 0 (cores), memory: 0 (GB), pods: 1. No node in the cpu-only node-pool has GPU resources"
    )
    assert (p.cause, p.resource, p.numbers) == (
        "insufficient_capacity",
        "gpu",
        {"requested": 1, "largest_node": 0},
    )


def test_it_reads_kai_gang_not_ready():
    p = parse_message("Job is not ready for scheduling. Waiting for 4 pods, currently 3 exist, 1 are gated")
    assert p.numbers == {"min_member": 4, "pods_exist": 3, "pods_gated": 1}


def test_it_reads_kai_consolidation_as_preemption():
    p = parse_message(
        "Pod ns/p-0 was preempted and rescheduled due to bin packing (resource consolidation) procedure"
    )
    assert (p.source, p.cause) == ("kai", "preempted")


def test_it_reads_kai_fit_errors_under_a_kube_style_header():
    p = parse_message(
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't have enough resources: GPUs."
    )
    assert (p.source, p.total_nodes, p.cause, p.resource) == ("kai", 3, "insufficient_capacity", "gpu")
    assert [(r.code, r.count) for r in p.reasons] == [("node_selector_mismatch", 1), ("insufficient_gpu", 2)]
    assert (
        p.summary
        == "KAI considered 3 nodes: 2 lack free gpu, 1 does not match the pod's node selector/affinity."
    )


def test_it_reads_a_kai_single_node_fit_error():
    p = parse_message(
        "Pod ns/p-0 cannot be scheduled on node gpu-07. reasons: node(s) didn't have enough resources: GPUs. \nnode(s) had untolerated taint {maintenance: true}"
    )
    assert p.source == "kai" and p.cause == "insufficient_capacity"
    assert [(r.code, r.count) for r in p.reasons] == [("insufficient_gpu", 1), ("untolerated_taint", 1)]
