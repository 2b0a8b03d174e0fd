"""collectors.podstatus: a pod's status as kubectl shows it, and the job and pod pages that use it."""

from __future__ import annotations

from collectors.podstatus import container_trouble, pod_status, pods_in_trouble


def _state(phase, containers, **extra):
    return {"phase": phase, "containers": containers, **extra}


CRASH = {
    "name": "main",
    "ready": False,
    "state": {
        "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}
    },
    "last_state": {"terminated": {"reason": "Error", "exitCode": 1}},
    "restart_count": 7,
}
READY = {"name": "main", "ready": True, "state": {"running": {"startedAt": "2026-11-29T00:00:00Z"}}}


def test_a_crash_looping_pod_reads_crashloopbackoff_not_running():
    assert pod_status(_state("Running", [CRASH]), "Running") == "CrashLoopBackOff"


def test_a_healthy_pod_reads_its_phase():
    assert pod_status(_state("Running", [READY]), "Running") == "Running"
    assert container_trouble(_state("Running", [READY])) == ""


def test_an_image_pull_failure_reads_its_reason_while_the_pod_is_pending():
    pull = {"name": "main", "ready": False, "state": {"waiting": {"reason": "ImagePullBackOff"}}}
    assert pod_status(_state("Pending", [pull]), "Pending") == "ImagePullBackOff"


def test_a_container_that_ended_in_a_running_pod_names_why():
    ended = {
        "name": "side",
        "ready": False,
        "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
    }
    assert pod_status(_state("Running", [READY, ended]), "Running") == "OOMKilled"
    # A finished pod's ended containers are its normal end, not trouble.
    done = {"name": "main", "ready": False, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}
    assert pod_status(_state("Succeeded", [done]), "Succeeded") == "Succeeded"


def test_a_deleting_pod_reads_terminating():
    assert pod_status(_state("Running", [READY], deleting="2026-11-29T00:00:00Z"), "Running") == "Terminating"


def test_it_counts_the_reasons_over_a_jobs_pods():
    class Row:
        def __init__(self, state):
            self.state = state

    rows = [Row(_state("Running", [CRASH])), Row(_state("Running", [CRASH])), Row(_state("Running", [READY]))]
    assert pods_in_trouble(rows) == {"CrashLoopBackOff": 2}
