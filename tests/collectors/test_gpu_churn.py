"""GPU versions change only with real facts, on every dcgm-exporter label variant (real sweeps over HTTP).

A GPU's state holds slowly changing facts (docs/inventory.md): sweeping an unchanged cluster again writes no
GPU version, and a job taking GPUs is one ``pod`` change per GPU, not a pod change plus a namespace change.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from collectors.models import Change, EntityVersion
from collectors.sweep import sweep_cluster
from simulator.scenario.cluster import DCGM_LABEL_STYLES
from tests.collectors.simhelpers import register, served, small_world

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("labels", sorted(DCGM_LABEL_STYLES))
def test_gpus_change_only_when_a_pod_takes_them(labels: str) -> None:
    world = small_world("kai", labels)
    with served(world) as sim:
        cluster = register(sim)
        t = world.start + timedelta(minutes=3)  # nodes and GPUs up, no job submitted yet
        sim.advance_to(t)
        sweep_cluster(cluster.name, t)
        gpus = EntityVersion.objects.filter(kind="gpu").count()
        assert gpus == 24
        t = world.start + timedelta(minutes=40)  # the jobs run
        sim.advance_to(t)
        sweep_cluster(cluster.name, t)
        taken = list(Change.objects.filter(kind="gpu").exclude(field="created"))
        assert taken, "no GPU was allocated: the scenario changed"
        assert {c.field for c in taken} == {"pod"}, sorted({c.field for c in taken})
        assert all(c.old is None and "/" in c.new for c in taken)
        assert EntityVersion.objects.filter(kind="gpu").count() == gpus + len(taken)
        counts = (EntityVersion.objects.filter(kind="gpu").count(), Change.objects.filter(kind="gpu").count())
        for later in (timedelta(seconds=30), timedelta(minutes=1)):  # nothing happens to the GPUs meanwhile
            sim.advance_to(t + later)
            sweep_cluster(cluster.name, t + later)
            got = (
                EntityVersion.objects.filter(kind="gpu").count(),
                Change.objects.filter(kind="gpu").count(),
            )
            assert got == counts, (labels, later)
