"""Every URL pattern, unauthenticated, redirects to the login page (walks the URL conf: new pages are covered)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.test import Client, TestCase
from django.urls import resolve

from tests.rcaweb.urlwalk import resolvable, walk

# The documented public prefixes (README / DESIGN): login itself, health probes, static files,
# the token-protected API and metrics, and the optional OIDC callback.
LOGIN = settings.LOGIN_URL
PUBLIC = ("/accounts/login/", "/healthz", "/readyz", "/static/", "/api/", "/metrics", "/oidc/")
# The views marked @login_not_required (Django's LoginRequiredMiddleware lets them through without a session),
# each on purpose: login itself, the probes, and the views that check a bearer token of their own.
EXEMPT = {
    "login",
    "healthz",
    "readyz",
    "metrics",
    "incidents:api-alertmanager",
    "incidents:api-changes",
    "incidents:api-incident",
}


class LoginRequiredTest(TestCase):
    def test_it_walks_patterns_that_all_resolve(self):
        pages = list(walk())
        assert len(pages) > 10
        unresolved = [p.path for p in pages if not resolvable(p)]
        assert unresolved == [], f"the URL walker needs samples for: {unresolved}"
        names = {p.name for p in pages}
        for name in ("collectors:node", "collectors:job", "collectors:gpu", "collectors:jobs", "home"):
            assert name in names

    def test_only_the_listed_views_answer_without_a_session(self):
        exempt = {p.name for p in walk() if not getattr(resolve(p.path).func, "login_required", True)}
        assert exempt == EXEMPT
        assert all(p.path.startswith(PUBLIC) for p in walk() if p.name in EXEMPT)

    def test_the_admin_login_page_needs_the_one_login_too(self):
        # Django marks it @login_not_required; rcaweb.admin_site keeps it behind /accounts/login/ (throttled)
        r = Client().post("/admin/login/", {"username": "carol", "password": "x"})
        assert r.status_code == 302 and urlsplit(r["Location"]).path == LOGIN

    def test_it_redirects_every_private_page_to_login(self):
        anon = Client()
        failures = []
        for page in walk():
            if page.path.startswith(PUBLIC):
                continue
            for method in ("get", "post"):
                r = getattr(anon, method)(page.path)
                location = r.get("Location", "")
                if r.status_code != 302 or urlsplit(location).path != LOGIN:
                    failures.append(
                        f"{method.upper()} {page.path} ({page.name}) -> {r.status_code} {location}"
                    )
        assert failures == [], "\n".join(failures)

    def test_it_keeps_where_you_were_going_in_next(self):
        r = Client().get("/c/gpu-prod/nodes/h100-01/?t=2026-11-29T03:12:00Z&w=2h")
        assert r.status_code == 302
        assert (
            r["Location"]
            == "/accounts/login/?next=/c/gpu-prod/nodes/h100-01/%3Ft%3D2026-11-29T03%3A12%3A00Z%26w%3D2h"
        )

    def test_it_answers_the_api_with_401_not_a_login_redirect(self):
        anon = Client()
        api = [p for p in walk() if p.path.startswith("/api/")]
        for page in api:
            codes = {
                anon.get(page.path).status_code,
                anon.post(page.path, "{}", content_type="application/json").status_code,
            }
            assert 302 not in codes, page
            assert 401 in codes, (page, codes)

    def test_it_serves_login_and_health_probes_without_a_session(self):
        anon = Client()
        assert anon.get(LOGIN).status_code == 200
        assert anon.get("/healthz").status_code == 200
        assert anon.get("/readyz").status_code in (200, 503)
        metrics = anon.get("/metrics")  # token-protected, or hidden (404) when no token is configured
        assert metrics.status_code in (200, 401, 403, 404)
