"""GET /api/v1/incidents/<id>: the page's facts as JSON, with the bearer token or a session."""

from __future__ import annotations

from datetime import timedelta

from incidents.evidence import collect_evidence
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, Citation, HandoffNote, Hypothesis, ProposedAction
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import API_AUTH, AUTH, alert, payload, small_world


class IncidentApiTests(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)
        ingest_alertmanager(
            payload(
                [
                    alert(
                        "GPUJobPendingTooLong",
                        {"cluster": "gpu-prod", "namespace": "vision", "job_name": "resnet-train"},
                        T0,
                    )
                ]
            )
        )
        self.incident = group_alert(Alert.objects.get())
        collect_evidence(self.incident.pk, now=T0 + timedelta(minutes=10))
        obs = self.incident.observations.filter(kind="job_state").first()
        h = Hypothesis.objects.create(
            incident=self.incident,
            code="project_quota_exhausted",
            status="supported",
            confidence=0.8,
            statement="vision uses 16 of 16 GPUs",
            next_questions=["q?"],
        )
        Citation.objects.create(hypothesis=h, observation=obs)
        ProposedAction.objects.create(
            incident=self.incident,
            hypothesis=h,
            title="Raise the quota",
            impact="nlp loses 8",
            verify="job runs",
            rollback="lower it again",
        )
        HandoffNote.objects.create(
            incident=self.incident,
            author=self.alice,
            author_name="alice",
            created=T0,
            updated=T0,
            summary="quota cut at 02:00",
        )
        self.url = f"/api/v1/incidents/{self.incident.pk}"
        self.obs = obs

    def test_it_answers_401_without_token_or_session(self) -> None:
        r = self.anon.get(self.url)
        self.assertEqual(r.status_code, 401)
        self.assertIn("error", r.json())

    def test_it_answers_with_the_api_token(self) -> None:
        self.assertEqual(self.anon.get(self.url, **API_AUTH).status_code, 200)

    def test_the_webhook_token_cannot_read_an_incident(self) -> None:
        r = self.anon.get(
            self.url, **AUTH
        )  # Alertmanager's and CI's token writes alerts; it reads nothing back
        self.assertEqual(r.status_code, 401)
        self.assertIn("RCAWEB_API_TOKEN", r.json()["error"])

    def test_the_api_token_cannot_post_alerts(self) -> None:
        r = self.anon.post(
            "/api/v1/alerts/alertmanager", data="{}", content_type="application/json", **API_AUTH
        )
        self.assertEqual(r.status_code, 401)

    def test_it_answers_404_and_405_as_json(self) -> None:
        r = self.anon.get("/api/v1/incidents/424242", **API_AUTH)
        self.assertEqual((r.status_code, r["Content-Type"]), (404, "application/json"))
        self.assertIn("error", r.json())
        r = self.anon.get("/api/v1/no-such-endpoint")
        self.assertEqual((r.status_code, r["Content-Type"]), (404, "application/json"))
        r = self.anon.put(self.url, **API_AUTH)
        self.assertEqual((r.status_code, r["Content-Type"]), (405, "application/json"))
        self.assertEqual(r["Allow"], "GET")

    def test_it_tells_no_cache_to_keep_the_answer(self) -> None:
        self.assertIn("no-store", self.anon.get(self.url, **API_AUTH)["Cache-Control"])

    def test_it_answers_to_a_logged_in_viewer(self) -> None:
        self.assertEqual(self.login_as(self.bob).get(self.url).status_code, 200)

    def test_it_returns_the_same_facts_as_the_page(self) -> None:
        data = self.client.get(self.url).json()
        self.assertEqual(data["id"], self.incident.pk)
        self.assertEqual(data["onset"], "2026-11-29T03:00:00Z")
        self.assertIn(
            {
                "kind": "job",
                "cluster": "gpu-prod",
                "namespace": "vision",
                "name": "resnet-train",
                "role": "subject",
                "url": "http://testserver/c/gpu-prod/jobs/vision/resnet-train/",
            },
            data["subjects"],
        )
        self.assertEqual([a["name"] for a in data["alerts"]], ["GPUJobPendingTooLong"])
        kinds = {o["kind"] for o in data["observations"]}
        self.assertTrue({"alert", "job_state", "pod_state", "queue_state"} <= kinds)
        self.assertEqual(
            data["hypotheses"][0]["evidence"], [{"observation": self.obs.pk, "role": "supports"}]
        )
        self.assertEqual(data["actions"][0]["title"], "Raise the quota")
        self.assertEqual(data["handoff_notes"][0]["summary"], "quota cut at 02:00")
        self.assertIn(self.obs.pk, {o["id"] for o in data["observations"]})

    def test_it_404s_for_an_unknown_incident(self) -> None:
        self.assertEqual(self.client.get("/api/v1/incidents/424242").status_code, 404)

    def test_it_refuses_post(self) -> None:
        self.assertEqual(self.anon.post(self.url, **API_AUTH).status_code, 405)

    def test_its_query_count_is_bounded(self) -> None:
        with self.assertNumQueries(11):  # + the diagnoses kept (one query, whatever their number)
            self.anon.get(self.url, **API_AUTH)
