"""The engine: scheduling, quota, messages, events, failures and determinism."""

from __future__ import annotations

import json

from simulator.engine import lifecycle

from .helpers import at, world

TWO_PROJECTS = """\
projects:
  - {name: vision, quota: {gpu: 8}, limit: {gpu: 8}}
  - {name: nlp, quota: {gpu: 8}}
"""


def test_it_runs_a_job_and_frees_its_gpus_when_it_finishes() -> None:
    w = at(
        world(
            TWO_PROJECTS
            + "jobs:\n  - {name: a, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 4, runtime: 30m}\n"
        ),
        5,
    )
    job = w.jobs["a"]
    (pod,) = w.pods_of(job)
    assert job.state == "Running" and pod.phase == "Running" and len(pod.gpu_indices) == 4
    assert w.gpu_pod_at(pod.node, pod.gpu_indices[0]) == f"nlp/{pod.name}"
    at(w, 40)
    assert job.state == "Succeeded" and pod.phase == "Succeeded"
    assert all(g.pod is None for n in w.nodes.values() for g in n.gpus)
    assert pod.container_state["terminated"]["reason"] == "Completed"


def test_it_reports_kai_over_limit_with_queue_numbers() -> None:
    w = at(
        world(
            TWO_PROJECTS + "jobs:\n  - {name: big, project: vision, submit: 1m, pods: 2, gpus_per_pod: 8}\n"
        ),
        3,
    )
    job = w.jobs["big"]
    assert job.condition_reason == "Unschedulable"
    assert job.condition_message == (
        "OverLimit: vision quota has reached the allowable limit of GPUs. Limit is 8 GPUs, currently 0 GPUs "
        "allocated and workload requested 16 GPUs."
    )
    assert job.condition_reasons[0]["reason"] == "OverLimit"
    events = [e for e in w.events if e.reason == "Unschedulable" and e.involved["kind"] == "Pod"]
    assert events and events[0].component == "kai-scheduler" and events[0].type == "Warning"


def test_it_writes_kube_scheduler_messages_for_kueue_pods() -> None:
    body = """projects:
  - {name: a, quota: {gpu: 16}}
jobs:
  - {name: j, project: a, submit: 1m, pods: 1, gpus_per_pod: 4, tolerations: []}
events:
  - {at: 0s, taint: {node: h100-01, add: {key: nvidia.com/gpu, value: "true", effect: NoSchedule}}}
  - {at: 0s, cordon: {node: h100-02}}
"""
    w = at(world(body, scheduler="kueue"), 3)
    (pod,) = w.pods_of(w.jobs["j"])
    assert pod.scheduled_message == (
        "0/2 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: true}, 1 node(s) were "
        "unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    failed = [e for e in w.events if e.reason == "FailedScheduling"]
    assert failed[0].component == "default-scheduler"


def test_it_counts_repeated_failed_scheduling_events() -> None:
    body = TWO_PROJECTS + "jobs:\n  - {name: j, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 9}\n"
    w = at(world(body), 40)
    (ev,) = [e for e in w.events if e.reason == "Unschedulable" and e.involved["kind"] == "Pod"]
    assert ev.count == 8 and ev.first_time < ev.last_time
    assert ev in w.live_events()
    at(w, 170)
    assert ev.count > 8


def test_it_expires_events_after_an_hour() -> None:
    w = at(
        world(
            TWO_PROJECTS
            + "jobs:\n  - {name: a, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 1, runtime: 5m}\n"
        ),
        90,
    )
    created = [e for e in w.events if e.reason == "SuccessfulCreate"]
    assert created and not any(e in w.live_events() for e in created)


def test_it_says_kueue_has_no_quota_left() -> None:
    body = """projects:
  - {name: a, quota: {gpu: 8}, limit: {gpu: 8}}
  - {name: b, quota: {gpu: 8}}
jobs:
  - {name: big, project: a, submit: 1m, pods: 2, gpus_per_pod: 8}
"""
    w = at(world(body, scheduler="kueue"), 3)
    job = w.jobs["big"]
    assert job.suspended and not w.pods_of(job)
    assert (job.condition_reason, job.condition_message) == (
        "Pending",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        "default-flavor, 8 more needed",
    )


def test_it_reclaims_over_quota_train_work_for_a_queue_under_its_quota() -> None:
    body = """projects:
  - {name: prod, quota: {gpu: 12}}
  - {name: research, quota: {gpu: 4}}
jobs:
  - {name: hog, project: research, submit: 1m, pods: 2, gpus_per_pod: 8}
  - {name: serve, project: prod, submit: 30m, pods: 1, gpus_per_pod: 8, priority: inference}
"""
    w = at(world(body), 35)
    assert w.jobs["serve"].state == "Running"
    hog = w.jobs["hog"]
    assert hog.state == "Pending" and hog.preempted_count == 1 and hog.last_preempted_by == "prod/serve"
    (p,) = w.preemptions
    assert p["kind"] == "reclaim" and p["victim_project_allocated"] > p["victim_project_quota"]
    evict = [e for e in w.events if e.reason == "Evict"]
    assert (
        evict[0].message.startswith("Pod research/hog-")
        and "was preempted by workload prod/pg-serve-" in evict[0].message
    )


def test_it_never_preempts_inference_work() -> None:
    body = """projects:
  - {name: prod, quota: {gpu: 12}}
  - {name: research, quota: {gpu: 4}}
jobs:
  - {name: hog, project: research, submit: 1m, pods: 2, gpus_per_pod: 8, priority: inference}
  - {name: serve, project: prod, submit: 30m, pods: 1, gpus_per_pod: 8, priority: inference}
"""
    w = at(world(body), 35)
    assert w.jobs["hog"].state == "Pending"  # inference over its quota is refused in the first place
    assert w.jobs["hog"].condition_message.startswith(
        "NonPreemptibleOverQuota: Non-preemptible workload is over quota."
    )


def test_it_crash_loops_with_growing_back_off() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - name: c
    project: nlp
    submit: 1m
    pods: 1
    gpus_per_pod: 1
    failure: {kind: crashloop, log: "KeyError: 'lr'", exit_code: 2}
"""
    )
    w = at(world(body), 30)
    (pod,) = w.pods_of(w.jobs["c"])
    assert pod.phase == "Running" and pod.restart_count >= 5
    assert pod.last_state["terminated"]["exitCode"] == 2 and pod.last_state["terminated"]["reason"] == "Error"
    assert any(line.endswith("KeyError: 'lr'") for line in pod.previous_logs + pod.logs)
    assert [lifecycle.backoff_s(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]
    assert lifecycle.go_duration(300) == "5m0s"


def test_it_kills_out_of_memory_containers() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - {name: m, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 1, failure: {kind: oom_killed}}
  - {name: g, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 1, failure: {kind: gpu_oom}}
"""
    )
    w = at(world(body), 30)
    (m,) = w.pods_of(w.jobs["m"])
    (g,) = w.pods_of(w.jobs["g"])
    assert (
        m.last_state["terminated"]["reason"] == "OOMKilled" and m.last_state["terminated"]["exitCode"] == 137
    )
    assert g.last_state["terminated"]["exitCode"] == 1
    assert any(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in line for line in g.previous_logs
    )


def test_it_leaves_pods_pending_when_the_new_image_does_not_exist() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - {name: j, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 1, image: r/x:1, failure: {kind: image_pull}}
events:
  - {at: 20m, image: {job: j, image: "r/x:2"}, actor: bob}
"""
    )
    w = at(world(body), 15)
    assert w.jobs["j"].state == "Running"  # the first image exists
    at(w, 30)
    (pod,) = w.pods_of(w.jobs["j"])
    assert pod.phase == "Pending" and pod.node is not None
    assert pod.container_state["waiting"] == {
        "reason": "ImagePullBackOff",
        "message": 'Back-off pulling image "r/x:2"',
    }
    assert w.jobs["j"].generation == 2
    assert [(c.field, c.actor) for c in w.changes] == [("image", "bob")]


def test_it_makes_a_gpu_vanish_on_xid_79() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - {name: j, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 8}
events:
  - {at: 20m, xid: {node: h100-01, gpu: 3, code: 79}}
"""
    )
    w = at(world(body), 19)
    assert w.gpu_metric("h100-01", 3, "DCGM_FI_DEV_GPU_UTIL") is not None
    at(w, 25)
    node = w.nodes["h100-01"]
    assert not node.gpus[3].present and node.allocatable_gpus == 7 and node.capacity_gpus == 7
    assert w.gpu_metric("h100-01", 3, "DCGM_FI_DEV_GPU_UTIL") is None
    assert w.gpu_metric("h100-01", 3, "DCGM_FI_DEV_GPU_UTIL", w.start.replace(minute=10)) is not None
    job = w.jobs["j"]
    assert all(p.node == "h100-02" for p in w.pods_of(job))  # the gang restarted on the healthy node


def test_it_keeps_a_gpu_after_an_application_xid() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - {name: j, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 8}
events:
  - {at: 20m, xid: {node: h100-01, gpu: 2, code: 13}}
"""
    )
    w = at(world(body), 21)
    node = w.nodes["h100-01"]
    assert node.gpus[2].healthy and node.allocatable_gpus == 8
    (pod,) = w.pods_of(w.jobs["j"])
    assert pod.node == "h100-01" and pod.restart_count == 1
    assert w.gpu_metric("h100-01", 2, "DCGM_FI_DEV_XID_ERRORS") == 13


def test_it_evicts_pods_from_a_node_not_ready_after_the_grace_period() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - {name: j, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 8}
events:
  - {at: 20m, node_ready: {node: h100-01, ready: false}}
"""
    )
    w = at(world(body), 23)
    (pod,) = w.pods_of(w.jobs["j"])
    assert pod.node == "h100-01" and not pod.ready
    at(w, 27)
    (new,) = w.pods_of(w.jobs["j"])
    assert new.node == "h100-02"
    old = [p for p in w.pods.values() if p.deleted_at is not None]
    assert old and old[0].node == "h100-01"  # stuck Terminating: the kubelet cannot confirm


def test_it_throttles_a_hot_gpu() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - {name: j, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 8, runtime: 1h}
events:
  - {at: 2m, thermal: {node: h100-01, gpu: 0, temp_c: 93}}
"""
    )
    w = at(world(body), 62)
    assert w.jobs["j"].state == "Running"  # slowed down to 60 %
    assert w.gpu_metric("h100-01", 0, "DCGM_FI_DEV_GPU_TEMP") == 93
    assert w.gpu_metric("h100-01", 0, "DCGM_FI_DEV_SM_CLOCK") < w.gpu_metric(
        "h100-01", 1, "DCGM_FI_DEV_SM_CLOCK"
    )
    at(w, 110)
    assert w.jobs["j"].state == "Succeeded"


def test_it_resubmits_a_job_when_its_request_changes() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - {name: j, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 4}
events:
  - {at: 10m, request: {job: j, pods: 2, gpus_per_pod: 8}, actor: alice}
  - {at: 10m, quota: {project: vision, quota: {gpu: 4}}, actor: admin}
"""
    )
    w = at(world(body), 12)
    job = w.jobs["j"]
    assert job.generation == 2 and [p.gpus_requested for p in w.pods_of(job)] == [8, 8]
    assert w.projects["vision"].quota_gpus == 4 and w.projects["vision"].last_manager == "admin"
    assert {(c.kind, c.field, c.actor) for c in w.changes} == {
        ("job", "pods", "alice"),
        ("job", "gpus_per_pod", "alice"),
        ("project", "quota", "admin"),
    }


def test_it_fires_and_resolves_alerts_like_prometheus() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - {name: j, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 8, runtime: 2h}
events:
  - {at: 10m, node_ready: {node: h100-02, ready: false}}
  - {at: 40m, node_ready: {node: h100-02, ready: true}}
alerts:
  - {name: NodeNotReady, for: 5m}
"""
    )
    w = at(world(body), 12)
    assert w.alerts() == [] and w.alerts(include_pending=True)[0]["status"] == "pending"
    at(w, 20)
    (a,) = w.alerts()
    assert a["status"] == "firing" and a["startsAt"] == "2026-11-29T00:15:00Z" and a["endsAt"] is None
    assert a["labels"] == {
        "alertname": "NodeNotReady",
        "severity": "critical",
        "cluster": "c",
        "node": "h100-02",
    }
    at(w, 45)
    (a2,) = w.alerts()
    assert a2["status"] == "resolved" and a2["endsAt"] == "2026-11-29T00:40:00Z"
    assert a2["fingerprint"] == a["fingerprint"]


def test_it_fingerprints_label_sets_like_alertmanager() -> None:
    from simulator.rules import fingerprint

    # FNV-1a 64 of the empty label set's offset basis, and order independence.
    assert fingerprint({"a": "1", "b": "2"}) == fingerprint({"b": "2", "a": "1"})
    assert len(fingerprint({"alertname": "X"})) == 16
    assert fingerprint({"alertname": "X"}) != fingerprint({"alertname": "Y"})


def test_it_stamps_every_write_with_a_growing_resource_version() -> None:
    w = at(
        world(TWO_PROJECTS + "jobs:\n  - {name: a, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 1}\n"), 1
    )
    rv = w.resource_version
    (pod,) = w.pods_of(w.jobs["a"])
    before = pod.resource_version
    at(w, 3)
    assert w.resource_version > rv and pod.resource_version > before
    assert (
        max(o.resource_version for o in [*w.nodes.values(), *w.pods.values(), *w.jobs.values()])
        <= w.resource_version
    )


def test_it_produces_the_same_run_for_the_same_seed() -> None:
    body = (
        TWO_PROJECTS
        + """jobs:
  - {name: c, project: nlp, submit: 1m, pods: 1, gpus_per_pod: 2, failure: {kind: crashloop}}
  - generate: {count: 12, project: vision, pods: 1, gpus_per_pod: [1, 2, 4], submit_every: 5m, runtime: [10m, 40m], name_prefix: g}
events:
  - {at: 30m, xid: {node: h100-01, gpu: 1, code: 48}}
alerts:
  - {name: GPUJobPendingTooLong, for: 5m}
  - {name: PodCrashLooping, for: 5m}
"""
    )
    a, b = at(world(body), 120), at(world(body), 120)
    assert json.dumps(a.snapshot(), sort_keys=True) == json.dumps(b.snapshot(), sort_keys=True)
    t = a.start.replace(minute=47)
    assert a.gpu_metric("h100-02", 0, "DCGM_FI_DEV_POWER_USAGE", t) == b.gpu_metric(
        "h100-02", 0, "DCGM_FI_DEV_POWER_USAGE", t
    )
    other = at(world(body, seed=2), 120)
    assert json.dumps(other.snapshot(), sort_keys=True) != json.dumps(a.snapshot(), sort_keys=True)


def test_it_forgets_telemetry_beyond_retention() -> None:
    from simulator import load_scenario
    from simulator.engine import World

    from .helpers import HEAD

    text = HEAD.format(scheduler="kai", nodes=1, duration="4h", seed=1) + TWO_PROJECTS
    w = World.from_scenario(load_scenario(text), retention_s=3600)
    at(w, 180)
    assert w.gpu_metric("h100-01", 0, "DCGM_FI_DEV_GPU_TEMP", w.start.replace(hour=2, minute=30)) is not None
    assert w.gpu_metric("h100-01", 0, "DCGM_FI_DEV_GPU_TEMP", w.start.replace(hour=1)) is None


def test_it_builds_a_big_world_through_the_real_scheduler() -> None:
    from simulator.engine.big import build_big_world

    w = build_big_world(nodes=20, pods=400, projects=4)
    assert len(w.nodes) == 20 and sum(len(n.gpus) for n in w.nodes.values()) == 160
    assert len(w.pods) == 400 and sum(1 for p in w.pods.values() if p.node) == 160
    assert sum(1 for j in w.jobs.values() if j.state == "Running") == 160
    waiting = [j for j in w.jobs.values() if j.state == "Pending"]
    assert len(waiting) == 240 and all(j.condition_message.startswith("OverLimit: ") for j in waiting)
