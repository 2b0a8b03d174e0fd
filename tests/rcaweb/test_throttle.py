"""Login throttling (issue 17, finding 2): a shared, progressive delay that slows the guesser, not the user."""

from __future__ import annotations

from datetime import timedelta

import time_machine
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from rcaweb.models import LoginThrottle
from rcaweb.throttle import delay_after, normalize_username
from tests.base import BaseTestCase

ATTACKER = "203.0.113.9"  # documentation addresses (RFC 5737)
ATTACKER_2 = "198.51.100.7"
ALICE_DESK = "192.0.2.10"
ALICE_HOTEL = "192.0.2.77"


def attempt(addr: str, username: str, password: str) -> int:
    return (
        Client(REMOTE_ADDR=addr)
        .post("/accounts/login/", {"username": username, "password": password})
        .status_code
    )


class LoginThrottleTests(BaseTestCase):
    def test_it_counts_a_fullwidth_or_capitalized_username_as_the_same_user(self) -> None:
        assert normalize_username("ｖｉｃｔｉｍ") == normalize_username("Victim") == "victim"
        for i, name in enumerate(["ａｌｉｃｅ", "ALICE", "Alice", "ａlice", "alice"]):
            assert attempt(f"198.51.100.{i + 1}", name, "wrong") == 200
        # Five failures for "alice" from five addresses: the sixth, from a sixth address, waits.
        assert attempt("198.51.100.99", "ａlice", "password") == 429

    def test_it_does_not_let_the_attackers_own_login_clear_the_count_of_its_address(self) -> None:
        for _ in range(4):
            assert attempt(ATTACKER, "alice", "wrong") == 200
        assert attempt(ATTACKER, "bob", "password") == 302  # the attacker's own account, same address
        assert attempt(ATTACKER, "alice", "wrong") == 200  # the fifth failure: free attempts are used up
        assert attempt(ATTACKER, "carol", "guess") == 429

    def test_it_keeps_the_count_in_the_database_so_every_worker_sees_it(self) -> None:
        for _ in range(5):
            assert attempt(ATTACKER, "alice", "wrong") == 200
            cache.clear()  # what another worker process would see of a per-process cache: nothing
        assert LoginThrottle.objects.get(key__startswith="ip:").failures == 5
        assert attempt(ATTACKER, "alice", "wrong") == 429

    def test_it_never_locks_the_real_user_out_of_a_known_good_address(self) -> None:
        assert attempt(ALICE_DESK, "alice", "password") == 302  # alice's usual address is now known good
        for i in range(30):
            attempt(f"203.0.113.{i + 1}", "alice", "wrong")  # a spread-out guesser
        assert attempt(ALICE_DESK, "alice", "password") == 302

    def test_it_delays_a_new_address_progressively_and_then_lets_the_user_in(self) -> None:
        start = timezone.now()
        with time_machine.travel(start, tick=False) as clock:
            for _ in range(5):
                assert attempt(ATTACKER, "alice", "wrong") == 200
            r = Client(REMOTE_ADDR=ALICE_HOTEL).post(
                "/accounts/login/", {"username": "alice", "password": "password"}
            )
            assert r.status_code == 429 and r["Retry-After"] == "1"
            assert b"Too many failed logins" in r.content
            clock.shift(timedelta(seconds=2))
            assert attempt(ATTACKER_2, "alice", "wrong") == 200  # the sixth failure doubles the wait
            assert attempt(ATTACKER_2, "alice", "wrong") == 429
            clock.shift(timedelta(seconds=3))  # the wait is a delay, not a lock
            assert attempt(ALICE_HOTEL, "alice", "password") == 302

    def test_the_delay_doubles_and_is_capped(self) -> None:
        assert [delay_after(n) for n in range(4, 9)] == [0, 1, 2, 4, 8]
        assert delay_after(10_000) == 900
