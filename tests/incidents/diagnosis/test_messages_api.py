"""parse_message's contract: shape, never raising, unknown stays unknown; the codes module; purity."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from incidents.diagnosis import codes
from incidents.diagnosis.messages import MAX_TEXT, parse_message

FRAGMENTS = [
    "0/8 nodes are available: ",
    "2 Insufficient nvidia.com/gpu",
    ", ",
    "6 node(s) had untolerated taint {nvidia.com/gpu: true}",
    ". preemption: ",
    "No preemption victims found for incoming pod",
    "couldn't assign flavors to pod set main: ",
    "insufficient unused quota for cpu in flavor default, 8 more needed",
    "Non-preemptible workload is over quota. ",
    "Workload requested ",
    " GPUs, but q quota is ",
    "quota has reached the allowable limit of GPUs. Limit is ",
    "Queue '",
    "' does not exist",
    "(",
    ")",
    "{",
    "}",
    "..",
    "\n",
    "ClusterQueue ",
    " is inactive",
    "Max GPU resources available in a single node in the ",
    " node-pool is topped at ",
    "pod didn't trigger scale-up: ",
    "max node group size reached",
    " tasks in gang unschedulable: pod group is not ready",
    "; Pending: ",
    " nodes are unavailable: ",
    "no available node, ",
    " nodes CardInsufficientMemory(",
    "fit failure on node (",
    "The workload is deactivated due to ",
    "Exceeded the PodsReady timeout ",
    "AdmissionCheck in Rejected state: ",
]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_it_never_raises_on_arbitrary_text(text):
    d = parse_message(text).to_dict()
    assert d["source"] in (
        "kube-scheduler",
        "kueue",
        "kai",
        "volcano",
        "hami",
        "cluster-autoscaler",
        "unknown",
    )
    json.dumps(d)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(FRAGMENTS), st.integers(0, 99).map(str), st.text(max_size=8)), max_size=14
    )
)
def test_it_never_raises_on_scheduler_like_fragments(parts):
    d = parse_message("".join(parts)).to_dict()
    json.dumps(d)
    for r in d["reasons"]:
        assert set(r) >= {"code", "count", "resource", "text"}
        assert r["count"] is None or r["count"] >= 0


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Zs")), max_size=200))
def test_it_reports_plain_words_as_unknown(text):
    # Kueue's kind names, written as Kueue writes them, are its words (the test below).
    assume("ClusterQueue" not in text and "LocalQueue" not in text)
    d = parse_message(text).to_dict()
    assert d["source"] == "unknown"
    assert d["reasons"] == [] and d["total_nodes"] is None and d["preemption"] is None


def test_it_reports_empty_and_non_string_input_as_unknown():
    assert parse_message("").source == "unknown"
    assert parse_message("   ").source == "unknown"
    assert parse_message(None).source == "unknown"  # type: ignore[arg-type]


def test_it_gives_exactly_the_documented_keys():
    kube = parse_message("0/1 nodes are available: 1 Insufficient cpu.").to_dict()
    assert list(kube) == ["source", "total_nodes", "reasons", "preemption", "summary"]
    queue = parse_message("ClusterQueue cq is inactive").to_dict()
    assert list(queue)[:8] == [
        "source",
        "total_nodes",
        "reasons",
        "preemption",
        "summary",
        "cause",
        "resource",
        "needed",
    ]


def test_it_bounds_very_long_input():
    text = (
        "0/3 nodes are available: "
        + ", ".join(f"1 node(s) had untolerated taint {{k{i}: v}}" for i in range(5000))
        + "."
    )
    p = parse_message(text)
    assert p.source == "kube-scheduler"
    assert len(p.text) <= MAX_TEXT


def test_it_keeps_every_design_code_as_a_constant():
    expected = {
        "gpu_capacity_shortage", "gpu_fragmentation", "untolerated_taint", "node_selector_mismatch",
        "project_quota_exhausted", "queue_priority", "request_size_changed", "gpu_node_unavailable",
        "gpu_xid_fault", "gpu_ecc_errors", "gpu_missing", "device_plugin_unhealthy", "gpu_thermal_throttling",
        "nvlink_errors", "crashloop_config_error", "oom_killed", "gpu_oom", "image_pull_error", "preempted",
        "idle_gpu_allocation", "over_requested", "recent_change",
    }  # fmt: skip
    assert expected <= set(codes.ALL_CODES)
    assert len(codes.ALL_CODES) == len(set(codes.ALL_CODES))
    assert codes.PROJECT_QUOTA_EXHAUSTED == "project_quota_exhausted"


def test_it_imports_without_django():
    script = (
        "import sys; import incidents.diagnosis.messages, incidents.diagnosis.xid, incidents.diagnosis.codes; "
        "bad = [m for m in sys.modules if m.startswith(('django', 'collectors'))]; print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_kueue_kind_names_mark_a_message_only_as_kueue_writes_them():
    """Kueue names its kinds ClusterQueue and LocalQueue; an object named after them (a pod "localqueue-bench")
    or the word in capitals does not make a message Kueue's (found by the property above: "CLUSTERQUEUE")."""
    assert parse_message("ClusterQueue team-a is inactive").to_dict()["source"] == "kueue"
    for text in ("workload localqueue-bench is pending", "CLUSTERQUEUE", "clusterqueue"):
        assert parse_message(text).to_dict()["source"] == "unknown", text
