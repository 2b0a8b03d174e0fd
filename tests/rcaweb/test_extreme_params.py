"""Every URL, with extreme query values, answers below 500 (issue 17, finding 3).

The walk covers every pattern of the URL conf (tests/rcaweb/urlwalk.py), with data behind the sample paths,
and every query parameter a page's forms read, each given values that broke pages before: a NUL byte
(PostgreSQL refuses it in any text), a lone surrogate, huge numbers and windows (``timedelta`` overflows),
times at the calendar's ends, and very long strings. Hypothesis combines them further.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import Group, User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from collectors.models import Cluster
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import alert, gpu_uuid, payload, small_world
from tests.rcaweb.urlwalk import walk

# Every name a view or form reads from the query string (grep GET.get and the forms' fields).
PARAMS = ["t", "w", "page", "target", "kind", "errors", "cluster", "node", "queue", "project", "phase",
          "status", "severity", "namespace", "reason", "source", "actor", "metric", "owner", "q"]  # fmt: skip
EXTREME = [
    "\x00",
    "a\x00b",
    "\ud800",
    "1000000000d",
    "999999999999999999999999",
    "-1",
    "0",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "2026-11-29T03:12:00-01:00",
    "1e308",
    "x" * 5000,
    "%",
    "../../etc/passwd",
]


def overrides(uuid: str, incident_pk: int, alert_pk: int) -> dict[str, str]:
    return {
        "cluster": "gpu-prod",
        "namespace": "vision",
        "uuid": uuid,
        "pk": str(incident_pk),
        "name": "h100-01",
    }


def _get(client, path: str, params: dict[str, str]):
    client.raise_request_exception = False  # a 500 is an answer to count, not an exception to stop at
    # A lone surrogate cannot be UTF-8 encoded by the test client; send the bytes a browser would (invalid UTF-8).
    query = "&".join(f"{k}={_quote(v)}" for k, v in params.items())
    return client.get(f"{path}?{query}")


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value.encode("utf-8", "surrogatepass"), safe="")


class ExtremeQueryValuesTests(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)
        body = alert(
            "GPUJobPendingTooLong",
            {"cluster": "gpu-prod", "namespace": "vision", "job_name": "resnet-train"},
            T0,
        )
        ingest_alertmanager(payload([body]))
        self.incident = group_alert(Alert.objects.get(fingerprint=body["fingerprint"]))
        self.pages = [
            p
            for p in walk(overrides(gpu_uuid("h100-01", 0), self.incident.pk, 0))
            if not p.path.startswith("/static/")
        ]

    def test_no_page_answers_5xx_to_an_extreme_value_of_any_parameter(self) -> None:
        failures = []
        for page in self.pages:
            for name in PARAMS:
                for value in EXTREME:
                    r = _get(self.client, page.path, {name: value})
                    if r.status_code >= 500:
                        failures.append(f"{page.path}?{name}={value[:30]!r} -> {r.status_code}")
        assert failures == [], failures

    def test_a_huge_window_is_a_400_naming_w_on_every_page_and_the_api(self) -> None:
        for page in [*self.pages, type(self.pages[0])(f"/api/v1/incidents/{self.incident.pk}", "api")]:
            r = self.client.get(page.path, {"w": "1000000000d"})
            assert r.status_code == 400, (page.path, r.status_code)
            assert "w=" in r.content.decode(), page.path


class ExtremeQueryFuzzTests(TestCase):
    """Hypothesis' Django TestCase: each example in its own transaction."""

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        page=st.integers(min_value=0, max_value=10_000),
        params=st.dictionaries(
            st.sampled_from(PARAMS),
            st.one_of(st.sampled_from(EXTREME), st.text(max_size=30)),
            max_size=4,
        ),
    )
    def test_no_page_answers_5xx_to_any_combination(self, page, params) -> None:
        cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai")
        user = User.objects.create_user("alice", "alice@example.org", "password")
        user.groups.add(Group.objects.get_or_create(name="responder")[0])
        self.client.force_login(user)
        small_world(cluster, T0 - timedelta(minutes=5))
        pages = [
            p
            for p in walk({"cluster": "gpu-prod", "namespace": "vision", "name": "h100-01"})
            if not p.path.startswith("/static/")
        ]
        target = pages[page % len(pages)]
        r = _get(self.client, target.path, params)
        assert r.status_code < 500, (target.path, params, r.status_code)
