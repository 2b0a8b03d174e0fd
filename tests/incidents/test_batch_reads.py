"""A re-diagnosis batch reads the fleet's history and changes once, whatever the number of incidents in it.

docs/design.md §10: query-count budgets are tests. Inside ``batch_reads.shared_reads`` (how
``rediagnose_changed`` runs the incidents due after a sweep) the waiting jobs' incidents of one cluster share
the fleet-wide reads: the batch's queries grow by the same count per incident, and those two reads happen once.
The shared rows give each diagnosis the same input as its own reads would.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.inventory import Observed, record_states
from collectors.models import Cluster, Entity, SourceRun
from incidents import batch_reads, snapshot
from incidents.diagnosis_input import load_incident_input
from incidents.diagnosis_run import diagnose_incident
from incidents.models import Incident, IncidentSubject
from tests.base import T0, BaseTestCase
from tests.collectors.factories import crowd_node, job_obs
from tests.incidents.fixtures.alertmanager import small_world

ONSET = T0 + timedelta(minutes=5)
FLEET_HISTORY = """"collectors_entityversion"."kind" IN ('queue', 'project', 'node')"""
FLEET_CHANGES = """IN ('queue', 'project', 'department', 'node', 'gpu')"""


class BatchReadsTest(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        snapshot.forget()
        self.addCleanup(snapshot.forget)
        cluster: Cluster = self.cluster
        small_world(cluster, T0, nodes=4)
        at = T0 - timedelta(minutes=30)
        for i in range(5, 9):  # full nodes, so the waiting jobs wait
            crowd_node(cluster, f"h100-{i:02d}", 8, at)
        # the four jobs ahead take the room small_world leaves free, so each incident's job waits alike
        ahead = [
            job_obs(
                "crowd",
                f"ahead-{i}",
                queue="nlp",
                phase="Pending",
                pods=1,
                gpus_per_pod=8,
                submitted=at - timedelta(minutes=10),
            )  # fmt: skip
            for i in range(4)
        ]
        record_states(
            cluster,
            [
                *ahead,
                *(
                    job_obs(
                        "crowd",
                        f"waiting-{i}",
                        queue="nlp",
                        phase="Pending",
                        pods=1,
                        gpus_per_pod=8,
                        submitted=at,
                    )
                    for i in range(7)
                ),
            ],
            at,
        )
        record_states(
            cluster,
            [Observed("queue", "nlp", {"project": "nlp", "quota_gpus": 8}, hot={"project": "nlp"})],
            at,
        )
        SourceRun.objects.create(cluster=cluster, source="k8s", call="list pods", time=ONSET, ok=True)
        self.incidents = []
        for i in range(7):
            incident = Incident.objects.create(
                title="GPUJobPendingTooLong",
                cluster=cluster,
                onset=ONSET,
                window_start=ONSET - timedelta(hours=1),
            )
            job = Entity.objects.get(cluster=cluster, kind="job", name=f"waiting-{i}")
            IncidentSubject.objects.create(incident=incident, entity=job, role="subject")
            self.incidents.append(incident)

    def batch(self, incidents: list[Incident]) -> list[str]:
        with CaptureQueriesContext(connection) as ctx, batch_reads.shared_reads():
            for incident in incidents:
                diagnose_incident(incident.pk, t=ONSET)
        return [q["sql"] for q in ctx.captured_queries]

    def test_the_fleet_is_read_once_and_each_incident_costs_the_same(self) -> None:
        one = self.batch(self.incidents[:1])
        two = self.batch(self.incidents[1:3])
        four = self.batch(self.incidents[3:7])
        for sqls in (one, two, four):
            self.assertEqual(sum(FLEET_HISTORY in s for s in sqls), 1, sqls)
            self.assertEqual(sum(FLEET_CHANGES in s for s in sqls), 1, sqls)
        per_incident = len(two) - len(one)
        self.assertEqual(len(four) - len(two), 2 * per_incident, four)

    def test_outside_a_batch_each_incident_reads_its_own(self) -> None:
        with CaptureQueriesContext(connection) as ctx:
            for incident in self.incidents[:2]:
                diagnose_incident(incident.pk, t=ONSET)
        self.assertEqual(sum(FLEET_HISTORY in q["sql"] for q in ctx.captured_queries), 2)
        # each incident's changes in its own query, which names the node and GPU kinds apart from the policy's
        self.assertEqual(sum(FLEET_CHANGES in q["sql"] for q in ctx.captured_queries), 0)

    def test_the_shared_rows_make_the_same_input(self) -> None:
        incident = self.incidents[0]
        alone = load_incident_input(incident, ONSET)
        with batch_reads.shared_reads():
            load_incident_input(self.incidents[1], ONSET)  # the batch's rows are read by another incident
            shared = load_incident_input(incident, ONSET)
        self.assertTrue(alone.history and alone.changes)
        self.assertEqual(
            {
                ref: [(s.valid_from, s.valid_to, s.state) for s in states]
                for ref, states in alone.history.items()
            },
            {
                ref: [(s.valid_from, s.valid_to, s.state) for s in states]
                for ref, states in shared.history.items()
            },
        )
        self.assertEqual(alone.changes, shared.changes)

    def test_the_jobs_ahead_counted_in_a_batch_are_those_counted_alone(self) -> None:
        # a pass of 3 jobs leaves 8 beyond it: their order is worked out by the batch's first diagnosis only
        from unittest import mock

        from incidents.diagnosis import ahead as A
        from incidents.diagnosis.scheduling_pass import cluster_pass

        def ahead_of(incident: Incident) -> tuple[int, bool]:
            di = load_incident_input(incident, ONSET)
            job = di.find("job", di.subjects[0].name, di.subjects[0].namespace)
            assert job is not None
            with di.indexed():
                count = A.jobs_ahead(di, job).count
            return count, bool(di.batch and di.batch.get("cluster_order_rest"))

        with mock.patch.object(A, "cluster_pass", lambda di: cluster_pass(di, limit=3)):
            alone = [ahead_of(incident) for incident in self.incidents]
            with batch_reads.shared_reads():
                shared = [ahead_of(incident) for incident in self.incidents]
        self.assertEqual([c for c, _ in alone], [c for c, _ in shared])
        counts = sorted(c for c, _ in alone)
        self.assertEqual(counts, list(range(counts[0], counts[0] + 7)))  # one after another, past the pass's 3
        self.assertFalse(any(s for _, s in alone))
        self.assertTrue(all(s for _, s in shared))
