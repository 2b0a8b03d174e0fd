"""A NUL byte anywhere in a URL is a 400 naming where, before any view or query (issue 42, finding 4).

PostgreSQL refuses NUL in text: ``/c/gpu-prod/nodes/%00/`` was a DataError (500) there, and a 404 on SQLite
only because no node has that name. The guard is asserted on every database: the answer names the NUL byte.
"""

from __future__ import annotations

from tests.base import BaseTestCase

PATHS = [
    "/c/gpu-prod/nodes/%00/",
    "/c/gpu-prod/nodes/h100%0001/",
    "/c/gpu-prod/gpus/%00/",
    "/c/gpu-prod/jobs/%00/train/",
    "/c/gpu-prod/jobs/ml/%00/",
    "/c/gpu-prod/jobs/ml/%00/why/",
    "/c/gpu-prod/pods/ml/%00/",
    "/c/gpu-prod/projects/%00/",
    "/c/gpu-prod/queues/%00/",
    "/c/gpu-prod/departments/%00/",
    "/incidents/%00/",
]


class NulInPathTest(BaseTestCase):
    def test_it_answers_400_naming_the_nul_byte_on_every_entity_route(self):
        failures = []
        for path in PATHS:
            r = self.client.get(path)
            if r.status_code != 400 or b"URL path contains a NUL byte" not in r.content:
                failures.append(f"{path} -> {r.status_code}")
        assert failures == [], failures

    def test_it_answers_json_under_the_api(self):
        r = self.anon.get("/api/v1/incidents/%00")
        assert r.status_code == 400
        assert r.json() == {"error": "the URL path contains a NUL byte"}

    def test_the_answer_carries_the_security_headers(self):
        r = self.client.get("/c/gpu-prod/nodes/%00/")
        assert "Content-Security-Policy" in r and "no-store" in r["Cache-Control"]

    def test_a_percent_encoded_percent_sign_is_no_nul(self):
        assert self.client.get("/c/gpu-prod/nodes/%2500/").status_code == 404
