"""/incidents/: filters validated by a form (an invalid filter is a 400), bounded queries, links keep the cursor."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.inventory import Observed, record_states
from collectors.models import Cluster
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, DiagnosisRun, Incident
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
        # session, user, the two counts (unresolved; resolved up to a bound), the unresolved rows of the page,
        # the resolved ones
        with self.assertNumQueries(6):
            self.client.get("/incidents/")
        for i in range(30):
            Incident.objects.create(title=f"x{i}", onset=T0, window_start=T0, cluster=self.cluster)
            Incident.objects.create(
                title=f"y{i}", onset=T0, window_start=T0, cluster=self.cluster, status="resolved"
            )
        with self.assertNumQueries(6):
            self.client.get("/incidents/")

    def test_it_lists_resolved_incidents_after_the_unresolved_ones_newest_first_across_pages(self) -> None:
        for i in range(40):
            Incident.objects.create(
                title=f"open {i:02d}", onset=T0 + timedelta(minutes=i), window_start=T0, cluster=self.cluster
            )
            Incident.objects.create(
                title=f"done {i:02d}",
                onset=T0 + timedelta(minutes=i),
                window_start=T0,
                cluster=self.cluster,
                status="resolved",
            )
        first, second = self.titles(), self.titles("?page=2")
        self.assertEqual(len(first), 50)
        self.assertEqual(len(second), 32)  # 41 unresolved, then 41 resolved
        listed = first + second
        self.assertEqual(len(set(listed)), 82)
        self.assertEqual(listed[:2], ["vision/resnet-train pending", "open 00"])  # oldest first, as worked
        # then the history, newest first (the node incident began at 05:00)
        self.assertEqual(listed[41:44], ["a100-01 not Ready", "done 39", "done 38"])
        self.assertEqual(listed[-1], "done 00")

    def diagnose(self, title: str, code: str, at, *, run_title: str = "") -> Incident:  # type: ignore[no-untyped-def]
        inc = Incident.objects.get(title=title)
        DiagnosisRun.objects.create(incident=inc, at=at, made_at=at, top_code=code, title=run_title)
        return inc

    def test_it_filters_by_the_top_hypothesis_by_code_or_human_name(self) -> None:
        self.diagnose("a100-01 not Ready", "gpu_missing", T0 + timedelta(hours=2))
        self.diagnose("vision/resnet-train pending", "project_quota_exhausted", T0)
        for query in (
            "?cause=gpu_missing",
            "?cause=GPU%20missing",
            "?cause=gpu-missing",
            "?cause=GPU+MISSING",
        ):
            with self.subTest(query):
                self.assertEqual(self.titles(query), ["a100-01 not Ready"])
        self.assertEqual(self.titles("?cause=quota"), ["vision/resnet-train pending"])
        r = self.client.get("/incidents/?cause=no%20such%20thing")
        self.assertEqual(r.status_code, 400)
        self.assertIn("no diagnosis code or name matches", r.content.decode())

    def test_it_renders_the_help_of_each_filter(self) -> None:
        html = self.client.get("/incidents/").content.decode()
        self.assertIn("a diagnosis code or its name", html)
        self.assertIn('<option value="GPU missing">gpu_missing</option>', html)

    def test_it_shows_the_top_hypothesis_in_force_at_the_cursor(self) -> None:
        t1 = T0 + timedelta(hours=1)
        inc = self.diagnose("vision/resnet-train pending", "gpu_capacity_shortage", T0)
        DiagnosisRun.objects.create(incident=inc, at=t1, made_at=t1, top_code="project_quota_exhausted")
        now = self.client.get("/incidents/").content.decode().partition("<tbody>")[2]  # not the datalist
        self.assertIn("project quota exhausted", now)
        self.assertNotIn("not enough free GPUs", now)
        before = (
            self.client.get("/incidents/?t=2026-11-29T03:30:00Z").content.decode().partition("<tbody>")[2]
        )
        self.assertIn("not enough free GPUs", before)
        self.assertIn("/incidents/?cause=gpu_capacity_shortage&amp;t=2026-11-29T03%3A30%3A00Z", before)
        # the filter reads the same run: at 03:30 the incident's top was the capacity shortage
        self.assertEqual(self.titles("?cause=project_quota_exhausted&t=2026-11-29T03:30:00Z"), [])
        self.assertEqual(len(self.titles("?cause=gpu_capacity_shortage&t=2026-11-29T03:30:00Z")), 1)
        self.assertIn("not diagnosed yet", now)  # the other incident has no run

    def test_its_query_count_with_top_hypotheses_is_the_same_at_two_sizes(self) -> None:
        def diagnosed(n: int) -> None:
            for i in range(n):
                inc = Incident.objects.create(title=f"d{i}", onset=T0, window_start=T0, cluster=self.cluster)
                DiagnosisRun.objects.create(incident=inc, at=T0, made_at=T0, top_code="gpu_missing")

        diagnosed(2)
        with CaptureQueriesContext(connection) as small:
            self.client.get("/incidents/?cause=GPU%20missing")
        diagnosed(60)
        with CaptureQueriesContext(connection) as big:
            r = self.client.get("/incidents/?cause=GPU%20missing")
        self.assertEqual(len(r.context["rows"]), 50)
        self.assertEqual(len(small.captured_queries), 6)
        self.assertEqual(len(big.captured_queries), len(small.captured_queries))


class IncidentListCountBoundTest(BaseTestCase):
    def test_the_resolved_history_is_counted_up_to_a_bound_and_the_pager_says_so(self) -> None:
        from unittest import mock

        for i in range(7):
            Incident.objects.create(title=f"r{i}", onset=T0, window_start=T0, status="resolved")
        with mock.patch("web.incidents.listing.RESOLVED_COUNTED", 5), mock.patch("web.incidents.views.Paginator") as pager:
            from django.core.paginator import Paginator

            pager.side_effect = lambda rows, _n: Paginator(rows, 2)
            html = self.client.get("/incidents/?status=resolved").content.decode()
        assert "page 1 of 3+" in html and "counted to" in html
