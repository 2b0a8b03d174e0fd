from __future__ import annotations

import os
import subprocess
import sys

from django.test import override_settings

from tests.base import BaseTestCase


class SecurityHeadersTest(BaseTestCase):
    def test_it_sends_a_csp_without_inline_scripts_and_denies_framing(self):
        r = self.client.get("/healthz")
        csp = r["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
        assert r["X-Frame-Options"] == "DENY"

    def test_it_enforces_csrf_on_forms(self):
        from django.test import Client

        c = Client(enforce_csrf_checks=True)
        c.force_login(self.alice)
        r = c.post("/accounts/logout/")
        assert r.status_code == 403


class LoginThrottleTest(BaseTestCase):
    def setUp(self):
        super().setUp()
        from django.core.cache import cache

        cache.clear()

    def test_it_refuses_after_five_failures_with_429(self):
        for _ in range(5):
            r = self.anon.post("/accounts/login/", {"username": "alice", "password": "wrong"})
            assert r.status_code == 200
        r = self.anon.post("/accounts/login/", {"username": "alice", "password": "password"})
        assert r.status_code == 429
        assert b"Too many failed logins" in r.content

    def test_a_good_login_still_works_before_the_limit(self):
        r = self.anon.post("/accounts/login/", {"username": "alice", "password": "password"})
        assert r.status_code == 302


class AuditLogTest(BaseTestCase):
    def test_only_admins_see_the_audit_log(self):
        assert self.client.get("/audit/").status_code == 403  # alice: responder
        assert self.login_as(self.bob).get("/audit/").status_code == 403
        assert self.login_as(self.carol).get("/audit/").status_code == 200
        assert self.anon.get("/audit/").status_code == 302


class MetricsTest(BaseTestCase):
    @override_settings(METRICS_TOKEN="m-token")
    def test_it_needs_the_bearer_token(self):
        assert self.anon.get("/metrics").status_code == 401
        assert self.anon.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
        r = self.anon.get("/metrics", headers={"Authorization": "Bearer m-token"})
        assert r.status_code == 200
        body = r.content.decode()
        assert "rcaweb_alerts_received_total 0" in body
        assert 'rcaweb_incidents{status="open"} 0' in body


class ReadyzTest(BaseTestCase):
    def test_it_reports_database_and_sweeps(self):
        from django.utils import timezone

        from collectors.models import SourceRun

        SourceRun.objects.create(
            cluster=self.cluster, source="k8s", call="list pods", time=timezone.now(), ok=True
        )
        r = self.client.get("/readyz")  # signed in: the details
        assert r.status_code == 200
        data = r.json()
        assert data["database"] == "ok"
        assert data["sweeps"][0]["cluster"] == "gpu-prod" and data["sweeps"][0]["source"] == "k8s"

    @override_settings(METRICS_TOKEN="m-token")
    def test_it_names_clusters_and_sources_only_to_operators_and_the_metrics_token(self):
        from django.utils import timezone

        from collectors.models import SourceRun

        SourceRun.objects.create(
            cluster=self.cluster, source="k8s", call="list pods", time=timezone.now(), ok=True
        )
        anon = self.anon.get("/readyz")
        assert anon.status_code == 200 and anon.json()["ready"] is True
        assert "sweeps" not in anon.json() and b"gpu-prod" not in anon.content
        assert "sweeps" not in self.anon.get("/readyz", headers={"Authorization": "Bearer nope"}).json()
        scraped = self.anon.get("/readyz", headers={"Authorization": "Bearer m-token"}).json()
        assert scraped["sweeps"][0]["cluster"] == "gpu-prod"


class HardeningHeadersTest(BaseTestCase):
    """Issue 17, finding 5: HSTS, no-store, request ids."""

    def test_it_sends_hsts_on_https_when_not_debug(self):
        from django.conf import settings

        assert not settings.DEBUG and settings.SECURE_HSTS_SECONDS == 31_536_000
        r = self.client.get("/healthz", secure=True)
        assert r["Strict-Transport-Security"] == "max-age=31536000"

    def test_hsts_is_configurable_and_needs_debug_off(self):
        r = _settings_import({"RCAWEB_DEBUG": "false", "RCAWEB_SECRET_KEY": "k", "RCAWEB_HSTS_SECONDS": "600"},
                             "print(settings.SECURE_HSTS_SECONDS)")  # fmt: skip
        assert r.stdout.strip() == "600", r.stderr
        r = _settings_import(
            {"RCAWEB_DEBUG": "true", "RCAWEB_HSTS_SECONDS": "600"}, "print(settings.SECURE_HSTS_SECONDS)"
        )
        assert r.stdout.strip() == "0", r.stderr

    def test_signed_in_pages_are_not_stored_by_any_cache(self):
        r = self.client.get("/incidents/")
        assert r.status_code == 200 and "no-store" in r["Cache-Control"]
        assert "no-store" not in self.anon.get("/healthz").get("Cache-Control", "")  # public: cacheable

    def test_it_keeps_a_plain_client_request_id_and_replaces_anything_else(self):
        assert (
            self.client.get("/healthz", headers={"X-Request-Id": "abc-123.4:5"})["X-Request-Id"]
            == "abc-123.4:5"
        )
        for bad in ("a b", "x" * 65, "id\r\nX-Forged: 1", "<script>", "-leading-dash", "ü"):
            rid = self.client.get("/healthz", headers={"X-Request-Id": bad})["X-Request-Id"]
            assert rid != bad and len(rid) == 32 and rid.isalnum(), (bad, rid)

    def test_the_audit_log_gets_the_validated_request_id(self):
        from incidents.models import AuditEntry, Incident
        from tests.base import T0

        inc = Incident.objects.create(title="i", onset=T0, window_start=T0)
        self.client.post(
            f"/incidents/{inc.pk}/", {"ack": "1"}, headers={"X-Request-Id": "forged id\twith tabs"}
        )
        ids = set(AuditEntry.objects.values_list("request_id", flat=True))
        assert len(ids) == 1 and all(len(i) == 32 and i.isalnum() for i in ids), ids


def _settings_import(env: dict[str, str], then: str = "") -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RCAWEB_", "PYTEST_"))}
    clean.update(env)
    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE','rcaweb.settings'); django.setup()"
    )
    if then:
        code += "; from django.conf import settings; " + then
    return subprocess.run(
        [sys.executable, "-c", code],
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_refuses_to_start_without_a_secret_key_when_not_debug():
    r = _settings_import({"RCAWEB_DEBUG": "false"})
    assert r.returncode != 0
    assert "RCAWEB_SECRET_KEY is missing" in r.stderr


def test_it_rejects_a_non_boolean_debug_value():
    r = _settings_import({"RCAWEB_DEBUG": "maybe", "RCAWEB_SECRET_KEY": "x"})
    assert r.returncode != 0 and "RCAWEB_DEBUG='maybe'" in r.stderr


def test_it_reads_secrets_from_files(tmp_path):
    f = tmp_path / "key"
    f.write_text("from-a-file\n")
    r = _settings_import({"RCAWEB_SECRET_KEY_FILE": str(f)})
    assert r.returncode == 0, r.stderr
