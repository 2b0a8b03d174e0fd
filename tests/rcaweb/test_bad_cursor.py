"""A malformed t or w is a 400 that names the expected format, on every page (never a silent "now")."""

from __future__ import annotations

from tests.base import BaseTestCase
from tests.rcaweb.urlwalk import walk

BAD_T = ["yesterday", "2026-11-29", "2026-11-29T03:12:00+02:00", "2026-13-01T00:00:00Z"]
BAD_W = ["forever", "0m", "40d"]


class BadCursorTest(BaseTestCase):
    def test_it_answers_400_naming_the_t_format_on_every_page(self):
        failures = []
        for page in walk({"cluster": "gpu-prod"}):
            if page.path.startswith("/static/"):
                continue
            for bad in BAD_T:
                r = self.client.get(page.path, {"t": bad})
                body = r.content.decode()
                if r.status_code != 400 or "2026-11-29T03:12:00Z" not in body or "t" not in body:
                    failures.append(f"{page.path} t={bad} -> {r.status_code}")
        assert failures == [], failures

    def test_it_answers_400_naming_the_w_format_on_every_page(self):
        failures = []
        for page in walk({"cluster": "gpu-prod"}):
            if page.path.startswith("/static/"):
                continue
            for bad in BAD_W:
                r = self.client.get(page.path, {"t": "2026-11-29T03:12:00Z", "w": bad})
                if r.status_code != 400 or "30m, 2h, 1d" not in r.content.decode():
                    failures.append(f"{page.path} w={bad} -> {r.status_code}")
        assert failures == [], failures

    def test_it_says_which_parameter_is_wrong_on_an_entity_page(self):
        r = self.client.get("/c/gpu-prod/nodes/h100-01/", {"t": "03:12"})
        assert r.status_code == 400
        assert r.content.decode().startswith(
            "Bad time cursor: t='03:12' is not valid: t must be an ISO 8601 UTC time"
        )

    def test_it_accepts_a_good_cursor(self):
        r = self.client.get("/c/gpu-prod/jobs/", {"t": "2026-11-29T03:12:00Z", "w": "30m"})
        assert r.status_code == 200
