"""A fleet grid cell of a shared or MIG GPU says who holds it, in web.gpu_amounts' words (its title)."""

from __future__ import annotations

from typing import Any

from collectors.models import EntityVersion
from web.console import fleet


def cell(state: dict[str, Any], pod: str = "") -> fleet.Cell:
    c = fleet.Cell(
        version=EntityVersion(state=state),
        index=0,
        state="allocated",
        healthy=True,
        allocated=bool(pod),
        sm=None,
        idle_hours=0.0,
        pod=pod,
    )
    fleet._slices(c, state)
    return c


def test_a_shared_cell_names_its_shares_not_the_reservation_pod() -> None:
    c = cell(
        {
            "model": "NVIDIA L40S",
            "reservation": "runai-reservation/r-1",
            "shares": [
                {"pod": "vision/nb-0", "fraction": 0.5, "memory_mib": 23034},
                {"pod": "serving/embed-0", "fraction": 0.4446, "memory_mib": 20480},
            ],
        },
        pod="runai-reservation/r-1",
    )
    assert c.kind == "shared" and c.units == 0.9446
    assert c.detail == "vision/nb-0 0.5 of an L40S, 22.5 GiB; serving/embed-0 0.445 of an L40S, 20 GiB"
    assert "runai-reservation" not in c.pod + c.detail


def test_a_mig_cell_gives_its_instances_by_profile() -> None:
    c = cell(
        {
            "mig": [
                {"gi_id": 1, "profile": "3g.40gb", "pod": "nlp/ft-0"},
                {"gi_id": 2, "profile": "2g.20gb", "pod": None},
                {"gi_id": 3, "profile": "1g.10gb", "pod": "nlp/eval-0"},
                {"gi_id": 4, "profile": "1g.10gb", "pod": "nlp/eval-1"},
            ]
        },
        pod="nlp/ft-0",
    )
    assert c.kind == "mig" and c.slices == 3 and c.slices_total == 4
    assert c.detail == "2 × 1g.10gb + 1 × 3g.40gb, free 1 × 2g.20gb"
    idle = cell({"mig": [{"gi_id": 1, "profile": "7g.80gb", "pod": None}]})
    assert idle.detail == "free 1 × 7g.80gb"
