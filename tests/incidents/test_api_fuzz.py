"""The JSON API fuzzed from its description, docs/openapi.yaml: no input answers a 5xx (issue 42).

schemathesis draws requests for each operation of the description, bodies that fit its schemas and bodies
that break them (wrong types, missing fields, values past their bounds), with the right token, and sends them
to the WSGI app in this process, so the test database is the app's. Any 5xx fails, a database 503 too: the
database is up. Each answer must also be one the description names (status, content type, body schema), so
the description cannot drift from the views. Each operation runs a bounded number of examples: tens of
seconds on SQLite and on PostgreSQL (CI runs ``make test`` on both).

An incident read is drawn with a made-up id; every other example reads a real incident instead, so the
answer that serialises an incident is fuzzed too (its id is all a request can vary).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import yaml
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, settings
from schemathesis.checks import content_type_conformance, response_schema_conformance, status_code_conformance

from collectors.models import Cluster
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, Incident
from tests.base import T0
from tests.incidents.fixtures.alertmanager import API_TOKEN, TOKEN, alert, payload

DESCRIPTION = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
EXAMPLES = 60  # per operation and generation mode

schema = schemathesis.openapi.from_path(DESCRIPTION)


class InProcess(WSGIHandler):
    """Django's WSGI handler, except that the test's database connection outlives each request (as with the
    test client): closing it would end the test's transaction."""

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            response = super().__call__(environ, start_response)
            try:
                return [b"".join(response)]
            finally:
                response.close()
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)


app = InProcess()


@pytest.fixture
def incident(db: None) -> Incident:
    Cluster.objects.get_or_create(name="gpu-prod", defaults={"scheduler": "kai"})
    labels = {"cluster": "gpu-prod", "namespace": "vision", "job_name": "resnet-train"}
    ingest_alertmanager(payload([alert("GPUJobPendingTooLong", labels, T0)]))
    return group_alert(Alert.objects.get())


def token_for(case: Any) -> str:
    return API_TOKEN if case.method == "GET" else TOKEN


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    # the database fixture is per test, not per example: the examples share its rows, which is the point
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_it_never_answers_5xx(case: Any, incident: Incident) -> None:
    made_up = (case.path_parameters or {}).get("id")
    if isinstance(made_up, int) and made_up % 2 == 0:
        case.path_parameters["id"] = incident.pk
    response = case.call(app=app, headers={"Authorization": f"Bearer {token_for(case)}"})
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} answered {response.status_code}: {response.text[:500]}\n"
        f"body: {case.body!r:.1000}"
    )
    # and the description stays true: every answer's status, content type and body are the ones it names
    case.validate_response(
        response, checks=[status_code_conformance, content_type_conformance, response_schema_conformance]
    )


def routes(patterns: list[URLPattern | URLResolver], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for p in patterns:
        if isinstance(p, URLResolver):
            out |= routes(p.url_patterns, prefix + str(p.pattern))
        else:
            out.add(prefix + str(p.pattern))
    return out


def test_it_describes_every_api_route_and_no_other():
    def shape(path: str) -> str:  # api/v1/incidents/<int:pk> and /api/v1/incidents/{id} alike
        return re.sub(r"<[^>]+>|\{[^}]+\}", "{}", "/" + path.lstrip("/"))

    served = {shape(r) for r in routes(get_resolver().url_patterns) if r.startswith("api/")}
    described = {shape(p) for p in yaml.safe_load(DESCRIPTION.read_text())["paths"]}
    assert served == described
