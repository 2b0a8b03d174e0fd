"""POST /api/v1/alerts/alertmanager: real payloads, idempotent resends, auth, and the stored-first outbox."""

from __future__ import annotations

import base64
import copy
import json
from datetime import timedelta
from unittest import mock

from django.test import override_settings

from incidents.intake import ingest_alertmanager, payload_time
from incidents.models import Alert, Incident
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import AUTH, TOKEN, alert, payload, samples

URL = "/api/v1/alerts/alertmanager"


class IntakeTestCase(BaseTestCase):
    def post(self, body, **headers):  # type: ignore[no-untyped-def]
        data = body if isinstance(body, bytes | str) else json.dumps(body)
        return self.anon.post(URL, data=data, content_type="application/json", **{**AUTH, **headers})


class RealPayloadTests(IntakeTestCase):
    def test_it_accepts_every_real_sample_payload(self) -> None:
        for sample in samples():
            with self.subTest(sample["name"]):
                r = self.post(sample["payload"])
                self.assertEqual(r.status_code, 200, r.content)
        # 4 payloads, 5 alerts, but the firing/resolved pair is one alert (same fingerprint + startsAt).
        self.assertEqual(Alert.objects.count(), 4)

    def test_it_updates_one_alert_from_firing_to_resolved(self) -> None:
        firing, resolved = samples()[1]["payload"], samples()[2]["payload"]
        with self.captureOnCommitCallbacks(execute=True):
            self.post(firing)
        a = Alert.objects.get()
        self.assertEqual((a.status, a.ends_at), ("firing", None))
        self.assertIsNotNone(a.processed_at)  # eager Celery: grouped on commit
        with self.captureOnCommitCallbacks(execute=True):
            r = self.post(resolved)
        self.assertEqual(r.json()["updated"], 1)
        a = Alert.objects.get()
        self.assertEqual(a.status, "resolved")
        self.assertEqual(a.ends_at, payload_time("2022-11-02T08:12:31.003Z", "x"))
        self.assertEqual(Incident.objects.count(), 1)
        self.assertEqual(Incident.objects.get().window_end, a.ends_at)

    def test_it_changes_nothing_on_a_resend_of_the_same_group(self) -> None:
        body = samples()[0]["payload"]
        with self.captureOnCommitCallbacks(execute=True):
            self.post(body)
        before = list(Alert.objects.order_by("pk").values())
        with self.captureOnCommitCallbacks(execute=True) as callbacks:
            r = self.post(copy.deepcopy(body))
        self.assertEqual(
            r.json(), {"status": "ok", "received": 2, "created": 0, "updated": 0, "unchanged": 2}
        )
        self.assertEqual(list(Alert.objects.order_by("pk").values()), before)
        self.assertEqual(callbacks, [])  # nothing queued either
        self.assertEqual(Incident.objects.count(), 2)

    def test_it_reads_go_times_with_nanoseconds_and_offsets(self) -> None:
        t = payload_time("2023-03-25T14:41:06.68943305+08:00", "startsAt")
        self.assertEqual(t.isoformat(), "2023-03-25T06:41:06.689433+00:00")

    def test_it_fingerprints_alerts_from_old_alertmanagers_without_one(self) -> None:
        a = alert("GPUXidError", {"node": "h100-01"}, T0)
        del a["fingerprint"]
        ingest_alertmanager(payload([a]))
        ingest_alertmanager(payload([a]))
        self.assertEqual(Alert.objects.count(), 1)
        self.assertEqual(len(Alert.objects.get().fingerprint), 16)

    def test_it_keeps_a_resolution_when_a_stale_firing_resend_arrives_late(self) -> None:
        firing = alert("NodeNotReady", {"node": "h100-03"}, T0)
        resolved = {**firing, "status": "resolved", "endsAt": "2026-11-29T03:30:00Z"}
        ingest_alertmanager(payload([resolved]))
        ingest_alertmanager(payload([firing]))
        self.assertEqual(Alert.objects.get().status, "resolved")


class AuthTests(IntakeTestCase):
    def test_it_refuses_a_missing_token_and_stores_nothing(self) -> None:
        r = self.anon.post(URL, data=json.dumps(samples()[0]["payload"]), content_type="application/json")
        self.assertEqual(r.status_code, 401)
        self.assertIn("error", r.json())
        self.assertEqual(Alert.objects.count(), 0)

    def test_it_refuses_a_wrong_token(self) -> None:
        r = self.post(samples()[0]["payload"], HTTP_AUTHORIZATION="Bearer nope")
        self.assertEqual(r.status_code, 401)
        self.assertEqual(Alert.objects.count(), 0)

    @override_settings(WEBHOOK_TOKENS=["new-token", TOKEN])
    def test_it_accepts_both_tokens_during_a_rotation(self) -> None:
        self.assertEqual(
            self.post(samples()[0]["payload"], HTTP_AUTHORIZATION="Bearer new-token").status_code, 200
        )
        self.assertEqual(
            self.post(samples()[1]["payload"], HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code, 200
        )

    def test_it_accepts_alertmanager_http_config_credentials(self) -> None:
        # http_config.authorization: {type: Bearer, credentials: …} and basic_auth: {password: …}
        self.assertEqual(
            self.post(samples()[0]["payload"], HTTP_AUTHORIZATION=f"bearer {TOKEN}").status_code, 200
        )
        basic = base64.b64encode(f"alertmanager:{TOKEN}".encode()).decode()
        self.assertEqual(
            self.post(samples()[1]["payload"], HTTP_AUTHORIZATION=f"Basic {basic}").status_code, 200
        )

    def test_it_compares_tokens_in_constant_time(self) -> None:
        with mock.patch("web.incidents.api.hmac.compare_digest", return_value=False) as cmp:
            self.assertEqual(self.post(samples()[0]["payload"]).status_code, 401)
        cmp.assert_called()

    def test_it_needs_no_csrf_token(self) -> None:
        from django.test import Client

        c = Client(enforce_csrf_checks=True)
        r = c.post(URL, data=json.dumps(samples()[0]["payload"]), content_type="application/json", **AUTH)
        self.assertEqual(r.status_code, 200)


class OutboxOnCommitTests(IntakeTestCase):
    def test_it_stores_alerts_before_enqueueing_and_answers_200_when_the_broker_is_down(self) -> None:
        from kombu.exceptions import OperationalError

        seen_rows: list[int] = []

        def down(ids):  # type: ignore[no-untyped-def]
            seen_rows.append(Alert.objects.filter(pk__in=ids).count())  # already stored when we enqueue
            raise OperationalError("Error 111 connecting to localhost:6379. Connection refused.")

        with mock.patch("incidents.tasks.process_alerts.delay", side_effect=down):
            with self.captureOnCommitCallbacks(execute=True):
                r = self.post(payload([alert("GPUXidError", {"node": "h100-01"}, T0)]))
        self.assertEqual(r.status_code, 200)
        self.assertEqual(seen_rows, [1])
        self.assertIsNone(Alert.objects.get().processed_at)

    def test_it_queues_a_changed_alert_again(self) -> None:
        a = alert("GPUXidError", {"node": "h100-01"}, T0)
        with mock.patch("incidents.tasks.process_alerts.delay") as delay:
            with self.captureOnCommitCallbacks(execute=True):
                self.post(payload([a]))
            with self.captureOnCommitCallbacks(execute=True):
                self.post(payload([{**a, "status": "resolved", "endsAt": "2026-11-29T03:10:00Z"}]))
        self.assertEqual(delay.call_count, 2)
        self.assertEqual(delay.call_args_list[0].args[0], delay.call_args_list[1].args[0])

    def test_it_processes_each_alert_once_even_when_two_workers_race(self) -> None:
        from incidents.intake import process_alert

        ingest_alertmanager(payload([alert("GPUXidError", {"node": "h100-01"}, T0 - timedelta(minutes=1))]))
        pk = Alert.objects.get().pk
        self.assertIsNotNone(process_alert(pk))
        self.assertIsNone(process_alert(pk))
        self.assertEqual(Incident.objects.count(), 1)
