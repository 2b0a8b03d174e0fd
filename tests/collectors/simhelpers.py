"""Small scenarios and a SimServer context for the collectors' end-to-end tests (real HTTP on loopback)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from collectors.models import Cluster
from simulator.engine.world import World
from simulator.scenario import load_scenario
from simulator.server import SimServer

SMALL = """
format: 1
name: collectors-{scheduler}
summary: a small cluster for the collectors' tests
start: 2026-11-29T00:00:00Z
duration: 4h
seed: 5
cluster:
  name: gpu-prod
  scheduler: {scheduler}
  dcgm_labels: {labels}
  nodepools:
    - {{name: h100, nodes: 3, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3}}
projects:
  - {{name: vision, quota: {{gpu: 16}}, limit: {{gpu: 16}}, priority: 50}}
  - {{name: nlp, quota: {{gpu: 8}}}}
jobs:
  - {{name: resnet-train, project: vision, submit: 10m, pods: 1, gpus_per_pod: 8, runtime: 3h}}
  - {{name: big, project: nlp, submit: 20m, pods: 2, gpus_per_pod: 8}}
  - {{name: crashy, project: nlp, submit: 5m, pods: 1, gpus_per_pod: 2,
      failure: {{kind: crashloop, log: "KeyError: 'lr' Authorization: Bearer abcdefghijklmnop1234", exit_code: 1}}}}
  - {{name: small, project: vision, submit: 15m, pods: 1, gpus_per_pod: 4, runtime: 30m}}
events:
  - {{at: 1h, quota: {{project: vision, quota: {{gpu: 8}}}}, actor: platform-admin}}
  - {{at: 1h30m, cordon: {{node: h100-03}}}}
"""


def small_world(scheduler: str = "kai", labels: str = "classic", **fmt: Any) -> World:
    return World.from_scenario(load_scenario(SMALL.format(scheduler=scheduler, labels=labels, **fmt)))


@contextmanager
def served(world: World, **kwargs: Any) -> Iterator[SimServer]:
    server = SimServer(world, **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def register(server: SimServer, name: str = "gpu-prod", **fields: Any) -> Cluster:
    scheduler = server.world.scenario.cluster.scheduler
    values = {
        "scheduler": scheduler,
        "kubeconfig": server.kubeconfig_path,
        "prometheus_url": server.prometheus_url,
    }
    values.update(fields)
    cluster, _ = Cluster.objects.update_or_create(name=name, defaults=values)
    return cluster
