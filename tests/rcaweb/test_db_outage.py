from __future__ import annotations

from unittest import mock

from django.db import OperationalError
from django.test import Client

from tests.base import BaseTestCase

DOWN = OperationalError("server closed the connection unexpectedly")


class DatabaseOutageTest(BaseTestCase):
    """The database going away mid-request: a clean 503 with Retry-After, never a traceback page."""

    def client_with_session(self) -> Client:
        c = Client(raise_request_exception=False)
        c.force_login(self.alice)
        return c

    def test_a_page_request_during_an_outage_is_a_503_with_retry_after(self):
        c = self.client_with_session()
        with mock.patch("django.contrib.sessions.backends.db.SessionStore.load", side_effect=DOWN):
            r = c.get("/incidents/")
        assert r.status_code == 503
        assert r["Retry-After"] == "5"
        assert b"database is not answering" in r.content

    def test_an_api_request_during_an_outage_gets_json(self):
        c = Client(raise_request_exception=False)
        with mock.patch("rcaweb.views.connection.cursor", side_effect=DOWN):
            r = c.get("/readyz")
        assert r.status_code == 503 and r.json()["ready"] is False

    def test_the_same_request_succeeds_once_the_database_is_back(self):
        c = self.client_with_session()
        with mock.patch("django.contrib.sessions.backends.db.SessionStore.load", side_effect=DOWN):
            assert c.get("/incidents/").status_code == 503
        assert c.get("/incidents/").status_code == 200

    def test_other_errors_stay_500(self):
        c = self.client_with_session()
        with mock.patch("django.contrib.sessions.backends.db.SessionStore.load", side_effect=RuntimeError("boom")):
            r = c.get("/incidents/")
        assert r.status_code == 500
