"""Guesses for one user arriving at once, on PostgreSQL, each request in its own thread and connection (issue 42,
finding 2: 48 parallel wrong passwords had 13 checked, as each read the count before any wrote it).

Must hold: only the free attempts have their password checked; the others answer 429 unchecked, and the count
holds every checked guess."""

from __future__ import annotations

import threading
import time
from collections import Counter
from unittest import mock

import pytest
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from rcaweb.models import LoginThrottle

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
GUESSES = 48


def test_concurrent_guesses_have_only_the_free_ones_checked(postgres: None) -> None:
    User.objects.create_user("carol", "carol@example.org", "password")
    original = ModelBackend.authenticate
    checks: list[str] = []
    start = threading.Barrier(GUESSES)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def slow_check(backend: ModelBackend, request: object, *args: object, **kwargs: object) -> object:
        checks.append("checked")
        time.sleep(0.5)  # a slow hash: the other guesses arrive while this one is being checked
        return original(backend, request, *args, **kwargs)

    def guess() -> None:
        try:
            start.wait(timeout=30)
            client = Client(REMOTE_ADDR="203.0.113.9")
            statuses.append(
                client.post("/accounts/login/", {"username": "carol", "password": "wrong"}).status_code
            )
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    with mock.patch.object(ModelBackend, "authenticate", autospec=True, side_effect=slow_check):
        threads = [threading.Thread(target=guess) for _ in range(GUESSES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert not errors, errors
    free = settings.LOGIN_FREE_ATTEMPTS
    assert len(checks) == free
    assert Counter(statuses) == {200: free, 429: GUESSES - free}
    assert {r.failures for r in LoginThrottle.objects.exclude(key__startswith="good:")} == {free}
