"""``manage.py collect`` is thin: it runs the sweeps and prints what they wrote."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.collectors.simhelpers import register, served, small_world

pytestmark = pytest.mark.django_db


def test_it_sweeps_once_and_prints_what_it_wrote():
    world = small_world("kueue")
    with served(world) as sim:
        sim.advance_to(world.start + timedelta(minutes=30))
        register(sim)
        out = StringIO()
        call_command("collect", "--cluster", "gpu-prod", "--once", stdout=out)
    text = out.getvalue()
    assert "gpu-prod inventory at" in text and "versions opened" in text and "0 errors" in text
    assert "gpu-prod events at" in text and "gpu-prod telemetry at" in text


def test_it_prints_errors_for_a_cluster_it_cannot_reach(tmp_path):
    from collectors.models import Cluster

    Cluster.objects.create(name="gone", kubeconfig=str(tmp_path / "nope"))
    out, err = StringIO(), StringIO()
    call_command("collect", "--cluster", "gone", "--once", "--kind", "inventory", stdout=out, stderr=err)
    assert "error: k8s: configure: cannot load Kubernetes credentials" in out.getvalue()
    assert "some sources failed" in err.getvalue()


def test_it_refuses_an_unknown_cluster():
    with pytest.raises(CommandError, match="unknown cluster 'x'"):
        call_command("collect", "--cluster", "x", "--once")
