"""The webhook under fuzz: every answer is below 500, a refusal stores nothing, and an accepted alert's
incident page and JSON answer too (issue 17, finding 3).

Hypothesis builds notifications from a mix of well-formed alerts and hostile parts: any Unicode text
(NUL, lone surrogates, control characters), times at the calendar's ends and with any offset, wrong types,
huge numbers. Run it on PostgreSQL too (DATABASE_URL), where NUL used to be a 500.
"""

from __future__ import annotations

import json

from django.contrib.auth.models import Group, User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from collectors.models import Cluster
from incidents.grouping import group_alert
from incidents.models import Alert, Incident
from tests.base import T0
from tests.incidents.fixtures.alertmanager import AUTH, alert, payload

URL = "/api/v1/alerts/alertmanager"
TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["\x00", "a\x00", "\ud800", "x\udfffy", "\u202e", "<script>", "%00", ""]),
)
TIME = st.one_of(
    st.sampled_from(
        [
            "9999-12-31T23:59:59Z",
            "9999-12-31T23:59:59-01:00",
            "0001-01-01T00:00:00Z",
            "0001-01-01T00:00:00+14:00",
            "0001-01-01T00:00:00-01:00",
            "2099-12-31T23:59:59-23:59",
            "1970-01-01T00:00:00Z",
            "2026-11-29T03:00:00.123456789+05:30",
            "2026-02-30T00:00:00Z",
        ]
    ),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.integers(),
    TEXT,
)
ODD = st.one_of(TEXT, st.integers(min_value=-(2**70), max_value=2**70), st.floats(), st.booleans(), st.none())


@st.composite
def hostile_alert(draw: st.DrawFn) -> dict:
    a = alert("Fuzz", {"cluster": "gpu-prod", "node": draw(TEXT)}, T0, annotations={"d": draw(TEXT)})
    a["labels"][draw(TEXT) or "k"] = draw(st.one_of(TEXT, ODD))
    if draw(st.booleans()):
        a["startsAt"] = draw(TIME)
    if draw(st.booleans()):
        a["endsAt"] = draw(TIME)
        a["status"] = "resolved"
    if draw(st.booleans()):
        a[draw(TEXT)] = draw(ODD)  # unknown keys are kept in raw
    if draw(st.booleans()):
        del a["fingerprint"]
    return a


class WebhookFuzzTests(TestCase):
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        alerts=st.lists(
            st.one_of(
                hostile_alert(),
                st.builds(lambda n: alert(f"Good{n}", {"node": "h100-01"}, T0), st.integers(0, 3)),
            ),
            min_size=1,
            max_size=4,
        )
    )
    def test_it_never_answers_5xx_and_stores_all_or_nothing(self, alerts) -> None:
        Cluster.objects.create(name="gpu-prod", scheduler="kai")
        self.client.raise_request_exception = False
        r = self.client.post(URL, data=json.dumps(payload(alerts)), content_type="application/json", **AUTH)
        assert r.status_code < 500, r.content
        if r.status_code >= 400:
            assert "error" in r.json()
            assert Alert.objects.count() == 0 and Incident.objects.count() == 0, "a refusal stored a part"
            return
        assert Alert.objects.count() == r.json()["created"] > 0
        user = User.objects.create_user("alice", "alice@example.org", "password")
        user.groups.add(Group.objects.get_or_create(name="responder")[0])
        self.client.force_login(user)
        for a in Alert.objects.all():
            incident = group_alert(a)
            if incident is None:
                continue
            for url in (f"/incidents/{incident.pk}/", f"/api/v1/incidents/{incident.pk}", f"/alerts/{a.pk}/",
                        f"/incidents/{incident.pk}/handoff.md", f"/incidents/{incident.pk}/history/"):  # fmt: skip
                assert self.client.get(url).status_code < 500, url

    def test_a_non_finite_number_anywhere_is_refused_by_name(self) -> None:
        """Python's json reads NaN and Infinity; JSON does not, nor does PostgreSQL's jsonb, where an alert's
        unknown keys are kept: they were a 500 there (found by the test above)."""
        Cluster.objects.create(name="gpu-prod", scheduler="kai")
        for value in (float("inf"), float("-inf"), float("nan")):
            a = alert("Fuzz", {"cluster": "gpu-prod", "node": "h100-01"}, T0)
            a["extra"] = value
            body = json.dumps(payload([a, alert("Good", {"node": "h100-01"}, T0)]))
            r = self.client.post(URL, data=body, content_type="application/json", **AUTH)
            assert r.status_code == 400, r.content
            assert json.dumps(value) in r.json()["error"] and "not a JSON number" in r.json()["error"]
        assert Alert.objects.count() == 0
