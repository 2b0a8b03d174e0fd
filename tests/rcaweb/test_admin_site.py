"""The admin site behind the one login (issue 42, finding 1: its own password form was never throttled)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from django.conf import settings

from tests.base import BaseTestCase
from tests.rcaweb.test_throttle import Checks


class AdminLoginTests(BaseTestCase):
    def test_it_checks_no_password_posted_to_the_admin_login_form(self) -> None:
        viewer = self.login_as(self.bob)
        with Checks() as checks:
            answers = [
                viewer.post("/admin/login/", {"username": "carol", "password": f"guess-{i}"})
                for i in range(25)
            ]
            answers.append(viewer.post("/admin/login/", {"username": "carol", "password": "password"}))
        assert checks.count == 0
        assert {(r.status_code, urlsplit(r["Location"]).path) for r in answers} == {(302, settings.LOGIN_URL)}
        assert viewer.session["_auth_user_id"] == str(self.bob.pk)  # still bob: no staff session
        assert viewer.get("/admin/").status_code == 302

    def test_it_sends_a_signed_in_non_staff_user_to_the_one_login(self) -> None:
        r = self.login_as(self.bob).get("/admin/login/?next=/admin/auth/user/")
        assert r.status_code == 302
        location = urlsplit(r["Location"])
        assert location.path == settings.LOGIN_URL
        assert parse_qs(location.query) == {"next": ["/admin/auth/user/"]}
        page = self.login_as(self.bob).get(r["Location"])
        assert b"Signed in as bob, who cannot open that page" in page.content

    def test_it_sends_signed_in_staff_on_to_the_admin(self) -> None:
        r = self.login_as(self.carol).get("/admin/login/")
        assert r.status_code == 302 and r["Location"] == "/admin/"
        assert self.login_as(self.carol).get("/admin/").status_code == 200

    def test_staff_sign_in_to_the_admin_through_the_one_login(self) -> None:
        r = self.anon.post("/accounts/login/?next=/admin/", {"username": "carol", "password": "password"})
        assert r.status_code == 302 and r["Location"] == "/admin/"
        assert self.anon.get("/admin/").status_code == 200
