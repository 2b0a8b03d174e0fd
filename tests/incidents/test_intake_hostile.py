"""Hostile input to the webhook: a clear 4xx naming what is wrong, and nothing stored; or accepted and escaped."""

from __future__ import annotations

import json
from datetime import timedelta

from incidents.intake import MAX_ALERTS
from incidents.models import Alert, Incident
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import AUTH, alert, payload

URL = "/api/v1/alerts/alertmanager"


class HostileInputTests(BaseTestCase):
    def post(self, data, **extra):  # type: ignore[no-untyped-def]
        body = data if isinstance(data, bytes | str) else json.dumps(data)
        return self.anon.post(URL, data=body, content_type="application/json", **AUTH, **extra)

    def assertRejected(self, response, status: int, text: str) -> None:  # noqa: N802
        self.assertEqual(response.status_code, status, response.content)
        self.assertIn(text, response.json()["error"])
        self.assertEqual(Alert.objects.count(), 0)
        self.assertEqual(Incident.objects.count(), 0)

    def test_it_answers_413_to_a_2_mib_body(self) -> None:
        big = payload(
            [alert("Big", {"node": "h100-01"}, T0, annotations={"description": "x" * (2 * 1024 * 1024)})]
        )
        self.assertRejected(self.post(big), 413, "larger than 1048576 bytes")

    def test_it_answers_400_to_a_body_that_is_not_json(self) -> None:
        self.assertRejected(self.post(b"{not json"), 400, "not JSON")

    def test_it_answers_400_to_deeply_nested_json(self) -> None:
        self.assertRejected(self.post("[" * 200_000 + "]" * 200_000), 400, "nested too deeply")

    def test_it_names_the_field_path_of_a_wrong_type(self) -> None:
        alerts = [alert(f"A{i}", {"node": "h100-01"}, T0) for i in range(5)]
        alerts[3]["labels"]["severity"] = 3
        self.assertRejected(
            self.post(payload(alerts)), 400, "alerts[3].labels.severity: expected a string, got a number"
        )

    def test_it_rejects_nested_objects_in_labels(self) -> None:
        a = alert("A", {"node": "h100-01"}, T0)
        a["labels"]["node"] = {"deep": {"deeper": ["x"]}}
        self.assertRejected(
            self.post(payload([a])), 400, "alerts[0].labels.node: expected a string, got an object"
        )

    def test_it_rejects_a_bad_start_time(self) -> None:
        a = alert("A", {"node": "h100-01"}, T0)
        a["startsAt"] = "yesterday"
        self.assertRejected(self.post(payload([a])), 400, "alerts[0].startsAt")

    def test_it_rejects_alerts_that_are_not_an_array(self) -> None:
        self.assertRejected(self.post({**payload([]), "alerts": {"0": {}}}), 400, "alerts: expected an array")

    def test_it_rejects_an_unknown_status(self) -> None:
        a = alert("A", {"node": "h100-01"}, T0)
        a["status"] = "exploded"
        self.assertRejected(self.post(payload([a])), 400, "alerts[0].status")

    def test_it_rejects_another_webhook_version(self) -> None:
        self.assertRejected(self.post({**payload([alert("A", {}, T0)]), "version": "3"}), 400, "version")

    def test_it_stores_nothing_when_the_last_alert_is_bad(self) -> None:
        alerts = [alert(f"A{i}", {"node": "h100-01"}, T0) for i in range(20)]
        alerts[-1]["annotations"] = ["not", "a", "map"]
        self.assertRejected(self.post(payload(alerts)), 400, "alerts[19].annotations")

    def test_it_refuses_10000_alerts_in_one_payload_with_a_clear_limit(self) -> None:
        # Minimal alerts so the body stays under 1 MiB and the count limit is what answers.
        one = {"labels": {"alertname": "A"}, "startsAt": "2026-11-29T03:00:00Z"}
        body = {"version": "4", "status": "firing", "alerts": [one] * 10_000}
        self.assertLess(len(json.dumps(body)), 1024 * 1024)
        self.assertRejected(self.post(body), 413, f"at most {MAX_ALERTS} are accepted")

    def test_it_accepts_the_limit_exactly(self) -> None:
        alerts = [
            {"labels": {"alertname": "A", "i": str(i)}, "startsAt": "2026-11-29T03:00:00Z"}
            for i in range(MAX_ALERTS)
        ]
        r = self.post({"version": "4", "status": "firing", "alerts": alerts})
        self.assertEqual(r.status_code, 200, r.content[:300])
        self.assertEqual(Alert.objects.count(), MAX_ALERTS)

    def test_it_accepts_script_and_quotes_in_labels_and_escapes_them_on_the_page(self) -> None:
        evil = '<script>alert("x")</script>'
        a = alert(
            "Evil\"'<b>",
            {"node": evil, "namespace": "a'b\"c"},
            T0 - timedelta(minutes=5),
            annotations={"summary": evil},
        )
        with self.captureOnCommitCallbacks(execute=True):
            r = self.post(payload([a]))
        self.assertEqual(r.status_code, 200)
        incident = Incident.objects.get()
        self.assertIn(evil, incident.unresolved_subject + incident.title)
        html = self.client.get(incident.get_absolute_url()).content.decode()
        self.assertNotIn("<script>alert", html)
        self.assertIn("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;", html)
        self.assertNotIn("<b>", html.split("<main", 1)[1])
        self.assertEqual(self.client.get(f"/alerts/{Alert.objects.get().pk}/").status_code, 200)

    #
    # Issue 17, finding 3: these answered 500 (NUL on PostgreSQL, lone surrogates everywhere, far times).
    #

    def test_it_keeps_an_alert_with_a_nul_byte_and_its_valid_neighbours(self) -> None:
        bad = alert("A", {"node": "h100-01", "pod": "p\x00q"}, T0, annotations={"description": "x\x00y"})
        good = alert("B", {"node": "h100-02"}, T0)
        r = self.post(payload([bad, good]))
        self.assertEqual(r.status_code, 200, r.content)
        self.assertEqual(r.json()["created"], 2)
        stored = Alert.objects.get(name="A")
        self.assertEqual(stored.labels["pod"], "p\ufffdq")  # the damage stays visible
        self.assertEqual(stored.annotations["description"], "x\ufffdy")

    def test_it_keeps_an_alert_with_a_lone_surrogate_in_a_label_or_a_key(self) -> None:
        bad = alert("A", {"node": "h100-01", "team": "\ud800"}, T0)
        bad["labels"]["k\udfff"] = "v"
        r = self.post(payload([bad]))  # json.dumps writes \\ud800 escapes, as a broken client would
        self.assertEqual(r.status_code, 200, r.content)
        stored = Alert.objects.get()
        self.assertEqual(stored.labels["team"], "\ufffd")
        self.assertIn("k\ufffd", stored.labels)

    def test_it_refuses_a_start_at_the_end_of_the_calendar_naming_the_field(self) -> None:
        a = alert("A", {"node": "h100-01"}, T0)
        a["startsAt"] = "9999-12-31T23:59:59Z"
        self.assertRejected(self.post(payload([alert("B", {"node": "h"}, T0), a])), 400, "alerts[1].startsAt")

    def test_it_refuses_an_offset_that_carries_a_time_past_the_calendar(self) -> None:
        a = alert("A", {"node": "h100-01"}, T0, ends=T0 + timedelta(minutes=5))
        a["endsAt"] = "9999-12-31T23:59:59-01:00"  # UTC year 10000: datetime overflowed, the webhook 500ed
        self.assertRejected(
            self.post(payload([a])), 400, "alerts[0].endsAt: '9999-12-31T23:59:59-01:00' is after 2099"
        )

    def test_it_accepts_an_offset_near_the_start_of_the_calendar_as_no_end(self) -> None:
        a = alert("A", {"node": "h100-01"}, T0)
        a["endsAt"] = "0001-01-01T00:00:00-01:00"
        r = self.post(payload([a]))
        self.assertEqual(r.status_code, 200, r.content)


def test_a_refusal_quoting_a_lone_surrogate_can_be_logged_as_utf8() -> None:
    from incidents.intake import PayloadError

    exc = PayloadError("alerts[0].startsAt", "'x\udfffy' is not an RFC 3339 time")
    text = str(exc)
    assert text.encode("utf-8")  # would raise UnicodeEncodeError with the surrogate kept
    assert "x\\udfffy" in text and text.startswith("alerts[0].startsAt: ")
