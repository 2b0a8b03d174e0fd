"""Every list page costs the same number of queries at two sizes of history (docs/design.md §10: budgets are tests).

The data grows the way production grows it: pending jobs recorded by sweeps, their GPUJobPendingTooLong
alerts through the intake and grouping, a diagnosis run each, handoff notes and status changes (audit
entries), and further sweeps that open new versions of every node. Each page's query count at the small
size is measured, then the history is tripled and more, and the count must not move: a query per incident,
per version or per note would.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.inventory import record_states
from incidents.grouping import group_alert
from incidents.handoffs import services as handoffs
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, DiagnosisRun, Hypothesis, Incident
from incidents.services import set_status
from tests.base import T0, BaseTestCase
from tests.collectors.factories import job_obs, node_obs, pod_obs, project_obs, queue_obs
from tests.incidents.fixtures.alertmanager import alert, payload

NODES = 4
T = "2026-11-29T06:00:00Z"  # the cursor every page is read at, its window over the whole history below
W = "6h"
PAGES = {
    "home": "/",
    "incidents": "/incidents/",
    "incidents, active": "/incidents/?status=active",
    "incidents, by cause": "/incidents/?cause=quota",
    "handoffs": "/handoffs/",
    "handoffs.md": "/handoffs.md",
    "changes": "/changes/",
    "jobs": "/c/gpu-prod/jobs/",
    "queues": "/c/gpu-prod/queues/",
    "usage": "/c/gpu-prod/usage/",
    "fleet": "/fleet/",
    "slo": "/slo/",
    "slo jobs waited": "/slo/jobs/?metric=wait",
    "slo jobs waiting": "/slo/jobs/?metric=waiting",
    "slo jobs by cause": "/slo/jobs/?metric=code",
    "audit": "/audit/",
}


def sweep(cluster, at: datetime, jobs: int, round_: int) -> None:  # type: ignore[no-untyped-def]
    """One inventory sweep at ``at``: the nodes (their revision moves: new versions each time), the projects,
    and ``jobs`` jobs, the newest pending, the others running on a node."""
    obs = [node_obs(f"h100-{i:02d}", revision=round_) for i in range(NODES)]
    obs += [
        project_obs("vision", quota=16, limit=24),
        queue_obs("vision", project="vision", quota=16, limit=24),
    ]
    for j in range(jobs):
        pending = j == jobs - 1
        phase, node = ("Pending", "") if pending else ("Running", f"h100-{j % NODES:02d}")
        submitted = T0 + timedelta(minutes=10 * j)
        message = "project vision is over quota" if pending else ""
        obs.append(
            job_obs(
                "vision",
                f"train-{j:02d}",
                queue="vision",
                phase=phase,
                pods=1,
                gpus_per_pod=8,
                submitted=submitted,
                message=message,
            )
        )
        obs.append(
            pod_obs(
                "vision",
                f"train-{j:02d}-0",
                job=f"train-{j:02d}",
                queue="vision",
                gpus=8,
                phase=phase,
                node=node,
                created=submitted,
                message=message,
            )
        )
    record_states(cluster, obs, at)


class ListBudgetTests(BaseTestCase):
    jobs = 0

    def grow(self, to: int) -> None:
        """Jobs ``self.jobs``..``to - 1``, each submitted, swept, alerted, grouped, diagnosed; every other
        incident gets a handoff note and is acknowledged, every third is resolved."""
        for j in range(self.jobs, to):
            at = T0 + timedelta(minutes=10 * j)
            sweep(self.cluster, at, j + 1, j)
            body = alert(
                "GPUJobPendingTooLong",
                {"cluster": "gpu-prod", "namespace": "vision", "job_name": f"train-{j:02d}"},
                at,
                severity="critical" if j % 4 == 0 else "warning",
            )
            ingest_alertmanager(payload([body]))
            incident = group_alert(Alert.objects.get(fingerprint=body["fingerprint"]))
            run = DiagnosisRun.objects.create(
                incident=incident,
                at=at,
                made_at=at,
                top_code="project_quota_exhausted",
                top_statement="project vision uses 16 of 16 GPUs of quota",
                supported=1,
            )
            Hypothesis.objects.create(
                incident=incident,
                run=run,
                code="project_quota_exhausted",
                rank=0,
                confidence=0.9,
                status="supported",
                statement="project vision uses 16 of 16 GPUs of quota",
            )
            Incident.objects.filter(pk=incident.pk).update(
                cause_key="project_quota_exhausted|project/vision", diagnosed_at=at
            )
            if j % 2:
                handoffs.create_handoff(
                    incident,
                    self.alice,
                    {
                        "summary": f"train-{j:02d} waits",
                        "checked": "",
                        "missing": "",
                        "next_steps": "",
                        "owner": "",
                    },
                )
                set_status(incident, "acknowledged", self.alice, "")
            if j % 3 == 2:
                Incident.objects.filter(pk=incident.pk).update(
                    status="resolved", resolved_at=at + timedelta(minutes=5), window_end=at
                )
        self.jobs = to

    def counts(self) -> dict[str, int]:
        admin = self.login_as(self.carol)  # the audit log is for admins
        out = {}
        for name, path in PAGES.items():
            client = admin if name == "audit" else self.client
            url = f"{path}{'&' if '?' in path else '?'}t={T}&w={W}"
            client.get(url)  # warm: a first request may fill per-process caches
            with CaptureQueriesContext(connection) as ctx:
                r = client.get(url)
            self.assertEqual(r.status_code, 200, (name, r.content[:300]))
            out[name] = len(ctx)
        return out

    def test_every_list_page_costs_the_same_queries_at_two_sizes(self) -> None:
        self.grow(4)
        small = self.counts()
        self.grow(14)
        self.assertEqual(Incident.objects.count(), 14)
        large = self.counts()
        for name in PAGES:
            with self.subTest(name):
                self.assertEqual(large[name], small[name], f"{name}: {small[name]} → {large[name]} queries")

    def test_the_pages_list_what_grew(self) -> None:
        # The equal counts above are about pages that show the larger history, not empty ones.
        self.grow(14)
        html = self.client.get(f"/incidents/?t={T}&w={W}").content.decode()
        self.assertEqual(len(set(re.findall(r'href="/incidents/(\d+)/', html))), 14, "every incident linked")
        jobs = self.client.get(f"/c/gpu-prod/jobs/?t={T}&w={W}").content.decode()
        self.assertIn("train-13", jobs)
        notes = self.client.get(f"/handoffs/?t={T}&w={W}").content.decode()
        self.assertIn("train-13 waits", notes)
