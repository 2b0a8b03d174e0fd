"""Small scenario builders for the engine tests."""

from __future__ import annotations

from datetime import timedelta

from simulator import World, load_scenario

HEAD = """\
format: 1
name: t
start: 2026-11-29T00:00:00Z
duration: {duration}
seed: {seed}
cluster:
  name: c
  scheduler: {scheduler}
  nodepools:
    - {{name: h100, nodes: {nodes}, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3}}
"""


def world(body: str, *, scheduler: str = "kai", nodes: int = 2, duration: str = "3h", seed: int = 1) -> World:
    text = HEAD.format(scheduler=scheduler, nodes=nodes, duration=duration, seed=seed) + body
    return World.from_scenario(load_scenario(text))


def at(w: World, minutes: float) -> World:
    w.advance_to(w.start + timedelta(minutes=minutes))
    return w
