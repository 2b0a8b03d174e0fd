"""kube-scheduler FailedScheduling messages: every recorded message, then one test per format.

Fixture: fixtures/scheduler_messages.json, each message with its origin.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from incidents.diagnosis.messages import parse_message

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "scheduler_messages.json").read_text())
KUBE = FIXTURES["kube_scheduler"]


def _by_code(reasons: list[dict]) -> dict[str, int | None]:
    """code -> summed count (None when the message gave no count)."""
    out: dict[str, int | None] = defaultdict(int)
    for r in reasons:
        if r["count"] is None:
            out[r["code"]] = None
        elif out[r["code"]] is not None:
            out[r["code"]] += r["count"]
    return dict(out)


def test_it_has_at_least_forty_kube_scheduler_messages_with_origins():
    assert len(KUBE) >= 40
    assert all(m["origin"] and m["format"] for m in KUBE)
    assert len({m["text"] for m in KUBE}) == len(KUBE)


@pytest.mark.parametrize("case", KUBE, ids=[f"{i:02d}-{m['format']}" for i, m in enumerate(KUBE)])
def test_it_reads_each_recorded_message(case):
    exp = case["expected"]
    d = parse_message(case["text"]).to_dict()
    assert d["source"] == "kube-scheduler"
    assert d["total_nodes"] == exp["total_nodes"]
    assert _by_code(d["reasons"]) == exp["reasons"]
    if exp["preemption"] is None:
        assert d["preemption"] is None
    else:
        assert _by_code(d["preemption"]["reasons"]) == exp["preemption"]
        assert d["preemption"]["victims_found"] is False
    for taint in exp.get("taints", []):
        assert taint in [r.get("taint") for r in d["reasons"]]
    for resource in exp.get("resources", []):
        assert resource in [r["resource"] for r in d["reasons"]]
    assert set(d) == {"source", "total_nodes", "reasons", "preemption", "summary"}
    assert d["summary"].endswith(".")


#
# One test per historical format
#
def test_it_reads_the_1_5_fit_failure_summary():
    p = parse_message(
        "pod (web-1) failed to fit in any node\nfit failure summary on nodes : Insufficient cpu (2), PodToleratesNodeTaints (1)"
    )
    assert [(r.code, r.count) for r in p.reasons] == [("insufficient_cpu", 2), ("untolerated_taint", 1)]
    assert p.total_nodes is None


def test_it_reads_the_1_7_predicates_list():
    p = parse_message(
        "No nodes are available that match all of the following predicates:: Insufficient nvidia.com/gpu (4), MatchNodeSelector (2)."
    )
    assert [(r.code, r.count, r.resource) for r in p.reasons] == [
        ("insufficient_gpu", 4, "nvidia.com/gpu"),
        ("node_selector_mismatch", 2, None),
    ]


def test_it_reads_1_9_counted_predicate_names():
    p = parse_message("0/3 nodes are available: 1 NodeNotReady, 2 PodToleratesNodeTaints.")
    assert [(r.code, r.count) for r in p.reasons] == [("node_not_ready", 1), ("untolerated_taint", 2)]
    assert p.total_nodes == 3


def test_it_reads_the_1_12_taint_sentence_without_key():
    p = parse_message("0/3 nodes are available: 3 node(s) had taints that the pod didn't tolerate.")
    assert p.reasons[0].code == "untolerated_taint" and p.reasons[0].taint is None


def test_it_reads_the_1_18_taint_wording_with_its_inner_comma():
    p = parse_message(
        "0/3 nodes are available: 1 node(s) had taint {nvidia.com/gpu: present}, that the pod didn't tolerate, 2 Insufficient cpu."
    )
    assert [(r.code, r.count) for r in p.reasons] == [("untolerated_taint", 1), ("insufficient_cpu", 2)]
    assert p.reasons[0].taint == {"key": "nvidia.com/gpu", "value": "present"}


def test_it_reads_the_1_24_format_with_preemption_tail_and_double_period():
    p = parse_message(
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.."
    )
    assert p.total_nodes == 2 and p.preemption is not None
    assert [(r.code, r.count) for r in p.preemption.reasons] == [("no_victims", 2)]
    assert p.preemption.total_nodes == 2


def test_it_reads_the_1_26_untolerated_taint_with_key_and_value():
    p = parse_message("0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu-team}.")
    assert p.reasons[0].taint == {"key": "dedicated", "value": "gpu-team"}


def test_it_reads_the_1_31_aggregated_untolerated_taints():
    p = parse_message("0/5 nodes are available: 5 node(s) had untolerated taint(s).")
    assert [(r.code, r.count, r.taint) for r in p.reasons] == [("untolerated_taint", 5, None)]


def test_it_reads_a_prefilter_message_as_applying_to_every_node():
    p = parse_message(
        "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )
    assert [(r.code, r.count) for r in p.reasons] == [("volume_binding", 4)]


def test_it_reads_the_dra_postfilter_message_before_the_tail():
    p = parse_message(
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert [(r.code, r.count) for r in p.reasons] == [("insufficient_cpu", 2)]
    assert [r.code for r in p.preemption.reasons] == ["no_victims"]


def test_it_reads_a_kubectl_wrapped_message():
    wrapped = "0/3 nodes are available: 1 node(s) had taint {node-role.kubernetes.io/master: },\n  that the pod didn't tolerate, 2 Insufficient memory."
    p = parse_message(wrapped)
    assert [(r.code, r.count) for r in p.reasons] == [("untolerated_taint", 1), ("insufficient_memory", 2)]


def test_it_reads_a_dra_claim_allocation_failure_as_a_resource_shortage():
    p = parse_message(
        "0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert [(r.code, r.count, r.resource) for r in p.reasons] == [("insufficient_other_resource", 2, None)]
    assert "lack free resources (cannot allocate all claims)" in p.summary


def test_it_reads_no_nodes_available():
    p = parse_message("no nodes available to schedule pods")
    assert p.total_nodes == 0 and p.reasons[0].code == "no_nodes"


#
# Mechanisms rather than strings
#
@pytest.mark.parametrize(
    ("resource", "code"),
    [
        ("nvidia.com/gpu", "insufficient_gpu"),
        ("amd.com/gpu", "insufficient_gpu"),
        ("gpu.intel.com/i915", "insufficient_gpu"),
        ("nvidia.com/mig-3g.40gb", "insufficient_gpu"),
        ("google.com/tpu", "insufficient_gpu"),
        ("habana.ai/gaudi", "insufficient_gpu"),
        ("cpu", "insufficient_cpu"),
        ("memory", "insufficient_memory"),
        ("ephemeral-storage", "insufficient_other_resource"),
        ("rdma/hca_shared_devices_a", "insufficient_other_resource"),
        ("hugepages-1Gi", "insufficient_other_resource"),
        ("pods", "too_many_pods"),
    ],
)
def test_it_classifies_any_resource_name_by_kind(resource, code):
    p = parse_message(f"0/3 nodes are available: 3 Insufficient {resource}.")
    assert (p.reasons[0].code, p.reasons[0].resource) == (code, resource)


@pytest.mark.parametrize(
    ("taint", "code"),
    [
        ("node.kubernetes.io/not-ready", "node_not_ready"),
        ("node.kubernetes.io/unreachable", "node_not_ready"),
        ("node.kubernetes.io/network-unavailable", "node_not_ready"),
        ("node.kubernetes.io/unschedulable", "unschedulable_node"),
        ("nvidia.com/gpu", "untolerated_taint"),
        ("example.com/maintenance", "untolerated_taint"),
    ],
)
def test_it_treats_node_health_taints_as_node_state(taint, code):
    p = parse_message(f"0/2 nodes are available: 2 node(s) had untolerated taint {{{taint}: }}.")
    assert p.reasons[0].code == code
    assert p.reasons[0].taint == {"key": taint, "value": ""}


def test_it_keeps_an_unknown_reason_as_other_with_its_text():
    p = parse_message(
        "0/3 nodes are available: 2 node(s) exceeded the flux capacitor limit, 1 Insufficient cpu."
    )
    other = [r for r in p.reasons if r.code == "other"]
    assert other and other[0].text == "node(s) exceeded the flux capacitor limit" and other[0].count == 2


#
# Summary
#
def test_it_summarizes_the_dominant_blocker_first_with_numbers():
    p = parse_message(
        "0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6 node(s) had untolerated taint {nvidia.com/gpu: true}. "
        "preemption: 0/8 nodes are available: 2 No preemption victims found for incoming pod, 6 Preemption is not helpful for scheduling."
    )
    assert p.summary.startswith(
        "8 nodes considered: 6 have a taint the pod does not tolerate (nvidia.com/gpu=true), 2 lack free nvidia.com/gpu"
    )
    assert "preemption cannot help" in p.summary


def test_it_summarizes_a_single_node_in_the_singular():
    p = parse_message("0/1 nodes are available: 1 node(s) were unschedulable.")
    assert p.summary == "1 node considered: 1 is cordoned (unschedulable)."
