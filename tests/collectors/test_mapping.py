"""Raw objects → inventory states (docs/inventory.md), on recorded payloads: the simulator's wire format
(``fixtures/sim_*.json``, re-recorded by ``fixtures/record.py``) and shapes from real clusters
(``fixtures/upstream_objects.json``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from collectors import mapping
from collectors.inventory import Observed

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def kai() -> dict:
    return json.loads((FIX / "sim_kai.json").read_text())


@pytest.fixture(scope="module")
def up() -> dict:
    return json.loads((FIX / "upstream_objects.json").read_text())


def _by_name(items: list[dict], prefix: str) -> dict:
    return next(i for i in items if i["metadata"]["name"].startswith(prefix))


def test_it_maps_a_ready_node_with_its_gpus_pool_and_cordon(kai):
    obs = mapping.map_node(_by_name(kai["nodes"], "h100-02"))
    assert obs.kind == "node" and obs.name == "h100-02"
    assert obs.hot == {"phase": "Ready", "ready": True, "gpus": 8, "gpus_allocatable": 8, "node": "h100-02"}
    assert obs.state["unschedulable"] is True
    assert obs.state["gpu_product"] == "NVIDIA-H100-80GB-HBM3"
    assert obs.state["nodepool"] == "h100"
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in obs.state["taints"]
    assert "lastHeartbeatTime" not in json.dumps(obs.state)  # ticks every few seconds: never in a state


def test_it_maps_a_notready_node_with_device_plugin_at_zero(up):
    obs = mapping.map_node(up["node_notready"])
    assert obs.hot["phase"] == "Unknown" and obs.hot["ready"] is False
    assert obs.hot["gpus"] == 8 and obs.hot["gpus_allocatable"] == 0
    assert obs.state["nodepool"] == "a100-pool"
    assert obs.state["gpu_memory_mib"] == 81920
    assert obs.state["conditions"]["Ready"] == {
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "since": "2026-11-29T03:05:00Z",
    }
    assert all("timeAdded" not in t for t in obs.state["taints"])
    assert obs.actor == "kube-controller-manager"  # the taint write is newer than the Ready transition


def test_it_maps_a_running_pod_to_node_job_queue_project_and_redacts_env(kai):
    obs = mapping.map_pod(_by_name(kai["pods"], "resnet-train"))
    assert obs.kind == "pod" and obs.namespace == "vision"
    assert obs.hot["phase"] == "Running" and obs.hot["node"].startswith("h100-")
    assert (obs.hot["job"], obs.hot["queue"], obs.hot["project"], obs.hot["gpus"]) == (
        "resnet-train",
        "vision",
        "vision",
        8,
    )
    env = obs.state["containers"][0]["env"]
    assert env["WANDB_API_KEY"] == "[redacted]"
    assert "wandb_v1" not in json.dumps(obs.state)


def test_it_keeps_a_crashlooping_container_state_and_restarts(kai):
    obs = mapping.map_pod(_by_name(kai["pods"], "crashy"))
    c = obs.state["containers"][0]
    assert c["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert c["last_state"]["terminated"]["exitCode"] == 1
    assert c["restart_count"] > 0 and c["ready"] is False


def test_it_maps_a_pending_pod_with_the_scheduler_message_and_limits_only_gpus(up):
    obs = mapping.map_pod(up["pod_pending_kube_scheduler"])
    assert obs.hot["node"] == "" and obs.state["node"] is None
    assert obs.hot["gpus"] == 4  # limits alone imply requests for extended resources
    cond = obs.state["conditions"]["PodScheduled"]
    assert cond["status"] == "False" and cond["message"].startswith("0/8 nodes are available")
    env = obs.state["containers"][0]["env"]
    assert env["HF_TOKEN"] == "[redacted]"
    assert env["DB_PASSWORD"] == "(from secret db/password)"
    assert env["DATABASE_URL"] == "postgres://app:[redacted]@db:5432/app"
    assert env["EPOCHS"] == "10"


def test_it_maps_kai_queues_to_queues_and_projects_with_quota_limit_and_actor(kai):
    from collectors.mapping import kai_namespaces

    out = mapping.map_kai_queues(kai["queues"], kai_namespaces(kai["namespaces"]))
    projects = {o.name: o for o in out if o.kind == "project"}
    queues = {o.name: o for o in out if o.kind == "queue"}
    assert set(projects) == {"vision", "nlp"}
    assert "default-parent-queue" in queues and queues["default-parent-queue"].state["project"] == ""
    vision = projects["vision"]
    assert vision.state["quota_gpus"] == 4 and vision.state["limit_gpus"] == 16  # quota cut at 1h
    assert (
        vision.hot["gpus"] == 4 and vision.hot["gpus_allocatable"] == 16 and vision.hot["queue"] == "vision"
    )
    assert vision.actor == "platform-admin"
    assert projects["nlp"].state["limit_gpus"] is None  # -1 = no limit
    assert queues["vision"].state["parent"] == "default-parent-queue"


def test_it_reads_why_a_kai_gang_waits_from_its_podgroup(kai):
    pods = [mapping.map_pod(p) for p in kai["pods"]]
    job = _by_name(kai["jobs"], "big")
    pg = mapping.SchedulingIndex.build(kai["podgroups"]).find(job)
    js = mapping.kai_job_scheduling(pg, [p for p in pods if p.hot["job"] == "big"], {"nlp": "nlp"})
    assert js.scheduling["source"] == "kai" and js.scheduling["type"] == "UnschedulableOnNodePool"
    assert "Resources were not found" in js.scheduling["message"]
    assert js.admitted is False and js.queue == "nlp"
    obs = mapping.map_job(
        job,
        pod_phases=["Pending", "Pending"],
        queue=js.queue,
        project=js.project,
        scheduling=js.scheduling,
        admitted=js.admitted,
        preemptible=js.preemptible,
    )
    assert obs.hot == {
        "phase": "Pending",
        "queue": "nlp",
        "project": "nlp",
        "gpus": 16,
        "namespace": "nlp",
        "gpu_units": 16,
    }
    assert obs.state["pods"] == 2 and obs.state["gpus_per_pod"] == 8 and obs.state["preemptible"] is True


def test_it_takes_the_kai_reason_over_the_generic_one(up):
    js = mapping.kai_job_scheduling(up["kai_podgroup_over_limit"], [], {})
    assert js.scheduling["reason"] == "NonPreemptibleOverQuota"
    assert js.preemptible is False


def test_it_maps_a_failed_job_and_its_kueue_workload(up):
    lqs = mapping.kueue_local_queue_map([up["kueue_local_queue"]])
    wl = mapping.SchedulingIndex.build(
        [up["kueue_workload_pending"]], uid_label="kueue.x-k8s.io/job-uid"
    ).find(up["job_failed"])
    js = mapping.kueue_job_scheduling(wl, [], lqs)
    assert (
        js.queue == "team-a-cq"
        and js.scheduling["type"] == "QuotaReserved"
        and js.scheduling["status"] == "False"
    )
    assert "4 more needed" in js.scheduling["message"]
    obs = mapping.map_job(
        up["job_failed"], pod_phases=[], queue=js.queue, project=js.project, scheduling=js.scheduling
    )
    assert obs.hot["phase"] == "Failed" and obs.hot["gpus"] == 8
    assert obs.state["conditions"]["Failed"]["reason"] == "BackoffLimitExceeded"
    assert obs.actor == "kube-controller-manager"


def test_it_treats_a_kueue_suspended_job_waiting_for_admission_as_pending(up):
    job = copy.deepcopy(up["job_failed"])
    job["status"] = {}
    job["spec"]["suspend"] = True
    assert mapping.job_phase(job, [], waiting_for_admission=True) == "Pending"
    assert mapping.job_phase(job, []) == "Suspended"


def test_it_maps_a_kueue_cluster_queue_with_flavors_and_borrowing_limit(up):
    out = mapping.map_kueue_queues([up["kueue_cluster_queue"]], [up["kueue_local_queue"]])
    queue = next(o for o in out if o.kind == "queue")
    project = next(o for o in out if o.kind == "project")
    assert queue.state["quota_gpus"] == 16 and queue.state["limit_gpus"] == 20
    assert queue.state["flavors"] == ["a100", "h100"] and queue.state["cohort"] == "research"
    assert project.name == "team-a-cq" and project.state["namespace"] == "team-a"
    assert project.actor == "kubectl-edit"  # the spec writer, not the status controller


def test_a_kueue_cluster_queue_records_what_its_admission_cycle_reads(up):
    cq = copy.deepcopy(up["kueue_cluster_queue"])
    out = mapping.map_kueue_queues([cq], [up["kueue_local_queue"]])
    state = next(o for o in out if o.kind == "queue").state
    assert state["flavor_quotas"] == [
        {"flavor": "a100", "nominal": 8, "borrowing_limit": 4, "lending_limit": None},
        {"flavor": "h100", "nominal": 8, "borrowing_limit": 0, "lending_limit": None},
    ]
    # Kueue's defaults when the spec is silent
    assert state["queueing_strategy"] == "BestEffortFIFO"
    assert state["preemption"]["within_cluster_queue"] == "Never"
    assert state["flavor_fungibility"] == {"when_can_borrow": "MayStopSearch", "when_can_preempt": "TryNextFlavor"}

    cq["spec"].update(
        queueingStrategy="StrictFIFO",
        preemption={
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        },
        flavorFungibility={"whenCanBorrow": "TryNextFlavor"},
    )
    state = next(o for o in mapping.map_kueue_queues([cq], []) if o.kind == "queue").state
    assert state["queueing_strategy"] == "StrictFIFO"
    assert state["preemption"] == {
        "within_cluster_queue": "LowerPriority",
        "reclaim_within_cohort": "Any",
        "borrow_within_cohort": "LowerPriority",
        "max_priority_threshold": 100,
    }
    assert state["flavor_fungibility"]["when_can_borrow"] == "TryNextFlavor"


def test_it_maps_gpus_from_dcgm_to_node_and_pod(kai):
    from collectors.sources.prometheus import Series

    def series(answer):
        return [Series(r["metric"], []) for r in answer["data"]["result"]]

    inv = [
        Series(r["metric"], [(None, float(r["value"][1]))]) for r in kai["gpu_inventory"]["data"]["result"]
    ]
    xid = [Series(r["metric"], [(None, float(r["value"][1]))]) for r in kai["xid"]["data"]["result"]]
    nodes = {o.name: o.state for o in map(mapping.map_node, kai["nodes"])}
    out = mapping.map_gpus(
        inv, {"xid_last": xid, "ecc_dbe_total": None, "ecc_sbe_total": series(kai["xid"])}, nodes=nodes
    )
    assert len(out) == 16 and len({o.name for o in out}) == 16
    used = [o for o in out if o.hot["pod"]]
    assert {o.hot["pod"].split("/")[0] for o in used} <= {"vision", "nlp"}
    g = used[0]
    assert g.state["node"] in nodes and g.state["present"] is True and g.hot["phase"] == "ok"
    assert g.state["ecc_dbe_total"] is None and "ecc_dbe_total" in g.state["unreported"]  # no data, not zero


def test_it_keeps_a_gpu_that_stopped_reporting_as_missing():
    last = {"node": "h100-02", "index": 3, "uuid": "GPU-x", "present": True, "pod": "a/b", "namespace": "a"}
    out = mapping.map_gpus([], {}, nodes={}, previous={"GPU-x": last})
    assert [(o.name, o.hot["phase"], o.state["present"], o.state["pod"]) for o in out] == [
        ("GPU-x", "missing", False, None)
    ]


def test_it_marks_a_gpu_with_a_critical_xid_faulty():
    from collectors.sources.prometheus import Series

    labels = {"UUID": "GPU-1", "gpu": "0", "Hostname": "n1", "modelName": "NVIDIA H100 80GB HBM3"}
    inv = [Series(labels, [(None, 0.0)])]
    for code, phase in ((79, "faulty"), (13, "ok"), (0, "ok")):
        out = mapping.map_gpus(inv, {"xid_last": [Series(labels, [(None, float(code))])]}, nodes={"n1": {}})
        assert out[0].hot["phase"] == phase, code


def test_every_mapped_state_is_json_and_stable(kai):
    """The same payload maps to equal states twice (a second sweep must write nothing)."""
    a = [mapping.map_pod(p).state for p in kai["pods"]] + [mapping.map_node(n).state for n in kai["nodes"]]
    b = [mapping.map_pod(p).state for p in kai["pods"]] + [mapping.map_node(n).state for n in kai["nodes"]]
    assert json.loads(json.dumps(a)) == b
    assert isinstance(mapping.map_node(kai["nodes"][0]), Observed)


def test_changes_are_attributed_to_the_writer_of_the_changed_field() -> None:
    """CI bumps the image; the job controller reports status afterwards: the image change is CI's, the
    phase change the controller's, and the job's creation whoever applied it first."""
    from collectors.mapping.core import map_job, map_pod

    def entry(manager: str, when: str, status: bool = False) -> dict:
        e = {
            "manager": manager,
            "operation": "Update",
            "time": when,
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
        return {**e, "subresource": "status"} if status else e

    job = {
        "metadata": {
            "name": "asr",
            "namespace": "speech",
            "managedFields": [
                entry("kubectl-client-side-apply", "2026-11-29T00:00:00Z"),
                entry("ci", "2026-11-29T04:00:00Z"),
                entry("kube-controller-manager", "2026-11-29T04:05:00Z", status=True),
            ],
        },
        "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "asr:1.0"}]}}},
        "status": {},
    }
    obs = map_job(job, pod_phases=[])
    assert obs.actor_of("image") == "ci" and obs.actor_of("node_selector.zone") == "ci"
    assert obs.actor_of("phase") == "kube-controller-manager"
    assert obs.actor_of("created") == "kubectl-client-side-apply"
    pod = {
        "metadata": {
            "name": "asr-0",
            "namespace": "speech",
            "managedFields": [
                entry("kube-controller-manager", "2026-11-29T04:06:00Z"),
                entry("kai-scheduler", "2026-11-29T04:07:00Z", status=True),
                entry("kubelet", "2026-11-29T04:07:00Z", status=True),
            ],
        },
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": "Running"},
    }
    assert map_pod(pod).actor_of("created") == "kube-controller-manager"


def test_a_pods_cpu_and_memory_requests_are_summed_as_the_scheduler_fits_them() -> None:
    from collectors.mapping.quantities import resource_requests

    containers = [
        {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        {"resources": {"limits": {"cpu": "2", "memory": "512Mi"}}},  # only a limit: it is the request
        {"resources": {}},
    ]
    assert resource_requests(containers) == {"cpu": "2.5", "memory": str(1024**3 + 512 * 1024**2)}
    assert resource_requests([{"resources": {"requests": {"cpu": "lots"}}}]) == {}
    assert resource_requests([]) == {}


@pytest.mark.parametrize(
    "value, expected",
    [
        ("8", 8),
        (8, 8),
        (" 8 ", 8),
        ("8.0", 8),
        (2.5, 2),
        ("1k", 1000),
        ("1000m", 1),
        ("500m", 0),
        ("1Ti", 2**40),
        ("-1", -1),
        ("", None),
        (None, None),
        (True, None),
        ("lots", None),
        ("8Xi", None),
        ("NaN", None),
        (float("nan"), None),
        ("Infinity", None),
    ],
)
def test_int_quantity_reads_what_kubernetes_writes(value, expected):
    from collectors.mapping.quantities import int_quantity

    assert int_quantity(value) == expected


def test_the_simulated_kube_state_metrics_name_a_bad_quantity():
    from simulator.prometheus.kubestate import quantity

    assert quantity("64Gi") == 64 * 2**30 and quantity("500m") == 0.5 and quantity(8) == 8
    with pytest.raises(ValueError, match="not a Kubernetes quantity: '12 cores'"):
        quantity("12 cores")


def test_it_keeps_a_jobs_runtime_limit_as_a_spec_key():
    job = {
        "metadata": {"name": "train", "namespace": "vision"},
        "spec": {"activeDeadlineSeconds": 7200, "template": {"spec": {"containers": [{"name": "main"}]}}},
        "status": {"startTime": "2026-11-29T01:00:00Z"},
    }
    obs = mapping.map_job(job, pod_phases=["Running"])
    assert obs.state["active_deadline_seconds"] == 7200 and obs.state["started"] == "2026-11-29T01:00:00Z"
    assert "active_deadline_seconds" in obs.spec_keys
    no_limit = mapping.map_job({**job, "spec": {"template": job["spec"]["template"]}}, pod_phases=[])
    assert no_limit.state["active_deadline_seconds"] is None
