"""web.inventory.podstatus: a pod's status as kubectl shows it, and the job and pod pages that use it."""

from __future__ import annotations

import pytest

from web.inventory.podstatus import container_trouble, pod_status, pods_in_trouble


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


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")  # the webhook's server threads must see the database
def test_a_crash_looping_job_reads_crashloopbackoff_on_its_project_and_queue_pages():
    """Through the real pipeline (tests/e2e/scenario.yaml: llama-ft crash-loops with CUDA OOM)."""
    import re
    from io import StringIO
    from pathlib import Path

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    scenario = Path(__file__).resolve().parents[1] / "e2e" / "scenario.yaml"
    call_command("run_scenario", str(scenario), "--json", "--database", "configured", stdout=StringIO())
    client = Client()
    client.force_login(User.objects.create_user("op-ps", password="pw-op-12345"))
    for path in ("/c/gpu-prod/projects/llm/", "/c/gpu-prod/queues/llm/"):
        html = client.get(path, {"t": "2026-11-29T00:35:00Z", "w": "1h"}).content.decode()
        running = html.split('id="jobs-running"')[1].split("</section>")[0]
        row = next(r for r in re.findall(r"<tr>.*?</tr>", running, re.S) if "llama-ft" in r)
        assert "CrashLoopBackOff" in row, (path, row)
        bert = html.split('id="jobs-running"')[1]
        assert "CrashLoopBackOff" not in "".join(
            r for r in re.findall(r"<tr>.*?</tr>", bert, re.S) if "bert-train" in r
        )
