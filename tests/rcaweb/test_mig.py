"""rcaweb.mig: what a MIG instance counts in a queue, the one reading the inventory and the diagnosis share."""

from __future__ import annotations

from rcaweb.mig import mig_units


def test_a_profile_counts_its_compute_slices() -> None:
    assert mig_units("1g.10gb") == 1
    assert mig_units("3g.40gb") == 3
    assert mig_units("7g.80gb") == 7


def test_an_unreadable_profile_counts_one() -> None:
    assert mig_units("") == 1
    assert mig_units("mixed") == 1
