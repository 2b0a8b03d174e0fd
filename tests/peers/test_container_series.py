"""promtool on the simulated kubelet's cAdvisor page: it parses and passes the linter."""

from __future__ import annotations

import subprocess
import urllib.request
from datetime import timedelta

import pytest

from simulator.server import SimServer
from tests.collectors.simhelpers import small_world
from tests.peers.promtools import need

pytestmark = pytest.mark.peers


def test_promtool_check_metrics_passes_the_cadvisor_exposition() -> None:
    world = small_world()
    world.advance_to(world.start + timedelta(hours=2))
    node = next(p.node for p in world.pods.values() if p.job == "resnet-train")
    with (
        SimServer(world) as sim,
        urllib.request.urlopen(f"{sim.prometheus_url}/nodes/{node}/metrics/cadvisor") as resp,
    ):
        body = resp.read()
    assert b"container_memory_working_set_bytes{" in body and b"container_cpu_usage_seconds_total{" in body
    done = subprocess.run(
        [need("promtool"), "check", "metrics"], input=body, capture_output=True, timeout=120
    )
    assert done.returncode == 0, (done.stdout + done.stderr).decode()


def test_promtool_check_metrics_rejects_a_counter_without_a_value() -> None:
    broken = b'# TYPE container_cpu_usage_seconds_total counter\ncontainer_cpu_usage_seconds_total{pod="x"}\n'
    done = subprocess.run(
        [need("promtool"), "check", "metrics"], input=broken, capture_output=True, timeout=120
    )
    assert done.returncode == 1
