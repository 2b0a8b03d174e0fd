"""The Kueue objects served for a scenario whose kueue section writes the ClusterQueues out.

What the API server renders must be what the engine admitted by: the flavors with their node labels, each
ClusterQueue's cohort, quotas, limits and policies, its usage per flavor, and each Workload's assigned flavor.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from simulator import World, load_scenario
from simulator.server import SimServer

CASES = json.loads((Path(__file__).parent / "kueue_cases" / "cases.json").read_text(encoding="utf-8"))


def _world(case_id: str) -> World:
    case = next(c for c in CASES if c["id"] == case_id)
    world = World.from_scenario(load_scenario(yaml.safe_dump(case["scenario"], sort_keys=False)))
    world.advance_to(world.start + timedelta(minutes=1))
    return world


def _list(sim: SimServer, plural: str) -> list[dict[str, Any]]:
    custom = client.CustomObjectsApi(config.new_client_from_config(config_file=sim.kubeconfig_path))
    return custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta1", plural)["items"]


def test_it_serves_the_written_out_flavors_and_cluster_queues() -> None:
    with SimServer(_world("pre-20")) as sim:
        flavors = {f["metadata"]["name"]: f["spec"] for f in _list(sim, "resourceflavors")}
        assert flavors == {"default": {"nodeLabels": {"instance-type": "default"}}}
        cqs = {q["metadata"]["name"]: q for q in _list(sim, "clusterqueues")}
        lend1 = cqs["lend1"]["spec"]
        assert lend1["cohort"] == "cohort-lend"
        assert lend1["preemption"]["withinClusterQueue"] == "LowerPriority"
        assert lend1["preemption"]["reclaimWithinCohort"] == "LowerPriority"
        assert lend1["resourceGroups"][0]["flavors"] == [
            {
                "name": "default",
                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "6", "lendingLimit": "4"}],
            }
        ]
        # lend2 held 7 and lost lend2-mid (3) to lend1's incoming workload (3): 4 and 6 now
        usage = {n: q["status"]["flavorsUsage"][0]["resources"][0]["total"] for n, q in cqs.items()}
        assert usage == {"lend1": "6", "lend2": "4"}


def test_it_serves_each_workloads_assigned_flavor() -> None:
    with SimServer(_world("sched-10")) as sim:
        workloads = _list(sim, "workloads")
        flavors = {
            w["metadata"]["name"].split("-")[1]: w["status"]["admission"]["podSetAssignments"][0]["flavors"]
            for w in workloads
            if "admission" in w["status"]
        }
        assert flavors == {"existing": {"nvidia.com/gpu": "on-demand"}, "new": {"nvidia.com/gpu": "spot"}}
        cqs = {q["metadata"]["name"]: q for q in _list(sim, "clusterqueues")}
        alpha = {f["name"]: f["resources"][0] for f in cqs["eng-alpha"]["status"]["flavorsUsage"]}
        assert alpha["spot"]["total"] == "60" and alpha["on-demand"]["total"] == "0"


def test_a_cluster_queue_without_cohort_has_none() -> None:
    with SimServer(_world("sched-01")) as sim:
        (sales,) = _list(sim, "clusterqueues")
        assert "cohort" not in sales["spec"]
        assert sales["spec"]["queueingStrategy"] == "StrictFIFO"
