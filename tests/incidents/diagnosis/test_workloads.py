"""Workload checks: crash loops with their explaining log line, host OOM vs CUDA OOM, image pulls, preemption."""

from __future__ import annotations

from datetime import timedelta

from incidents.diagnosis import codes as C
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.types import EventRec, LogRec, Ref
from incidents.diagnosis.workloads import check_workloads, explaining_line

from .dx_world import T0, change, job, node, pod, world

JOB = Ref("job", "train", "vision")


def crashed(reason: str = "Error", exit_code: int = 1, waiting: str = "CrashLoopBackOff") -> list[dict]:
    return [
        {
            "name": "main",
            "image": "registry.local/vision/resnet:1.5",
            "gpus": 4,
            "state": {"waiting": {"reason": waiting, "message": "back-off 5m0s"}},
            "last_state": {
                "terminated": {"reason": reason, "exitCode": exit_code, "finishedAt": "2026-11-29T00:50:00Z"}
            },
            "restart_count": 4,
            "ready": False,
        }
    ]


def by_code(findings):
    return {f.code: f for f in findings}


def _world(containers, lines=(), **extra):
    p = pod("train-0", "train", "vision", node_name="h100-01", gpus=4, containers=containers)
    logs = (
        [LogRec(Ref("pod", "train-0", "vision"), "main", list(lines), previous=True, obs_id=21)]
        if lines
        else []
    )
    return world(
        subjects=[JOB],
        nodes=[node("h100-01")],
        jobs=[job("train", phase="Running", gpus_per_pod=4)],
        pods=[p],
        logs=logs,
        **extra,
    )


def test_it_names_the_log_line_that_explains_a_crash_loop():
    di = _world(
        crashed(),
        ["loading config", "FileNotFoundError: [Errno 2] No such file or directory: '/config/train.yaml'"],
    )
    f = by_code(check_workloads(di))[C.CRASHLOOP_CONFIG_ERROR]
    assert f.status == "supported" and "exit code 1" in f.statement and "/config/train.yaml" in f.statement
    assert 21 in f.supports


def test_it_leaves_an_unexplained_crash_unverified():
    f = by_code(check_workloads(_world(crashed())))[C.CRASHLOOP_CONFIG_ERROR]
    assert f.status == "unverified" and f.confidence < 0.5


def test_it_tells_host_oom_from_cuda_oom():
    host = by_code(check_workloads(_world(crashed("OOMKilled", 137))))
    assert host[C.OOM_KILLED].status == "supported" and host[C.GPU_OOM].status == "refuted"
    cuda = by_code(
        check_workloads(
            _world(
                crashed("Error", 1),
                [
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity)"
                ],
            )
        )
    )
    assert cuda[C.GPU_OOM].status == "supported" and cuda[C.OOM_KILLED].status == "refuted"
    assert C.CRASHLOOP_CONFIG_ERROR not in cuda


def test_it_ties_an_image_pull_error_to_the_image_change():
    containers = [
        {
            "name": "main",
            "image": "registry.local/recsys/ranker:3.3-rc1",
            "gpus": 4,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
            "last_state": {},
            "restart_count": 0,
            "ready": False,
        }
    ]
    di = _world(
        containers,
        changes=[
            change(
                "job",
                "train",
                "image",
                "registry.local/recsys/ranker:3.2",
                "registry.local/recsys/ranker:3.3-rc1",
                T0 + timedelta(minutes=30),
                "bob",
                "vision",
            )
        ],
    )
    f = by_code(check_workloads(di))[C.IMAGE_PULL_ERROR]
    assert f.status == "supported" and "ranker:3.2" in f.statement and "bob" in f.statement
    actions = run_checks(di).actions
    assert any("Roll the image back to registry.local/recsys/ranker:3.2" in a.title for a in actions)


def test_it_says_who_preempted_the_job():
    ev = EventRec(
        time=T0 + timedelta(minutes=40),
        reason="Evict",
        involved=Ref("podgroup", "pg-train-1a2b3c4d", "vision"),
        message="Pod vision/train-0 was preempted by workload prod/pg-prod-serve-9f8e7d6c.",
        obs_id=31,
    )
    serve = job("prod-serve", "prod", phase="Running", priority_class="inference")
    di = world(subjects=[JOB], nodes=[node("h100-01")], jobs=[job("train"), serve], events=[ev])
    f = by_code(check_workloads(di))[C.PREEMPTED]
    assert (
        f.status == "supported"
        and "prod/prod-serve (queue prod, inference)" in f.statement
        and 31 in f.supports
    )


def test_it_finds_the_explaining_line_from_the_most_specific_pattern():
    assert (
        explaining_line(
            ["Traceback (most recent call last):", "PermissionError: [Errno 13] Permission denied"]
        )[1]
        == "a permission problem"
    )
    assert explaining_line(["all good"]) is None


def test_an_idle_gpu_held_by_a_pod_that_never_ran_is_explained_by_the_pods_failure():
    # The idle alert names the GPU; the pod holding it cannot pull its image, so the GPU sits allocated and
    # idle. That failure is the answer, not "idle allocation" (which leaves a pod that never ran to the
    # crash's or pull's own finding).
    from .dx_world import gpu, series

    uuid = "GPU-0"
    pull = [
        {
            "name": "main",
            "image": "registry.local/recsys/ctr:5.1-rc",
            "gpus": 2,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
            "last_state": {},
            "restart_count": 0,
            "ready": False,
        }
    ]

    def di(xid: int = 0, values: tuple[float, ...] = (0.0,) * 12):  # type: ignore[no-untyped-def]
        return world(
            subjects=[Ref("gpu", uuid)],
            nodes=[node("h100-01")],
            gpus=[gpu(uuid, "h100-01", 0, pod_ref="recsys/ctr-0", xid=xid)],
            pods=[
                pod("ctr-0", "ctr", "recsys", node_name="h100-01", gpus=2, containers=pull, phase="Pending")
            ],
            series=[series("DCGM_FI_PROF_SM_ACTIVE", uuid, "h100-01", list(values), start=T0)],
        )

    f = by_code(check_workloads(di()))
    assert f[C.IMAGE_PULL_ERROR].status == "supported" and "ctr:5.1-rc" in f[C.IMAGE_PULL_ERROR].statement
    assert C.IMAGE_PULL_ERROR not in by_code(
        check_workloads(di(values=(0.7,) * 12))
    )  # busy: not its GPU's story
    assert C.IMAGE_PULL_ERROR not in by_code(check_workloads(di(xid=79)))  # faulty GPU: maybe the consequence
