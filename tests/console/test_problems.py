"""One problem, many incidents (issue: incidents workable): a quota cut that blocks several jobs is one row.

The pipeline test runs a scenario through the real intake and diagnosis: every blocked job raises its own
alert and incident, and the home page shows them as one problem under the shared cause, each still linked.
"""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from incidents import problems
from incidents.diagnosis import codes as C
from incidents.diagnosis.types import Finding, Ref
from incidents.models import Incident
from tests.collectors.factories import T0, PageTestCase

QUOTA_CUT = """
format: 1
name: quota-cut-many
summary: The admin cuts vision's quota; its three training jobs submitted afterwards all wait.
start: 2026-11-29T00:00:00Z
duration: 2h
seed: 11
cluster:
  name: gpu-prob
  scheduler: kai
  nodepools:
    - {name: h100, nodes: 4, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3}
projects:
  - {name: vision, quota: {gpu: 24}, limit: {gpu: 24}}
  - {name: nlp, quota: {gpu: 8}, limit: {gpu: 8}}
jobs:
  - {name: vision-base, project: vision, submit: 2m, pods: 1, gpus_per_pod: 8, runtime: 3h}
  - {name: train-a, project: vision, submit: 25m, pods: 1, gpus_per_pod: 4, runtime: 2h}
  - {name: train-b, project: vision, submit: 27m, pods: 1, gpus_per_pod: 4, runtime: 2h}
  - {name: train-c, project: vision, submit: 29m, pods: 1, gpus_per_pod: 8, runtime: 2h}
  - {name: eval-sel, project: nlp, submit: 25m, pods: 1, gpus_per_pod: 2, runtime: 1h,
     node_selector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}}
events:
  - {at: 20m, quota: {project: vision, quota: {gpu: 8}, limit: {gpu: 8}}, actor: platform-admin}
alerts:
  - {name: GPUJobPendingTooLong, for: 15m}
"""


def finding(code: str, status: str = "supported", subject: Ref | None = None, **facts: object) -> Finding:
    return Finding(code, "s", status, 0.9, subject=subject, facts=dict(facts))


def test_the_key_names_the_shared_object_of_a_supported_cause() -> None:
    job = Ref("job", "train-a", "vision")
    assert problems.cause_key(finding(C.PROJECT_QUOTA_EXHAUSTED, subject=job, project="vision")) == (
        "project_quota_exhausted|project/vision"
    )
    assert problems.cause_key(
        finding(C.GPU_XID_FAULT, subject=Ref("gpu", "GPU-1"), node="n1", gpu="GPU-1")
    ) == ("gpu_xid_fault|gpu/GPU-1")
    assert problems.cause_key(finding(C.GPU_NODE_UNAVAILABLE, subject=Ref("node", "n1"))) == (
        "gpu_node_unavailable|node/n1"
    )
    # the subject's own fault is its own problem; a refuted or elsewhere finding names none
    assert problems.cause_key(finding(C.CRASHLOOP_CONFIG_ERROR, subject=job)) == ""
    assert (
        problems.cause_key(finding(C.PROJECT_QUOTA_EXHAUSTED, "refuted", subject=job, project="vision")) == ""
    )
    elsewhere = finding(C.GPU_XID_FAULT, subject=Ref("gpu", "GPU-1"), gpu="GPU-1")
    elsewhere.scope = "elsewhere"
    assert problems.cause_key(elsewhere) == "" and problems.cause_key(None) == ""
    assert problems.describe("project_quota_exhausted|project/vision") == (
        "project_quota_exhausted",
        "project vision",
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")  # the webhook's server threads must see the database
def test_jobs_blocked_by_one_quota_cut_are_one_problem_on_the_home_page(tmp_path: Path) -> None:
    path = tmp_path / "cut.yaml"
    path.write_text(QUOTA_CUT)
    call_command("run_scenario", str(path), "--json", "--database", "configured", stdout=StringIO())
    blocked = {
        i.title.split(" ")[0]: i
        for i in Incident.objects.filter(cause_key="project_quota_exhausted|project/vision")
    }
    assert {"vision/train-a", "vision/train-b", "vision/train-c"} <= set(blocked), [
        (i.title, i.cause_key) for i in Incident.objects.all()
    ]
    other = Incident.objects.exclude(cause_key="project_quota_exhausted|project/vision")
    assert other.exists() and all(i.cause_key != "project_quota_exhausted|project/vision" for i in other)
    moment = min(i.onset for i in blocked.values()) + timedelta(minutes=1)
    moment = max(moment, max(i.onset for i in blocked.values()))
    client = Client()
    client.force_login(User.objects.create_user("op", password="pw-op-12345"))
    html = client.get("/", {"t": moment.strftime("%Y-%m-%dT%H:%M:%SZ")}).content.decode()
    panel = html.split('id="panel-incidents"')[1].split("</section>")[0]
    rows = re.findall(r"<tr><td class=\"num\">(\d+)</td>", panel)
    ids = {str(i.pk) for i in blocked.values()}
    assert len(ids & set(rows)) == 1, "the problem is one row"
    assert (
        f"{len(blocked)} incidents</span> one cause: <code>project_quota_exhausted</code> on project vision"
        in panel
    )
    for inc in blocked.values():  # every member still one click away
        assert f"/incidents/{inc.pk}/" in panel


class HomeProblemBudgetTest(PageTestCase):
    def make(self, n: int) -> None:
        for i in range(n):
            Incident.objects.create(
                title=f"vision/train-{i} waiting",
                severity="warning",
                cluster=self.cluster,
                onset=T0 + timedelta(minutes=10 + i),
                window_start=T0,
                cause_key="project_quota_exhausted|project/vision",
            )
        Incident.objects.create(
            title="a100-07 NotReady",
            severity="critical",
            cluster=self.cluster,
            onset=T0 + timedelta(minutes=5),
            window_start=T0,
        )

    def test_members_counted_and_listed_at_a_cost_independent_of_their_number(self) -> None:
        counts = []
        for n in (3, 30):
            Incident.objects.all().delete()
            self.make(n)
            with CaptureQueriesContext(connection) as q:
                html = self.get("/", t=self.times["end"]).content.decode()
            counts.append(len(q.captured_queries))
            panel = html.split('id="panel-incidents"')[1].split("</section>")[0]
            assert f'{n + 1}</span> <small class="muted">in 2 problems' in panel, panel
            assert f"{n} incidents</span> one cause" in html
            if n == 30:
                assert "and 21 more" in html and "cause=project_quota_exhausted%7Cproject%2Fvision" in html
            # the critical node incident is first; the problem's lead is its oldest member
            assert html.index("a100-07 NotReady") < html.index("vision/train-0 waiting")
        assert counts[0] == counts[1]

    def test_the_list_filters_one_problem(self) -> None:
        self.make(3)
        html = self.get("/incidents/?cause=project_quota_exhausted%7Cproject%2Fvision").content.decode()
        assert html.count("vision/train-") == 3 and "a100-07 NotReady" not in html
