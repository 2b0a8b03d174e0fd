"""The Xid catalog: every documented code explained; drain only where NVIDIA says the GPU is lost."""

from __future__ import annotations

import pytest

from incidents.diagnosis.xid import ACTIONS, CAUSES, XID_CATALOG, explain_xid

# Xids NVIDIA documents as application-side: restart the application, keep the node.
APPLICATION_SIDE = (13, 31, 43, 45)
# Fatal to the GPU in NVIDIA's catalog: reset, reboot, hardware workflow.
DRAIN = (48, 64, 74, 79, 95, 119, 120, 140, 143, 144)


def test_it_covers_nvidias_catalog_from_1_to_162():
    assert set(range(1, 126)) | set(range(126, 163)) == set(XID_CATALOG)


@pytest.mark.parametrize("code", sorted(XID_CATALOG))
def test_it_explains_every_documented_code(code):
    d = explain_xid(code)
    assert d["known"] is True and d["xid"] == code
    assert d["title"] and d["action"]
    assert d["likely_cause"] in CAUSES
    assert isinstance(d["drain_node"], bool)
    assert d["resolution"] in ACTIONS


@pytest.mark.parametrize("code", APPLICATION_SIDE)
def test_it_does_not_drain_for_application_side_xids(code):
    d = explain_xid(code)
    assert d["drain_node"] is False
    assert d["likely_cause"] == "application"


@pytest.mark.parametrize("code", DRAIN)
def test_it_drains_for_xids_fatal_to_the_gpu(code):
    assert explain_xid(code)["drain_node"] is True


def test_it_follows_nvidias_buckets_for_the_famous_ones():
    assert explain_xid(79)["resolution"] == "RESTART_BM"
    assert explain_xid(48)["resolution"] == "WORKFLOW_XID_48"
    assert explain_xid(74)["resolution"] == "WORKFLOW_NVLINK_ERR"
    assert explain_xid(95)["resolution"] == "RESET_GPU"
    assert explain_xid(94)["resolution"] == "RESTART_APP"
    assert explain_xid(94)["drain_node"] is False  # contained ECC: only the application is affected
    assert explain_xid(92)["drain_node"] is False  # corrected-error rate: watch, do not drain
    assert explain_xid(63)["drain_node"] is False and explain_xid(64)["drain_node"] is True


def test_it_names_the_likely_cause_of_hardware_faults():
    for code in (48, 63, 64, 74, 79, 92, 94, 95):
        assert explain_xid(code)["likely_cause"] == "hardware", code


def test_it_answers_an_unknown_xid_without_guessing():
    d = explain_xid(999)
    assert d["known"] is False
    assert (d["title"], d["likely_cause"], d["drain_node"]) == ("unknown Xid", "unknown", False)


def test_it_accepts_a_numeric_string():
    assert explain_xid(" 79 ")["title"] == "GPU has fallen off the bus"


@pytest.mark.parametrize("bad", ["abc", "-1", "", None, "7.5"])
def test_it_rejects_a_code_that_is_not_a_non_negative_integer(bad):
    with pytest.raises(ValueError, match="Xid must be a non-negative integer"):
        explain_xid(bad)
