"""End to end on a shared-GPU platform: the fleet funnel counts allocated fractions and MIG instances.

The simulator runs ``shared-mig-department-crashloop`` (an L40S pool KAI shares, an A100 pool partitioned into
MIG instances, whole H100s), the real collectors sweep it, and the funnel as of t equals what the simulator's
own GPUs say: a shared GPU counts the sum of its shares, a MIG GPU the part of its layout its used instances
take, and the shared GPUs, shares and instances are counted, not the reservation pods holding the devices.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.sweep import sweep_cluster, sweep_telemetry
from rcaweb.cursor import Cursor
from simulator.engine.world import World
from simulator.scenario import load_scenario
from tests.collectors.simhelpers import register, served
from web.console import fleet, funnel

pytestmark = pytest.mark.django_db

SCENARIO = (
    Path(__file__).resolve().parents[2] / "simulator/scenarios/shared-mig-department-crashloop.yaml"
)


def truth(world: Any) -> dict[str, float]:
    out: dict[str, float] = dict.fromkeys(
        ("total", "healthy", "allocated", "shared_gpus", "shares", "mig_gpus", "mig_instances"), 0
    )
    for node in world.nodes.values():
        mig_up = node.ready and any(n > 0 for n in node.mig_allocatable().values())
        for g in node.gpus:
            out["total"] += 1
            if g.mig:
                healthy = mig_up and g.present and g.healthy
            else:
                healthy = node.ready and node.device_plugin_healthy and g.present and g.healthy
            if not healthy:
                continue
            out["healthy"] += 1
            if g.shares:
                out["allocated"] += min(1.0, g.shared_fraction)
                out["shared_gpus"] += 1
                out["shares"] += len(g.shares)
            elif g.mig:
                used = [i for i in g.mig if i.pod]
                if used:
                    out["allocated"] += sum(i.compute_slices for i in used) / sum(
                        i.compute_slices for i in g.mig
                    )
                    out["mig_gpus"] += 1
                    out["mig_instances"] += len(used)
            elif g.pod:
                out["allocated"] += 1
    out["allocated"] = round(out["allocated"], 2)
    return out


def test_the_funnel_counts_shares_and_mig_instances_like_the_simulator() -> None:
    world = World.from_scenario(load_scenario(SCENARIO.read_text()))
    with served(world) as sim:
        cluster = register(sim)
        seen: list[dict[str, float]] = []
        for minutes in (30, 75):
            t = world.start + timedelta(minutes=minutes)
            sim.advance_to(t)
            sweep_cluster(cluster.name, t)
            sweep_telemetry(cluster.name, t)
            want = truth(world)
            got = fleet.compute(Cursor(at=t, window=timedelta(minutes=30)), cluster).funnel
            have = {k: getattr(got, k) for k in want}
            have["allocated"] = round(have["allocated"], 2)
            assert have == want, minutes
            assert got.active <= got.allocated and got.well_used <= got.active
            seen.append(want)
    # The story happened: shares on shared GPUs, MIG instances in use, a fraction in the allocated count.
    assert any(w["shares"] > w["shared_gpus"] > 0 for w in seen)
    assert all(w["mig_instances"] > 0 for w in seen)
    assert any(not float(w["allocated"]).is_integer() for w in seen)
    words = got.sliced_words
    assert "shared GPU" in words and "MIG instance" in words, words


def test_the_words_say_what_the_units_hold() -> None:
    f = funnel.Funnel(
        allocated=412.5, shared_gpus=38, shares=91, mig_gpus=6, mig_instances=24, mig_instances_free=4
    )
    assert f.sliced_words == "38 shared GPUs hold 91 shares; 24 MIG instances in use on 6 GPUs, 4 free"
    assert funnel.units(412.5) == 412.5 and funnel.units(412.0) == 412
    assert funnel.Funnel(shared_gpus=1, shares=1).sliced_words == "1 shared GPU holds 1 share"
