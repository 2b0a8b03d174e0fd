"""Numbers and times the webhooks refuse by name, storing nothing (issue 42, findings 4 and 8).

- ``1e400`` is valid JSON that Python reads as infinity: it was stored as jsonb "Infinity" in an alert's raw
  payload and answered 500 in a change's old/new on PostgreSQL.
- Alerts dated 1970-1999 were accepted while the cursor allows only 2000-2099, so every link on their
  incident's page was a 400: alerts, changes and the cursor now share ``rcaweb.cursor.EARLIEST``/``LATEST``.
"""

from __future__ import annotations

import html
import json
import re

from collectors.models import Change
from incidents.models import Alert, Incident
from rcaweb.cursor import EARLIEST, LATEST, parse_t
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import AUTH, alert, payload, small_world
from tests.incidents.test_changes_api import change

ALERTS = "/api/v1/alerts/alertmanager"
CHANGES = "/api/v1/changes"


class LimitsTestCase(BaseTestCase):
    def post(self, url: str, body: str | dict):  # type: ignore[no-untyped-def]
        data = body if isinstance(body, str) else json.dumps(body)
        return self.anon.post(url, data=data, content_type="application/json", **AUTH)

    def assert_refused(self, r, text: str) -> None:  # type: ignore[no-untyped-def]
        assert r.status_code == 400, r.content
        assert text in r.json()["error"], r.json()
        assert Alert.objects.count() == 0 and Incident.objects.count() == 0
        assert not Change.objects.filter(source="external").exists()


class OverflowingNumbersTest(LimitsTestCase):
    def alerts_with(self, raw: str) -> str:
        """A notification whose second alert has ``"extra": <raw>``, written as raw JSON text."""
        body = json.dumps(payload([alert("Good", {"node": "h100-01"}, T0), alert("A", {"node": "h100-02"}, T0)]))
        return body.replace('"startsAt"', f'"extra": {{"deep": [1, {raw}]}}, "startsAt"', 2).replace(
            f'"extra": {{"deep": [1, {raw}]}}, ', "", 1
        )

    def test_an_overflowing_number_in_an_alert_is_refused_naming_its_field(self):
        r = self.post(ALERTS, self.alerts_with("1e400"))
        self.assert_refused(r, "alerts[1].extra.deep[1]: 1e400 is out of range")

    def test_a_negative_overflow_and_a_long_mantissa_are_refused_too(self):
        for raw in ("-1e400", "1" * 400 + ".5", "2e308"):
            self.assert_refused(self.post(ALERTS, self.alerts_with(raw)), "alerts[1].extra.deep[1]")

    def test_nan_and_infinity_are_refused_naming_the_field(self):
        self.assert_refused(self.post(ALERTS, self.alerts_with("NaN")), "alerts[1].extra.deep[1]: NaN is not")

    def test_an_overflowing_number_at_the_top_level_names_its_key(self):
        body = json.dumps(payload([alert("A", {"node": "h100-01"}, T0)]))[:-1] + ', "x": 1e999}'
        self.assert_refused(self.post(ALERTS, body), "x: 1e999 is out of range")

    def test_big_but_finite_numbers_and_underflow_are_kept(self):
        r = self.post(ALERTS, self.alerts_with("1.7e308"))
        assert r.status_code == 200, r.content
        r = self.post(ALERTS, self.alerts_with("1e-400").replace('"A"', '"B"'))
        assert r.status_code == 200, r.content

    def test_an_overflowing_number_in_a_change_is_refused_naming_its_field(self):
        small_world(self.cluster, T0)
        body = json.dumps(change(new="x")).replace('"new": "x"', '"new": {"replicas": 1e400}')
        self.assert_refused(self.post(CHANGES, body), "new.replicas: 1e400 is out of range")


class OneTimeRangeTest(LimitsTestCase):
    def test_an_alert_from_1999_is_refused_naming_the_field(self):
        a = alert("A", {"node": "h100-01"}, T0)
        a["startsAt"] = "1999-12-31T23:59:59Z"
        r = self.post(ALERTS, payload([alert("B", {"node": "h100-02"}, T0), a]))
        self.assert_refused(r, "alerts[1].startsAt: '1999-12-31T23:59:59Z' is before 2000")
        assert "2000-2099" in r.json()["error"]

    def test_an_alert_from_1970_and_the_zero_time_as_a_start_are_refused(self):
        for when in ("1970-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00"):
            a = alert("A", {"node": "h100-01"}, T0)
            a["startsAt"] = when
            self.assert_refused(self.post(ALERTS, payload([a])), "alerts[0].startsAt")

    def test_a_resolved_alert_ending_in_1999_is_refused(self):
        a = alert("A", {"node": "h100-01"}, T0, ends=T0)
        a["endsAt"] = "1999-06-01T00:00:00Z"
        self.assert_refused(self.post(ALERTS, payload([a])), "alerts[0].endsAt: '1999-06-01T00:00:00Z'")

    def test_the_zero_time_as_an_end_is_still_no_end(self):
        a = alert("A", {"node": "h100-01"}, T0)
        a["endsAt"] = "0001-01-01T00:00:00Z"
        assert self.post(ALERTS, payload([a])).status_code == 200

    def test_the_range_is_the_cursors_at_both_ends(self):
        firsts = [EARLIEST.strftime("%Y-%m-%dT%H:%M:%SZ"), "2099-12-31T23:59:59Z"]
        for i, when in enumerate(firsts):
            a = alert(f"A{i}", {"node": "h100-01"}, T0)
            a["startsAt"] = when
            assert self.post(ALERTS, payload([a])).status_code == 200, when
            parse_t(when)  # and the cursor can point at it
        a = alert("C", {"node": "h100-01"}, T0)
        a["startsAt"] = LATEST.strftime("%Y-%m-%dT%H:%M:%SZ")
        r = self.post(ALERTS, payload([a]))
        assert r.status_code == 400 and "is after 2099" in r.json()["error"]

    def test_an_incident_at_either_end_of_the_range_keeps_working_links(self):
        """Its page links to moments around the onset (an hour before, …): kept within the cursor's range."""
        from incidents.grouping import group_alert

        for i, when in enumerate(("2000-01-01T00:00:00Z", "2099-12-31T23:59:00Z")):
            a = alert(f"A{i}", {"node": f"h100-0{i}"}, T0)
            a["startsAt"] = when
            assert self.post(ALERTS, payload([a])).status_code == 200
            incident = group_alert(Alert.objects.get(name=f"A{i}"))
            assert incident is not None
            page = self.client.get(incident.get_absolute_url())
            assert page.status_code == 200
            links = set(re.findall(r'href="([^"]*[?&]t=[^"]*)"', page.content.decode()))
            assert links
            bad = [u for u in links if self.client.get(html.unescape(u)).status_code == 400]
            assert bad == [], bad

    def test_a_change_from_1999_or_the_zero_time_is_refused_naming_the_field(self):
        small_world(self.cluster, T0)
        for when in ("1999-12-31T23:59:59Z", "0001-01-01T00:00:00Z"):
            r = self.post(CHANGES, change(time=when))
            self.assert_refused(r, f"time: '{when}' is before 2000")
