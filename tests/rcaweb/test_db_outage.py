from __future__ import annotations

import json
from unittest import mock

import psycopg
import pytest
from django.db import DatabaseError, OperationalError, connection
from django.test import Client

from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import AUTH, alert, payload

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
        with mock.patch("web.views.connection.cursor", side_effect=DOWN):
            r = c.get("/readyz")
        assert r.status_code == 503 and r.json()["ready"] is False
        assert r["Retry-After"] == "5"

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


class DriverErrorTest(BaseTestCase):
    """Issue 42, finding 4: psycopg's own errors, raised outside Django's wrapper (the intake's raw fast path,
    ``incidents.intake._insert_postgresql``), were a 500: every database failure is a 503 with Retry-After."""

    def post_alerts(self):  # type: ignore[no-untyped-def]
        c = Client(raise_request_exception=False)
        return c.post(
            "/api/v1/alerts/alertmanager",
            data=json.dumps(payload([alert("A", {"node": "h100-01"}, T0)])),
            content_type="application/json",
            **AUTH,
        )

    def test_a_connection_cut_in_the_raw_insert_is_a_json_503_with_retry_after(self):
        cut = psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")
        with mock.patch("incidents.intake._insert", side_effect=cut):
            r = self.post_alerts()
        assert r.status_code == 503, r.content
        assert r["Retry-After"] == "5"
        assert "database is not answering" in r.json()["error"]

    def test_any_driver_or_django_database_error_is_a_503(self):
        for exc in (
            psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
            psycopg.InterfaceError("the connection is closed"),
            DatabaseError("could not serialize access"),
        ):
            with mock.patch("incidents.intake._insert", side_effect=exc):
                r = self.post_alerts()
            assert (r.status_code, r["Retry-After"]) == (503, "5"), exc

    def test_a_database_error_behind_another_exception_is_a_503(self):
        def raise_wrapped(*args, **kwargs):
            try:
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            except psycopg.Error as exc:
                raise RuntimeError("the insert failed") from exc

        with mock.patch("incidents.intake._insert", side_effect=raise_wrapped):
            assert self.post_alerts().status_code == 503


@pytest.mark.django_db(transaction=True)
def test_a_backend_killed_during_the_raw_insert_on_postgresql_is_a_503_and_the_next_post_succeeds():
    """On PostgreSQL: the webhook's own connection is terminated at the raw insert (as a database restart or a
    failover does), which psycopg raises itself; nothing is stored, and Alertmanager's retry is."""
    if connection.vendor != "postgresql":
        pytest.skip("the raw psycopg fast path runs on PostgreSQL only (DATABASE_URL=postgres://…)")
    from incidents import intake
    from incidents.models import Alert

    real = intake._insert_postgresql

    def killed(rows):  # type: ignore[no-untyped-def]
        with psycopg.Cursor(connection.connection) as cur:
            cur.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return real(rows)

    body = json.dumps(payload([alert("A", {"node": "h100-01"}, T0)]))
    c = Client(raise_request_exception=False)
    with mock.patch("incidents.intake._insert_postgresql", side_effect=killed):
        r = c.post("/api/v1/alerts/alertmanager", data=body, content_type="application/json", **AUTH)
    assert (r.status_code, r["Retry-After"]) == (503, "5"), r.content
    assert Alert.objects.count() == 0
    r = c.post("/api/v1/alerts/alertmanager", data=body, content_type="application/json", **AUTH)
    assert r.status_code == 200 and r.json()["created"] == 1
