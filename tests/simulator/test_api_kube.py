"""The official kubernetes client against the simulator's API server, over real HTTP on loopback."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from simulator.server import SimServer
from simulator.state import SimChange, SimEvent, SimGPU, SimJob, SimNode, SimPod, SimProject

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)


class SmallWorld:
    """A two-node world built directly from state.py objects; ``plan`` holds mutations by time."""

    def __init__(self, scheduler: str = "kai", dcgm_labels: str = "classic", pending_pods: int = 2) -> None:
        self.now = T0 + timedelta(hours=1)
        self.tick_seconds = 60
        self.cluster_name = "gpu-prod"
        self.dcgm_labels = dcgm_labels
        self.scenario = SimpleNamespace(
            cluster=SimpleNamespace(name="gpu-prod", scheduler=scheduler, dcgm_labels=dcgm_labels)
        )
        self.plan: list[tuple[datetime, Callable[[SmallWorld], None]]] = []
        self.alert_list: list[dict[str, Any]] = []
        self.nodes = {}
        for i in (1, 2):
            name = f"h100-0{i}"
            gpus = [
                SimGPU(
                    index=g,
                    uuid=f"GPU-0000000{i}-0000-0000-0000-00000000000{g}",
                    pci_bus_id=f"00000000:{0x1A + g:02X}:00.0",
                )
                for g in range(8)
            ]
            self.nodes[name] = SimNode(
                name=name,
                nodepool="h100",
                gpu_product="NVIDIA-H100-80GB-HBM3",
                gpu_memory_mib=81559,
                labels={
                    "kubernetes.io/hostname": name,
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    "nvidia.com/gpu.count": "8",
                },
                taints=[],
                gpus=gpus,
                created_at=T0 - timedelta(days=30),
                uid=f"0000-node-{i}",
            )
        self.projects = {
            "vision": SimProject(
                name="vision",
                namespace="vision",
                quota_gpus=8,
                limit_gpus=8,
                over_quota_weight=1,
                priority=50,
                created_at=T0 - timedelta(days=7),
                uid="0000-proj-vision",
                last_manager="platform-admin",
                # the engine's accounting (scheduler.update_projects)
                allocated_gpus=8,
                requested_gpus=8 + 8 * pending_pods,
            )
        }
        self.changes = [
            SimChange(T0 + timedelta(minutes=30), "project", "vision", "quota", 16, 8, "platform-admin")
        ]
        self.jobs: dict[str, SimJob] = {}
        self.pods: dict[str, SimPod] = {}
        self.events: list[SimEvent] = []
        train = self._job(
            "resnet-train", pods=pending_pods, state="Pending", submit=T0 + timedelta(minutes=10)
        )
        for i in range(pending_pods):
            self._pod(train, i, scheduled_message="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
        bert = self._job("bert", pods=1, state="Running", submit=T0, started=T0 + timedelta(minutes=1))
        pod = self._pod(
            bert,
            0,
            node="h100-01",
            phase="Running",
            started=T0 + timedelta(minutes=1),
            restart_count=1,
            logs=["2026-11-29T00:01:00Z starting", "2026-11-29T00:02:00Z epoch 1"],
            previous_logs=[
                "2026-11-29T00:00:30Z loading",
                "2026-11-29T00:00:40Z Traceback (most recent call last):",
            ],
        )
        for gpu in self.nodes["h100-01"].gpus:
            gpu.pod = f"vision/{pod.name}"
        self.events.append(
            SimEvent(
                uid="0000-ev-1",
                name="resnet-train-0.187c1",
                namespace="vision",
                involved={
                    "kind": "Pod",
                    "namespace": "vision",
                    "name": "resnet-train-0",
                    "uid": "0000-pod-resnet-train-0",
                },
                reason="FailedScheduling",
                message="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
                type="Warning",
                component="kai-scheduler",
                first_time=T0 + timedelta(minutes=10),
                last_time=T0 + timedelta(minutes=50),
                count=5,
            )
        )
        self.events.append(
            SimEvent(
                uid="0000-ev-0",
                name="bert-0.expired",
                namespace="vision",
                involved={"kind": "Pod", "namespace": "vision", "name": "bert-0", "uid": "0000-pod-bert-0"},
                reason="Scheduled",
                message="Successfully assigned vision/bert-0 to h100-01",
                type="Normal",
                component="kai-scheduler",
                first_time=T0 - timedelta(hours=2),
                last_time=T0 - timedelta(hours=2),
            )
        )

    def _job(
        self, name: str, pods: int, state: str, submit: datetime, started: datetime | None = None
    ) -> SimJob:
        job = SimJob(
            name=name,
            project="vision",
            namespace="vision",
            uid=f"0000-job-{name}",
            submit_at=submit,
            pods=pods,
            gpus_per_pod=8,
            priority_class="train",
            runtime_s=None,
            image=f"registry.local/vision/{name}:1.4",
            node_selector={},
            tolerations=[],
            sm_activity=0.8,
            failure=None,
            state=state,
            started_at=started,
        )
        self.jobs[f"vision/{name}"] = job
        return job

    def _pod(self, job: SimJob, index: int, started: datetime | None = None, **kw: Any) -> SimPod:
        pod = SimPod(
            name=f"{job.name}-{index}",
            namespace="vision",
            job=job.name,
            index=index,
            uid=f"0000-pod-{job.name}-{index}",
            created_at=job.submit_at,
            gpus_requested=8,
            image=job.image,
            started_at=started,
            **kw,
        )
        self.pods[f"vision/{pod.name}"] = pod
        return pod

    def live_events(self) -> list[SimEvent]:
        return [e for e in self.events if e.last_time > self.now - timedelta(hours=1)]

    def advance_to(self, t: datetime) -> None:
        self.now = t
        for when, change in [p for p in self.plan if p[0] <= t]:
            change(self)
            self.plan.remove((when, change))

    def gpu_metric(self, node: str, index: int, metric: str, t: datetime) -> float | None:
        gpu = self.nodes[node].gpus[index]
        if t > self.now or (not gpu.present and gpu.xid_at is not None and t >= gpu.xid_at):
            return None
        busy = self.gpu_pod_at(node, index, t) is not None
        return {"DCGM_FI_DEV_GPU_UTIL": 90.0 if busy else 0.0, "DCGM_FI_DEV_GPU_TEMP": 40.0 + index}.get(
            metric, 1.0
        )

    def gpu_pod_at(self, node: str, index: int, t: datetime) -> str | None:
        return self.nodes[node].gpus[index].pod

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.alert_list)


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(SmallWorld()) as server:
        yield server


def api(server: SimServer) -> client.ApiClient:
    return config.new_client_from_config(config_file=server.kubeconfig_path)


def raw(server: SimServer, path: str, method: str = "GET", token: str | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(
        server.kube_url + path,
        method=method,
        headers={"Authorization": f"Bearer {token or server.kube_token}"},
    )
    try:
        with urllib.request.urlopen(req, context=server.kube_tls.client_context()) as resp:
            body = resp.read()
            return resp.status, (
                json.loads(body) if resp.headers.get_content_type() == "application/json" else body.decode()
            )
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_it_lists_nodes_pods_jobs_and_events_through_the_official_client(sim: SimServer) -> None:
    core = client.CoreV1Api(api(sim))
    nodes = core.list_node()
    assert [n.metadata.name for n in nodes.items] == ["h100-01", "h100-02"]
    assert nodes.items[0].status.allocatable["nvidia.com/gpu"] == "8"
    ready = [c for c in nodes.items[0].status.conditions if c.type == "Ready"][0]
    assert (ready.status, ready.reason) == ("True", "KubeletReady")
    pods = core.list_pod_for_all_namespaces()
    by_name = {p.metadata.name: p for p in pods.items}
    pending = by_name["resnet-train-0"]
    assert pending.status.phase == "Pending"
    cond = pending.status.conditions[0]
    assert (cond.type, cond.status, cond.reason) == ("PodScheduled", "False", "Unschedulable")
    assert "Insufficient nvidia.com/gpu" in cond.message
    assert pending.metadata.labels["kai.scheduler/queue"] == "vision"
    assert pending.metadata.labels["job-name"] == "resnet-train"
    assert pending.metadata.owner_references[0].kind == "Job"
    assert pending.spec.scheduler_name == "kai-scheduler"
    assert pending.spec.containers[0].resources.limits["nvidia.com/gpu"] == "8"
    assert any(e.name == "WANDB_API_KEY" for e in pending.spec.containers[0].env)
    running = by_name["bert-0"]
    assert running.spec.node_name == "h100-01"
    assert running.status.container_statuses[0].restart_count == 1
    events = core.list_event_for_all_namespaces()
    assert [e.reason for e in events.items] == ["FailedScheduling"]  # the 2 h old one expired (1 h TTL)
    assert events.items[0].count == 5 and events.items[0].source.component == "kai-scheduler"
    jobs = client.BatchV1Api(api(sim)).list_job_for_all_namespaces()
    assert {j.metadata.name: j.spec.parallelism for j in jobs.items} == {"bert": 1, "resnet-train": 2}


def test_it_paginates_with_limit_and_continue(sim: SimServer) -> None:
    core = client.CoreV1Api(api(sim))
    first = core.list_pod_for_all_namespaces(limit=2)
    assert len(first.items) == 2 and first.metadata._continue
    assert first.metadata.remaining_item_count == 1
    second = core.list_pod_for_all_namespaces(limit=2, _continue=first.metadata._continue)
    assert second.metadata._continue is None
    names = [p.metadata.name for p in first.items + second.items]
    assert names == sorted(names) and len(set(names)) == 3


def test_it_filters_with_label_and_field_selectors(sim: SimServer) -> None:
    core = client.CoreV1Api(api(sim))
    assert len(core.list_namespaced_pod("vision", label_selector="job-name=resnet-train").items) == 2
    assert len(core.list_namespaced_pod("vision", label_selector="job-name in (bert,other)").items) == 1
    assert [
        p.metadata.name
        for p in core.list_pod_for_all_namespaces(field_selector="spec.nodeName=h100-01").items
    ] == ["bert-0"]
    assert len(core.list_pod_for_all_namespaces(field_selector="status.phase!=Running").items) == 2
    events = core.list_event_for_all_namespaces(
        field_selector="involvedObject.name=resnet-train-0,involvedObject.kind=Pod"
    )
    assert len(events.items) == 1
    with pytest.raises(ApiException) as exc:
        core.list_pod_for_all_namespaces(field_selector="spec.bogus=x")
    assert exc.value.status == 400 and "field label not supported" in exc.value.body


def test_it_serves_kai_queues_and_podgroups_as_custom_objects(sim: SimServer) -> None:
    custom = client.CustomObjectsApi(api(sim))
    queues = custom.list_cluster_custom_object("scheduling.run.ai", "v2", "queues")["items"]
    vision = [q for q in queues if q["metadata"]["name"] == "vision"][0]
    assert vision["spec"]["resources"]["gpu"] == {"quota": 8, "limit": 8, "overQuotaWeight": 1}
    assert vision["spec"]["parentQueue"] == "default-parent-queue"
    assert any(m["manager"] == "platform-admin" for m in vision["metadata"]["managedFields"])
    groups = custom.list_cluster_custom_object("scheduling.run.ai", "v2alpha2", "podgroups")["items"]
    waiting = [g for g in groups if g["spec"]["minMember"] == 2][0]
    cond = waiting["status"]["schedulingConditions"][0]
    assert cond["type"] == "UnschedulableOnNodePool"
    reasons = {r["reason"]: r for r in cond["reasons"]}
    assert reasons["OverLimit"]["details"]["queueDetails"]["queueResourceLimits"] == {"nvidia.com/gpu": "8"}
    status, _ = raw(sim, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues")
    assert status == 404  # the scenario runs KAI: Kueue's CRDs are not installed


def test_it_serves_kueue_objects_when_the_scenario_runs_kueue() -> None:
    with SimServer(SmallWorld(scheduler="kueue")) as sim:
        custom = client.CustomObjectsApi(api(sim))
        cq = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues")["items"][0]
        assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == {
            "name": "nvidia.com/gpu",
            "nominalQuota": "8",
            "borrowingLimit": "0",
        }
        assert cq["status"]["flavorsUsage"][0]["resources"][0]["total"] == "8"
        workloads = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "workloads")["items"]
        waiting = [w for w in workloads if w["spec"]["podSets"][0]["count"] == 2][0]
        reserved = [c for c in waiting["status"]["conditions"] if c["type"] == "QuotaReserved"][0]
        assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
        assert "insufficient unused quota for nvidia.com/gpu" in reserved["message"]
        pods = client.CoreV1Api(api(sim)).list_pod_for_all_namespaces().items
        assert pods[0].metadata.labels["kueue.x-k8s.io/queue-name"] == "vision"


def _resnet_starts_after_a_minute() -> SmallWorld:
    """The small world with vision/resnet-train-0 placed on h100-02 one minute in (one watched change)."""
    world = SmallWorld()

    def schedule(w: SmallWorld) -> None:
        pod = w.pods["vision/resnet-train-0"]
        pod.node, pod.phase, pod.scheduled_message = "h100-02", "Running", None
        pod.started_at = w.now

    world.plan.append((world.now + timedelta(minutes=1), schedule))
    return world


def test_it_watches_changes_and_resyncs_after_410() -> None:
    world = _resnet_starts_after_a_minute()
    with SimServer(world) as sim:
        core = client.CoreV1Api(api(sim))
        listed = core.list_pod_for_all_namespaces()
        rv = listed.metadata.resource_version
        sim.advance_to(world.now + timedelta(minutes=1))
        stream = watch.Watch().stream(
            core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1
        )
        events = [(e["type"], e["object"].metadata.name, e["object"].status.phase) for e in stream]
        assert events == [("MODIFIED", "resnet-train-0", "Running")]
        # history shorter than the client's resourceVersion: 410 Gone, then re-list and watch again
        sim.store.floor = sim.store.rv
        with pytest.raises(ApiException) as exc:
            list(
                watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1)
            )
        assert exc.value.status == 410
        fresh = core.list_pod_for_all_namespaces()
        again = list(
            watch.Watch().stream(
                core.list_pod_for_all_namespaces,
                resource_version=fresh.metadata.resource_version,
                timeout_seconds=1,
            )
        )
        assert again == []


def test_the_watch_history_keeps_five_minutes_of_world_time_as_a_compacted_api_server_does() -> None:
    world = _resnet_starts_after_a_minute()
    with SimServer(world) as sim:
        core = client.CoreV1Api(api(sim))

        def changes_since(rv: str) -> list[tuple[str, str]]:
            stream = watch.Watch().stream(
                core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1
            )
            return [(e["type"], e["object"].metadata.name) for e in stream]

        rv = core.list_pod_for_all_namespaces().metadata.resource_version
        sim.advance_to(world.now + timedelta(minutes=1))  # the pod starts
        written = sim.store.rv
        for _ in range(4):
            sim.advance_to(world.now + timedelta(minutes=1))
        assert ("MODIFIED", "resnet-train-0") in changes_since(rv)  # written 4 minutes ago: still kept
        sim.advance_to(world.now + timedelta(minutes=2))  # now 6 minutes after the write: compacted away
        with pytest.raises(ApiException) as exc:
            changes_since(rv)
        assert exc.value.status == 410
        assert all(entry[0] > written for entry in sim.store.history)
        assert changes_since(str(sim.store.rv)) == []  # a watch from a fresh listing goes on


def test_it_serves_previous_logs_with_tail_lines(sim: SimServer) -> None:
    core = client.CoreV1Api(api(sim))
    assert (
        core.read_namespaced_pod_log("bert-0", "vision", previous=True, tail_lines=1)
        == "Traceback (most recent call last):\n"
    )
    assert core.read_namespaced_pod_log("bert-0", "vision", container="main") == "starting\nepoch 1\n"
    stamped = core.read_namespaced_pod_log("bert-0", "vision", timestamps=True, tail_lines=1)
    assert stamped.startswith("2026-11-29T00:02:00.000000000Z epoch 1")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod_log("resnet-train-0", "vision", previous=True)
    assert exc.value.status == 400 and "previous terminated container" in exc.value.body


def test_it_answers_404_with_a_status_object(sim: SimServer) -> None:
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api(sim)).read_namespaced_pod("nope", "vision")
    body = json.loads(exc.value.body)
    assert exc.value.status == 404
    assert (body["kind"], body["reason"], body["message"]) == ("Status", "NotFound", 'pods "nope" not found')


def test_it_forbids_every_write_and_refuses_requests_without_the_token(sim: SimServer) -> None:
    for method, verb in (("PUT", "update"), ("PATCH", "patch"), ("DELETE", "delete")):
        status, body = raw(sim, "/api/v1/namespaces/vision/pods/bert-0", method=method)
        assert (status, body["kind"], body["reason"], body["code"]) == (403, "Status", "Forbidden", 403)
        assert body["details"] == {"name": "bert-0", "kind": "pods"}
        assert body["message"].startswith(
            f'pods "bert-0" is forbidden: User "sim-reader" cannot {verb} resource "pods" in API group "" '
            'in the namespace "vision"'
        )
    status, body = raw(sim, "/api/v1/namespaces/vision/pods/bert-0/eviction", method="POST")
    assert status == 403 and 'cannot create resource "pods/eviction"' in body["message"]
    status, body = raw(sim, "/apis/scheduling.run.ai/v2/queues/vision", method="PATCH")
    assert status == 403 and body["details"] == {
        "name": "vision",
        "group": "scheduling.run.ai",
        "kind": "queues",
    }
    assert 'API group "scheduling.run.ai" at the cluster scope' in body["message"]
    status, body = raw(sim, "/api/v1/namespaces/vision/pods/bert-0", method="DELETE", token="wrong")
    assert status == 401, "a write without the token is unauthenticated, not forbidden"
    status, body = raw(sim, "/api/v1/nodes", token="wrong")
    assert status == 401 and body["kind"] == "Status"


def test_it_serves_the_same_bytes_for_the_same_world() -> None:
    bodies = []
    for _ in range(2):
        with SimServer(SmallWorld()) as sim:
            bodies.append(
                [
                    raw(sim, path)[1]
                    for path in (
                        "/api/v1/pods",
                        "/api/v1/nodes",
                        "/apis/scheduling.run.ai/v2alpha2/podgroups",
                    )
                ]
            )
    assert bodies[0] == bodies[1]


def test_it_watches_custom_objects_with_bookmarks() -> None:
    world = SmallWorld()

    def cut_quota(w: SmallWorld) -> None:
        w.projects["vision"].quota_gpus = 4
        w.projects["vision"].resource_version += 1
        w.changes.append(SimChange(w.now, "project", "vision", "quota", 8, 4, "bob"))

    world.plan.append((world.now + timedelta(minutes=1), cut_quota))
    with SimServer(world) as sim:
        custom = client.CustomObjectsApi(api(sim))
        rv = custom.list_cluster_custom_object("scheduling.run.ai", "v2", "queues")["metadata"][
            "resourceVersion"
        ]
        sim.advance_to(world.now + timedelta(minutes=1))
        events = list(
            watch.Watch().stream(
                custom.list_cluster_custom_object,
                "scheduling.run.ai",
                "v2",
                "queues",
                resource_version=rv,
                timeout_seconds=1,
                allow_watch_bookmarks=True,
            )
        )
        assert [e["type"] for e in events] == ["MODIFIED", "BOOKMARK"]
        assert events[0]["object"]["metadata"]["name"] == "vision"
        modified = events[0]["object"]
        assert modified["spec"]["resources"]["gpu"]["quota"] == 4
        assert "bob" in [m["manager"] for m in modified["metadata"]["managedFields"]]
        assert events[-1]["type"] == "BOOKMARK"
        assert events[-1]["object"]["metadata"]["resourceVersion"] == str(sim.store.rv)
