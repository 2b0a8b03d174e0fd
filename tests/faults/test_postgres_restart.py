"""PostgreSQL restarted under load.

Injects: rcaweb under gunicorn (2 processes × 4 threads, persistent connections, CONN_HEALTH_CHECKS) reaches
PostgreSQL through a TCP proxy the test controls (see ``TcpProxy``: cutting it is a restart as the app sees
it — every open connection reset, new ones refused). Four clients keep loading pages (home, incident list,
an incident) and posting Alertmanager notifications while the proxy is cut for two seconds, then restored.
Must hold: no answer is ever a 500 or a traceback and none takes longer than the client timeout; a request
made while the database is away is a 503 with ``Retry-After``; every request after it is back succeeds
(idle server threads still hold dead connections: the health check replaces them); every notification
answered 200 was stored, and those answered 503 are stored once when Alertmanager retries them.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from unittest import mock

import pytest
import requests
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.utils import timezone

from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert
from tests.faults.services import TcpProxy, app_env, database_url, start_gunicorn
from tests.incidents.fixtures.alertmanager import alert, payload

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        os.environ.get("RCAWEB_SERVICES_TESTS") != "1",
        reason="real PostgreSQL/Redis/Celery tests run in CI's second pass (.ci/run)",
    ),
]

CLIENT_TIMEOUT_S = 15.0  # gunicorn's own timeout is 30 s; PostgreSQL's connect_timeout is 5 s
URL = "/api/v1/alerts/alertmanager"


@dataclass
class Answer:
    what: str
    sent: float
    done: float
    status: int | None
    retry_after: str | None = None
    body: str = ""
    error: str = ""
    notification: dict | None = None

    @property
    def fingerprint(self) -> str:
        return self.notification["alerts"][0]["fingerprint"] if self.notification else ""


@pytest.fixture
def proxy(postgres) -> Iterator[TcpProxy]:  # type: ignore[no-untyped-def]
    s = connection.settings_dict
    server = TcpProxy(int(s["PORT"] or 5432), s["HOST"] or "127.0.0.1").start()
    yield server
    server.cut()


def test_it_answers_503_while_the_database_restarts_and_recovers_without_a_500(
    redis_server, procs, proxy, tmp_path
):
    viewer = User.objects.create_user("vera", password="x")
    viewer.groups.add(Group.objects.get_or_create(name="viewer")[0])
    browser = Client()
    browser.force_login(viewer)
    cookies = {settings.SESSION_COOKIE_NAME: browser.cookies[settings.SESSION_COOKIE_NAME].value}
    t0 = timezone.now().replace(microsecond=0) - timedelta(minutes=10)
    first = alert("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet"}, t0)
    with mock.patch("incidents.intake.enqueue_processing"):
        ingest_alertmanager(payload([first]))
    incident = group_alert(Alert.objects.get())
    pages = {"home": "/", "incidents": "/incidents/", "incident": incident.get_absolute_url()}

    env = app_env(
        database=database_url(via_port=proxy.port),
        redis=redis_server.url,  # notifications are queued there (no worker needed: the rows are the point)
    )
    web, base = start_gunicorn(env, tmp_path, workers=2, threads=4)
    procs.add(web)
    auth = {"Authorization": f"Bearer {settings.WEBHOOK_TOKENS[0]}"}
    serial = itertools.count()

    def request(what: str, session: requests.Session) -> Answer:
        notification = None
        sent = time.monotonic()
        try:
            if what == "intake":
                labels = {"namespace": "vision", "job_name": f"job-{next(serial)}"}
                notification = payload([alert("GPUJobPendingTooLong", labels, t0)])
                r = session.post(base + URL, json=notification, headers=auth, timeout=CLIENT_TIMEOUT_S)
            else:
                r = session.get(
                    base + pages[what], cookies=cookies, timeout=CLIENT_TIMEOUT_S, allow_redirects=False
                )
        except requests.RequestException as exc:
            return Answer(what, sent, time.monotonic(), None, error=repr(exc), notification=notification)
        done = time.monotonic()
        return Answer(
            what, sent, done, r.status_code, r.headers.get("Retry-After"), r.text[:300], "", notification
        )

    warm = requests.Session()
    for what in [*pages, "intake"]:
        a = request(what, warm)
        assert a.status == 200, a
    page = requests.get(
        base + pages["incident"], cookies=cookies, timeout=CLIENT_TIMEOUT_S, allow_redirects=False
    )
    assert page.status_code == 200 and f"<h1>#{incident.pk} " in page.text  # logged in: the real page

    answers: list[Answer] = []
    stop = threading.Event()

    def load(offset: int) -> None:
        session = requests.Session()
        kinds = itertools.islice(itertools.cycle([*pages, "intake"]), offset, None)
        while not stop.is_set():
            answers.append(request(next(kinds), session))
            time.sleep(0.02)

    clients = [threading.Thread(target=load, args=(i,)) for i in range(4)]
    for c in clients:
        c.start()
    time.sleep(1.0)
    cut_at = time.monotonic()
    proxy.cut()
    time.sleep(2.0)
    restored_at = time.monotonic()
    proxy.restore()
    time.sleep(2.0)
    stop.set()
    for c in clients:
        c.join(CLIENT_TIMEOUT_S + 5)

    assert not [a for a in answers if a.error], [a for a in answers if a.error][:3]
    assert not [a for a in answers if a.status not in (200, 503)], [
        a for a in answers if a.status not in (200, 503)
    ][:3]
    assert not [a for a in answers if "Traceback" in a.body]
    slowest = max(a.done - a.sent for a in answers)
    assert slowest < CLIENT_TIMEOUT_S
    before = [a for a in answers if a.done < cut_at]
    during = [a for a in answers if a.sent > cut_at and a.done < restored_at]
    after = [a for a in answers if a.sent > restored_at]
    assert before and during and after, (len(before), len(during), len(after))
    assert {a.status for a in before} == {200}
    assert {(a.status, a.retry_after) for a in during} == {(503, "5")}, [
        a for a in during if a.status != 503
    ][:3]
    assert {a.what for a in during} == {*pages, "intake"}  # pages and the intake alike
    assert [a for a in after if a.status != 200] == []
    assert max(a.done - a.sent for a in during) < 6.0  # refused fast, never waiting on a dead socket

    # Nothing answered 200 was lost; Alertmanager retries the 503s and each is then stored once.
    posted = [a for a in answers if a.what == "intake"]
    accepted = {a.fingerprint for a in posted if a.status == 200}
    assert (
        set(Alert.objects.filter(fingerprint__in=accepted).values_list("fingerprint", flat=True)) == accepted
    )
    refused = [a for a in posted if a.status == 503]
    assert refused
    for a in refused:
        r = requests.post(base + URL, json=a.notification, headers=auth, timeout=CLIENT_TIMEOUT_S)
        assert r.status_code == 200 and r.json()["received"] == 1, r.text
    fingerprints = [a.fingerprint for a in posted]
    assert Alert.objects.filter(fingerprint__in=fingerprints).count() == len(set(fingerprints)) == len(posted)
