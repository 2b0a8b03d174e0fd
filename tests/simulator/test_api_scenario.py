"""The servers over the real engine: a small KAI scenario fast-forwarded, read back through real clients."""

from __future__ import annotations

import io
import json
import urllib.parse
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.core.management import call_command
from kubernetes import client, config

from simulator.engine.world import World
from simulator.scenario import load_scenario
from simulator.server import SimServer

SCENARIO = """\
format: 1
name: quota-cut-small
summary: The vision quota is cut while a training job waits; a GPU falls off the bus.
start: 2026-11-29T00:00:00Z
duration: 3h
seed: 7
cluster:
  name: gpu-prod
  scheduler: kai
  dcgm_labels: current
  nodepools:
    - {name: h100, nodes: 2, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3}
projects:
  - {name: vision, quota: {gpu: 16}, limit: {gpu: 16}}
  - {name: nlp, quota: {gpu: 8}}
jobs:
  - {name: resnet-train, project: vision, submit: 30m, pods: 2, gpus_per_pod: 8, runtime: 6h}
  - {name: bert, project: nlp, submit: 5m, pods: 1, gpus_per_pod: 8,
     failure: {kind: crashloop, log: "FileNotFoundError: /config/train.yaml", exit_code: 1}}
events:
  - {at: 20m, quota: {project: vision, quota: {gpu: 8}, limit: {gpu: 8}}, actor: platform-admin}
  - {at: 2h, xid: {node: h100-02, gpu: 3, code: 79}}
alerts:
  - {name: GPUJobPendingTooLong, for: 15m}
  - {name: PodCrashLooping, for: 10m}
  - {name: GPUMissing}
"""


def run(world: World, sim: SimServer, until: timedelta) -> None:
    end = world.start + until
    while world.now < end:
        sim.advance_to(world.now + timedelta(minutes=5))


def test_it_serves_the_engine_world_to_the_official_clients() -> None:
    world = World.from_scenario(load_scenario(SCENARIO))
    alerts: list[dict[str, Any]] = []
    with SimServer(world, alert_sink=alerts.append) as sim:
        run(world, sim, timedelta(hours=2, minutes=30))
        api = config.new_client_from_config(config_file=sim.kubeconfig_path)
        core = client.CoreV1Api(api)
        pods = {p.metadata.labels["job-name"]: p for p in core.list_pod_for_all_namespaces().items}
        waiting = pods["resnet-train"]
        assert waiting.status.phase == "Pending"
        assert waiting.status.conditions[0].reason == "Unschedulable"
        crashing = pods["bert"]
        assert crashing.status.container_statuses[0].state.waiting.reason == "CrashLoopBackOff"
        previous = core.read_namespaced_pod_log(crashing.metadata.name, "nlp", previous=True, tail_lines=1)
        assert "FileNotFoundError" in previous
        groups = client.CustomObjectsApi(api).list_namespaced_custom_object(
            "scheduling.run.ai", "v2alpha2", "vision", "podgroups"
        )
        cond = groups["items"][0]["status"]["schedulingConditions"][0]
        assert [r["reason"] for r in cond["reasons"]] == ["OverLimit"]
        assert cond["reasons"][0]["details"]["queueDetails"]["queueResourceLimits"] == {"nvidia.com/gpu": "8"}
        queue = client.CustomObjectsApi(api).get_cluster_custom_object(
            "scheduling.run.ai", "v2", "queues", "vision"
        )
        assert queue["spec"]["resources"]["gpu"]["quota"] == 8
        assert "platform-admin" in [m["manager"] for m in queue["metadata"]["managedFields"]]
        node = core.read_node("h100-02")
        assert node.status.capacity["nvidia.com/gpu"] == "7"  # GPU 3 fell off the bus
        query = urllib.parse.urlencode({"query": 'DCGM_FI_DEV_GPU_TEMP{hostname="h100-02"}'})
        body = json.loads(urllib.request.urlopen(f"{sim.prometheus_url}/api/v1/query?{query}").read())
        assert sorted(int(r["metric"]["gpu"]) for r in body["data"]["result"]) == [0, 1, 2, 4, 5, 6, 7]
    fired = {a["labels"]["alertname"] for payload in alerts for a in payload["alerts"]}
    assert {"GPUJobPendingTooLong", "PodCrashLooping", "GPUMissing"} <= fired
    assert all(p["version"] == "4" for p in alerts)


def test_it_serves_identical_payloads_for_the_same_seed() -> None:
    outputs = []
    for _ in range(2):
        world = World.from_scenario(load_scenario(SCENARIO))
        alerts: list[dict[str, Any]] = []
        with SimServer(world, alert_sink=alerts.append) as sim:
            run(world, sim, timedelta(hours=1))
            req = urllib.request.Request(
                sim.kube_url + "/api/v1/pods", headers={"Authorization": f"Bearer {sim.kube_token}"}
            )
            pods = urllib.request.urlopen(req, context=sim.kube_tls.client_context()).read()
            query = urllib.parse.urlencode(
                {
                    "query": "DCGM_FI_DEV_GPU_UTIL",
                    "start": world.now.timestamp() - 600,
                    "end": world.now.timestamp(),
                    "step": "60",
                }
            )
            series = urllib.request.urlopen(f"{sim.prometheus_url}/api/v1/query_range?{query}").read()
        outputs.append((pods, series, json.dumps(alerts, sort_keys=True)))
    assert outputs[0] == outputs[1]


def test_it_runs_the_simulate_command_to_the_end_of_a_scenario(tmp_path: Path) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(SCENARIO)
    out = io.StringIO()
    call_command("simulate", str(path), speed=1e7, stdout=out)
    text = out.getvalue()
    assert "kubeconfig: " in text and "prometheus: http://127.0.0.1:" in text and "runai: " in text
