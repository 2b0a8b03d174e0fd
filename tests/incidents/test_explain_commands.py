"""explain_message and explain_xid: thin commands that print the pure functions' answers."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


def _run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_a_scheduler_message_as_json():
    out, _ = _run(
        "explain_message",
        "0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6 node(s) had untolerated taint {nvidia.com/gpu: true}.",
        "--json",
    )
    d = json.loads(out)
    assert d["source"] == "kube-scheduler" and d["total_nodes"] == 8
    assert [(r["code"], r["count"]) for r in d["reasons"]] == [
        ("insufficient_gpu", 2),
        ("untolerated_taint", 6),
    ]


def test_it_prints_a_readable_line_without_json():
    out, _ = _run("explain_message", "ClusterQueue gpu-cq is inactive")
    assert out.strip() == "[kueue] Kueue admits nothing here: ClusterQueue gpu-cq is inactive."


def test_it_passes_the_reason_hint():
    out, _ = _run("explain_message", "a message from a newer Kueue", "--reason", "ExceedsMaxQuota", "--json")
    d = json.loads(out)
    assert (d["source"], d["cause"]) == ("kueue", "exceeds_max_capacity")


def test_it_says_unknown_for_other_text():
    out, _ = _run("explain_message", "hello world", "--json")
    assert json.loads(out)["source"] == "unknown"


def test_it_rejects_an_empty_message():
    with pytest.raises(CommandError, match="empty"):
        _run("explain_message", "   ")


def test_it_explains_an_xid_as_json():
    out, err = _run("explain_xid", "79", "--json")
    d = json.loads(out)
    assert {"xid", "title", "likely_cause", "action", "drain_node"} <= set(d)
    assert (d["xid"], d["drain_node"], d["likely_cause"]) == (79, True, "hardware")
    assert err == ""


def test_it_explains_an_xid_in_one_line():
    out, _ = _run("explain_xid", "13")
    assert out.startswith("Xid 13: Graphics Engine Exception (likely cause: application; no drain needed).")


def test_it_answers_an_unknown_xid_and_says_so():
    out, err = _run("explain_xid", "9999", "--json")
    d = json.loads(out)
    assert (d["title"], d["likely_cause"], d["drain_node"], d["known"]) == (
        "unknown Xid",
        "unknown",
        False,
        False,
    )
    assert "not in NVIDIA's Xid catalog" in err


def test_it_rejects_a_non_numeric_xid():
    with pytest.raises(CommandError, match="non-negative integer"):
        _run("explain_xid", "seventy-nine")
