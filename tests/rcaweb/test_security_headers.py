"""Security headers on every answer, error pages included (issue 42, finding 9).

``SecurityHeadersMiddleware`` was the last middleware, so an answer made by one before it (the cursor's 400,
the NUL check's 400) or by ``handler500`` for one of them left without CSP or Cache-Control; and ``no-store``
depended on a signed-in user, so what a bearer token unlocks (``/metrics``, ``/readyz``'s details) could be
kept by a cache.
"""

from __future__ import annotations

from unittest import mock

from django.db import OperationalError
from django.test import Client, override_settings

from tests.base import BaseTestCase


class SecurityHeadersOnErrorsTest(BaseTestCase):
    def assert_secured(self, r, *, no_store: bool = True) -> None:
        assert "script-src 'self'" in r["Content-Security-Policy"], r.status_code
        assert r["X-Frame-Options"] == "DENY"
        assert r["X-Content-Type-Options"] == "nosniff"
        if no_store:
            assert "no-store" in r.get("Cache-Control", ""), r.status_code

    def test_a_bad_cursor_400_carries_csp_and_no_store(self):
        r = self.client.get("/incidents/", {"t": "yesterday"})
        assert r.status_code == 400
        self.assert_secured(r)

    def test_a_bad_cursor_400_under_the_api_carries_them_too(self):
        r = self.client.get("/api/v1/incidents/1", {"t": "yesterday"})
        assert r.status_code == 400
        self.assert_secured(r)

    def test_a_nul_parameter_400_carries_them(self):
        r = self.client.get("/incidents/", {"kind": "\x00"})
        assert r.status_code == 400
        self.assert_secured(r)

    def test_a_404_and_a_csrf_403_carry_them(self):
        self.assert_secured(self.client.get("/no/such/page/"))
        c = Client(enforce_csrf_checks=True)
        c.force_login(self.alice)
        r = c.post("/accounts/logout/")
        assert r.status_code == 403
        self.assert_secured(r)

    def test_a_database_outage_503_carries_them(self):
        c = Client(raise_request_exception=False)
        c.force_login(self.alice)
        down = OperationalError("server closed the connection unexpectedly")
        with mock.patch("django.contrib.sessions.backends.db.SessionStore.load", side_effect=down):
            r = c.get("/incidents/")
        assert r.status_code == 503
        self.assert_secured(r)

    def test_an_answer_to_a_failure_in_an_early_middleware_carries_them(self):
        """handler500 answers where the exception was raised: here before the session and X-Frame-Options
        middleware ever ran."""
        c = Client(raise_request_exception=False)
        with mock.patch("rcaweb.middleware.uuid.uuid4", side_effect=OperationalError("connection lost")):
            r = c.get("/healthz")
        assert r.status_code == 503
        self.assert_secured(r, no_store=False)

    def test_an_anonymous_login_redirect_carries_csp(self):
        r = self.anon.get("/incidents/")
        assert r.status_code == 302
        self.assert_secured(r, no_store=False)

    def test_public_probes_stay_cacheable_and_static_files_keep_their_caching(self):
        assert "no-store" not in self.anon.get("/healthz").get("Cache-Control", "")
        assert "no-store" not in self.anon.get("/readyz").get("Cache-Control", "")


class TokenAnswersAreNotStoredTest(BaseTestCase):
    @override_settings(METRICS_TOKEN="m-token")
    def test_metrics_answered_with_the_token_is_no_store(self):
        r = self.anon.get("/metrics", headers={"Authorization": "Bearer m-token"})
        assert r.status_code == 200
        assert "no-store" in r["Cache-Control"] and "Content-Security-Policy" in r

    @override_settings(METRICS_TOKEN="m-token")
    def test_readyz_answered_with_the_token_is_no_store(self):
        r = self.anon.get("/readyz", headers={"Authorization": "Bearer m-token"})
        assert r.status_code == 200 and "sweeps" in r.json()
        assert "no-store" in r["Cache-Control"]

    @override_settings(METRICS_TOKEN="m-token")
    def test_a_refused_token_is_no_store_too(self):
        r = self.anon.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401 and "no-store" in r["Cache-Control"]
