"""Diagnosing one waiting job costs the same number of queries on a 2-node cluster and on a crowded 30-node one.

docs/design.md §10: query-count budgets are tests. The diagnosis reads the fleet one query per kind (nodes,
GPUs, jobs by their hot keys, unfinished pods with what the fit counts), the incident's own jobs in full in
one more, and the changes it can read in one: nothing per node, pod or job (docs/diagnosis.md "Bounded by
the incident"). A failing budget names the queries it ran.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.inventory import Observed, record_states
from collectors.models import Cluster, Entity, SourceRun
from incidents import snapshot
from incidents.diagnosis_run import diagnose_incident
from incidents.models import Hypothesis, Incident, IncidentSubject
from tests.base import T0, BaseTestCase
from tests.collectors.factories import crowd_node, job_obs
from tests.incidents.fixtures.alertmanager import small_world

ONSET = T0 + timedelta(minutes=5)
# Incident, its moment, links, alerts, observations; the inventory (snapshot keys, fleet kinds, the incident's
# jobs, departments, subject pods, history, changes, events, samples, source runs); storing the runs,
# hypotheses with their citations, derived facts and actions, the title. The snapshot key is three aggregates
# (the last inventory change at or before t, the newest version and source run ids).
BUDGET = 59


class DiagnosisBudgetTest(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        snapshot.forget()
        self.addCleanup(snapshot.forget)

    def incident(self, cluster: Cluster) -> Incident:
        SourceRun.objects.create(cluster=cluster, source="k8s", call="list pods", time=ONSET, ok=True)
        incident = Incident.objects.create(
            title="GPUJobPendingTooLong",
            cluster=cluster,
            onset=ONSET,
            window_start=ONSET - timedelta(hours=1),
        )
        job = Entity.objects.get(cluster=cluster, kind="job", name="resnet-train")
        IncidentSubject.objects.create(incident=incident, entity=job, role="subject")
        return incident

    def count(self, incident: Incident) -> tuple[int, list[str], list[str]]:
        with CaptureQueriesContext(connection) as ctx:
            saved = diagnose_incident(incident.pk, t=ONSET)
        codes = sorted(f"{h.code}:{h.status}" for h in saved)
        return len(ctx.captured_queries), [q["sql"][:160] for q in ctx.captured_queries], codes

    def test_one_pending_job_costs_the_same_queries_whatever_the_fleet(self) -> None:
        small = self.cluster
        small_world(small, T0, nodes=2)
        n_small, sql_small, codes_small = self.count(self.incident(small))

        big = Cluster.objects.create(name="gpu-big", scheduler="kai")
        small_world(big, T0, nodes=30)
        at = T0 - timedelta(minutes=30)
        for i in range(3, 31):  # 28 full nodes: 8 running pods of 8 jobs each, in another queue
            crowd_node(big, f"h100-{i:02d}", 8, at)
        record_states(  # and 40 jobs waiting in that queue
            big,
            [
                job_obs(
                    "crowd",
                    f"waiting-{i}",
                    queue="nlp",
                    phase="Pending",
                    pods=1,
                    gpus_per_pod=8,
                    submitted=at,
                )
                for i in range(40)
            ],
            at,
        )
        record_states(
            big, [Observed("queue", "nlp", {"project": "nlp", "quota_gpus": 8}, hot={"project": "nlp"})], at
        )
        incident = self.incident(big)
        n_big, sql_big, codes_big = self.count(incident)

        self.assertTrue(Hypothesis.objects.filter(incident=incident).exists())
        self.assertEqual(codes_big, codes_small)  # the same diagnosis, so the same rows stored
        self.assertLessEqual(n_small, BUDGET, sql_small)
        self.assertEqual(n_big, n_small, sql_big)


class PartialCitationTest(BaseTestCase):
    """A job read by its hot keys only is stored whole when a finding cites it (DiagnosisInput.partial)."""

    def test_a_cited_job_of_another_queue_is_stored_as_the_inventory_holds_it(self) -> None:
        from collectors.models import EntityVersion
        from incidents.diagnosis.citations import cite_state
        from incidents.diagnosis.types import Finding
        from incidents.diagnosis_input import load_incident_input
        from incidents.diagnosis_store import store_derived
        from incidents.models import Observation

        snapshot.forget()
        self.addCleanup(snapshot.forget)
        small_world(self.cluster, T0, nodes=2)
        at = T0 - timedelta(minutes=30)
        record_states(  # a job of a higher-priority queue waits ahead of resnet-train
            self.cluster,
            [
                Observed(
                    "queue",
                    "prod",
                    {"project": "prod", "quota_gpus": 64, "priority": 100},
                    hot={"project": "prod"},
                ),
                job_obs(
                    "prod",
                    "serve",
                    queue="prod",
                    phase="Pending",
                    pods=1,
                    gpus_per_pod=8,
                    submitted=at,
                    message="waiting for capacity",
                    priority_class="inference",
                ),
            ],
            at,
        )
        SourceRun.objects.create(cluster=self.cluster, source="k8s", call="list pods", time=ONSET, ok=True)
        incident = Incident.objects.create(
            title="GPUJobPendingTooLong",
            cluster=self.cluster,
            onset=ONSET,
            window_start=ONSET - timedelta(hours=1),
        )
        job = Entity.objects.get(cluster=self.cluster, kind="job", name="resnet-train")
        IncidentSubject.objects.create(incident=incident, entity=job, role="subject")
        di = load_incident_input(incident, ONSET)
        serve = di.find("job", "serve", "prod")
        self.assertIn(serve.ref, di.partial)
        self.assertNotIn("scheduling", serve.state)  # read by its hot keys
        # No check cites another queue's job today (the queue order is its own fact); the store completes one
        # that would be cited.
        finding = Finding("queue_priority", "s", "supported", 0.5, supports=[cite_state(serve, ONSET)])
        ids = store_derived(incident, di, [finding])
        whole = EntityVersion.objects.as_of(ONSET).get(entity__name="serve", kind="job").state
        self.assertIn("scheduling", whole)
        stored = Observation.objects.get(pk=next(iter(ids.values())))
        self.assertEqual(stored.content["state"], whole)
        self.assertEqual(stored.entity.name, "serve")
