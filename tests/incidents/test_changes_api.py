"""POST /api/v1/changes: an external change (CI/CD, a scheduler admin UI) joins the change history."""

from __future__ import annotations

import json
from datetime import timedelta

from collectors.models import Change
from incidents.evidence import collect_evidence
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import AUTH, alert, payload, small_world

URL = "/api/v1/changes"


def change(**over):  # type: ignore[no-untyped-def]
    body = {
        "time": "2026-11-29T02:50:00Z",
        "cluster": "gpu-prod",
        "target": {"kind": "job", "namespace": "vision", "name": "resnet-train"},
        "what": "image bumped to resnet:1.5 by the deploy pipeline",
        "actor": "ci-bot",
        "source": "argo-cd",
        "link": "https://ci.example.org/runs/42",
        "field": "spec.template.spec.containers[0].image",
        "old": "registry.local/vision/resnet:1.4",
        "new": "registry.local/vision/resnet:1.5",
    }
    body.update(over)
    return body


class ChangesApiTests(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)

    def post(self, body, **headers):  # type: ignore[no-untyped-def]
        return self.anon.post(
            URL, data=json.dumps(body), content_type="application/json", **{**AUTH, **headers}
        )

    def test_it_records_an_external_change_on_its_entity(self) -> None:
        r = self.post(change())
        self.assertEqual(r.status_code, 201, r.content)
        ch = Change.objects.get(source="external")
        self.assertEqual(
            (ch.entity.name, ch.kind, ch.actor, ch.link),
            ("resnet-train", "job", "ci-bot", "https://ci.example.org/runs/42"),
        )
        self.assertEqual(ch.new, "registry.local/vision/resnet:1.5")
        self.assertIn("[via argo-cd]", ch.summary)

    def test_it_does_not_store_an_identical_resend_twice(self) -> None:
        self.post(change())
        r = self.post(change())
        self.assertEqual((r.status_code, r.json()["created"]), (200, False))
        self.assertEqual(Change.objects.filter(source="external").count(), 1)

    def test_it_keeps_a_change_on_an_unknown_target_without_inventing_the_entity(self) -> None:
        r = self.post(change(target={"kind": "node", "name": "h100-77"}))
        self.assertEqual(r.status_code, 201)
        ch = Change.objects.get(source="external")
        self.assertIsNone(ch.entity)
        self.assertIn("node h100-77, not in the inventory", ch.summary)

    def test_it_needs_the_token(self) -> None:
        self.assertEqual(
            self.anon.post(URL, data=json.dumps(change()), content_type="application/json").status_code, 401
        )
        self.assertEqual(Change.objects.filter(source="external").count(), 0)

    def test_it_names_the_field_that_is_wrong(self) -> None:
        cases = [
            (change(time="last tuesday"), "time"),
            (change(cluster="nowhere"), "cluster: unknown cluster 'nowhere'"),
            (change(target={"kind": "deployment", "name": "x"}), "target.kind"),
            (change(target={"kind": "pod", "name": "x"}), "target.namespace"),
            (change(target={"kind": "node", "name": 7}), "target.name: expected a string"),
            (change(what=""), "what: missing"),
            (change(link="javascript:alert(1)"), "link: expected an http(s) URL"),
            (change(new="x" * 5000), "new: larger than"),
            ([1, 2], "expected a JSON object"),
        ]
        for body, text in cases:
            with self.subTest(text):
                r = self.post(body)
                self.assertEqual(r.status_code, 400)
                self.assertIn(text, r.json()["error"])
        self.assertEqual(Change.objects.filter(source="external").count(), 0)

    def test_it_joins_the_incident_evidence(self) -> None:
        self.post(change())
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
        incident = group_alert(Alert.objects.get())
        collect_evidence(incident.pk, now=T0 + timedelta(minutes=5))
        obs = incident.observations.get(kind="change", content__source="external")
        self.assertEqual(obs.content["actor"], "ci-bot")
        self.assertEqual(obs.locator, "https://ci.example.org/runs/42")
        self.assertEqual(
            obs.content["entity"], {"kind": "job", "namespace": "vision", "name": "resnet-train"}
        )


class ChangeRedactionTests(BaseTestCase):
    """Issue 42, item 3: a change posted with credentials in every field stored them as sent."""

    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)

    def test_it_redacts_every_field_before_storing(self) -> None:
        body = change(
            what="rotated the registry login: docker login -u bot -p S3CR3T-what registry.local",
            actor="ci-bot token=S3CR3T-actor",
            source="argo-cd --password S3CR3T-source",
            link="https://u:S3CR3T-userinfo@ci.example.org/runs/42?token=S3CR3T-query",
            field="spec.template.spec.containers[0].env[DB_PASSWORD]",
            old="S3CR3T-old",
            new={"value": "S3CR3T-new"},
        )
        post = ChangesApiTests.post
        r = post(self, body)  # type: ignore[arg-type]
        self.assertEqual(r.status_code, 201, r.content)
        ch = Change.objects.get(source="external")
        stored = json.dumps([ch.summary, ch.actor, ch.link, ch.field, ch.old, ch.new])
        self.assertNotIn("S3CR3T", stored)
        self.assertEqual(ch.link, "https://u:[redacted]@ci.example.org/runs/42?token=[redacted]")
        self.assertEqual((ch.old, ch.new), ("[redacted]", {"value": "[redacted]"}))
        self.assertIn("registry.local", ch.summary)  # what is not a secret stays readable
        r = post(self, body)  # type: ignore[arg-type]
        self.assertEqual((r.status_code, r.json()["created"]), (200, False))  # a resend finds the stored row
