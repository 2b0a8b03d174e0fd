"""/incidents/: filters validated by a form (an invalid filter is a 400), bounded queries, links keep the cursor."""

from __future__ import annotations

from datetime import timedelta

from collectors.inventory import Observed, record_states
from collectors.models import Cluster
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, Incident
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import alert, payload, small_world


class IncidentListTests(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)
        other = Cluster.objects.create(name="gpu-dev")
        record_states(
            other,
            [Observed("node", "a100-01", {"ready": True}, hot={"phase": "Ready"})],
            T0 - timedelta(hours=1),
        )
        for body in (
            alert(
                "GPUJobPendingTooLong",
                {"cluster": "gpu-prod", "namespace": "vision", "job_name": "resnet-train"},
                T0,
            ),
            alert(
                "NodeNotReady",
                {"cluster": "gpu-dev", "node": "a100-01"},
                T0 + timedelta(hours=2),
                severity="critical",
            ),
        ):
            ingest_alertmanager(payload([body]))
            group_alert(Alert.objects.get(fingerprint=body["fingerprint"]))
        Incident.objects.filter(cluster__name="gpu-dev").update(status="resolved")

    def titles(self, query: str = "") -> list[str]:
        r = self.client.get("/incidents/" + query)
        self.assertEqual(r.status_code, 200, r.content[:500])
        return [i.title for i in r.context["page"]]

    def test_it_redirects_anonymous_users(self) -> None:
        self.assertEqual(self.anon.get("/incidents/").status_code, 302)

    def test_it_lists_unresolved_incidents_first_each_titled_by_its_subject(self) -> None:
        # The critical one is resolved: the open warning comes first (then severity, impact, age).
        self.assertEqual(self.titles(), ["vision/resnet-train pending", "a100-01 not Ready"])

    def test_it_filters_by_status_cluster_project_severity_and_time(self) -> None:
        self.assertEqual(len(self.titles("?status=open")), 1)
        self.assertEqual(len(self.titles("?status=active")), 1)
        self.assertEqual(self.titles("?cluster=gpu-dev"), ["a100-01 not Ready"])
        self.assertEqual(self.titles("?project=vision"), ["vision/resnet-train pending"])
        self.assertEqual(len(self.titles("?severity=critical")), 1)
        self.assertEqual(len(self.titles("?since=2026-11-29T04:00:00Z")), 1)
        self.assertEqual(len(self.titles("?until=2026-11-29T04:00:00Z")), 1)

    def test_it_answers_400_to_an_invalid_filter(self) -> None:
        for query in (
            "?status=exploded",
            "?severity=x",
            "?since=yesterday",
            "?cluster=not%20a%20slug",
            "?since=2026-11-29T05:00:00Z&until=2026-11-29T04:00:00Z",
            "?page=0",
        ):
            with self.subTest(query):
                r = self.client.get("/incidents/" + query)
                self.assertEqual(r.status_code, 400)
                self.assertIn("errorlist", r.content.decode())

    def test_it_links_each_incident_at_its_onset(self) -> None:
        html = self.client.get("/incidents/").content.decode()
        inc = Incident.objects.get(cluster__name="gpu-prod")
        self.assertIn(f'href="/incidents/{inc.pk}/?t=2026-11-29T03%3A00%3A00Z&amp;w=2h"', html)

    def test_its_query_count_does_not_grow_with_the_incidents(self) -> None:
        with self.assertNumQueries(4):
            self.client.get("/incidents/")
        for i in range(30):
            Incident.objects.create(title=f"x{i}", onset=T0, window_start=T0, cluster=self.cluster)
        with self.assertNumQueries(4):
            self.client.get("/incidents/")
