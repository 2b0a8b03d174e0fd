"""Login throttling (issue 17, finding 2; issue 42, finding 2): a shared, progressive delay that slows the guesser,
not the user."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from datetime import timedelta
from unittest import mock

import time_machine
from django.contrib.auth import authenticate
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client, RequestFactory
from django.utils import timezone

from rcaweb.models import LoginThrottle
from rcaweb.throttle import COOKIE, USERNAME_MAX_LENGTH, delay_after, normalize_username, throttled_for
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


class Checks:
    """Counts the password checks (ModelBackend.authenticate, under the policy or not). The callables of
    ``during`` run inside the first check, or the checks they start: what arrives while passwords are checked."""

    def __init__(self, during: list[Callable[[], object]] | None = None) -> None:
        self.count = 0
        self.during = list(during or [])
        self.original = ModelBackend.authenticate

    def __call__(self, backend: ModelBackend, request: object, *args: object, **kwargs: object) -> object:
        self.count += 1
        while self.during:
            self.during.pop(0)()
        return self.original(backend, request, *args, **kwargs)

    def __enter__(self) -> Checks:
        self.patch = mock.patch.object(ModelBackend, "authenticate", autospec=True, side_effect=self)
        self.patch.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.patch.stop()


class LoginPolicyTests(BaseTestCase):
    """Issue 42, finding 2: the count cannot be split by padding, outrun by concurrency, or turned against the
    users of a shared address."""

    def test_the_counted_username_is_the_longest_username_at_most(self) -> None:
        assert User._meta.get_field("username").max_length == USERNAME_MAX_LENGTH
        assert normalize_username(" " * 150 + "Carol") == "carol"
        assert len(normalize_username("x" * 400)) == USERNAME_MAX_LENGTH

    def test_it_counts_a_padded_username_as_the_user_it_authenticates(self) -> None:
        # Padded to 150 characters and beyond, " carol" is cut to "caro", "car", ... if cut before it is
        # stripped, while the form strips it and checks carol's password: one count, not six.
        statuses = []
        with Checks() as checks, time_machine.travel(timezone.now(), tick=False):
            for pad in range(145, 151):
                for i in range(5):
                    statuses.append(attempt(f"203.0.113.{pad - 100 + i * 10}", " " * pad + "carol", "wrong"))
        assert statuses == [200] * 5 + [429] * 25
        assert checks.count == 5

    def test_it_counts_concurrent_guesses_before_their_passwords_are_checked(self) -> None:
        # Twelve guesses in flight at once: the other eleven arrive while the first is having its password
        # checked, or one of those let through after it.
        statuses: list[int] = []

        def guess() -> None:
            statuses.append(attempt(ATTACKER, "carol", "wrong"))

        depth = sys.getrecursionlimit()
        sys.setrecursionlimit(max(depth, 4000))  # twelve requests nested in one thread: room for their stacks
        try:
            with Checks(during=[guess] * 11) as checks, time_machine.travel(timezone.now(), tick=False):
                guess()
        finally:
            sys.setrecursionlimit(depth)
        assert checks.count == 5  # the free attempts; the other seven were held back unchecked
        assert sorted(statuses) == [200] * 5 + [429] * 7

    def test_it_does_not_lock_the_known_users_of_an_address_out_with_made_up_names(self) -> None:
        proxy = "192.0.2.1"  # a TLS proxy: every user's address
        assert attempt(proxy, "alice", "password") == 302
        with time_machine.travel(timezone.now(), tick=False) as clock:
            for i in range(36):  # a patient guesser: each failure waits out the delay of the one before
                clock.shift(timedelta(seconds=delay_after(i) + 1))
                assert attempt(proxy, f"made-up-{i}", "guess") == 200
            assert attempt(proxy, "made-up-99", "guess") == 429  # names unknown there are held back
            assert attempt(proxy, "bob", "password") == 429  # bob has not signed in from it yet
            assert attempt(proxy, "alice", "password") == 302

    def test_it_lets_a_known_browser_in_while_its_address_guesses_the_same_user(self) -> None:
        proxy = "192.0.2.1"
        browser = Client(REMOTE_ADDR=proxy)
        alice = {"username": "alice", "password": "password"}
        assert browser.post("/accounts/login/", alice).status_code == 302
        with time_machine.travel(timezone.now(), tick=False):
            for _ in range(20):
                attempt(proxy, "alice", "wrong")  # a guesser behind the same proxy
            # Another browser behind the proxy is not known: the guesser there is slowed like anyone.
            assert attempt(proxy, "alice", "password") == 429
            assert browser.post("/accounts/login/", alice).status_code == 302

    def test_it_ignores_a_known_browser_cookie_it_did_not_sign(self) -> None:
        proxy = "192.0.2.1"
        forged = Client(REMOTE_ADDR=proxy)
        forged.cookies[COOKIE] = hashlib.sha256(b"alice").hexdigest()[:32]
        with time_machine.travel(timezone.now(), tick=False):
            for _ in range(6):
                attempt(proxy, "alice", "wrong")
            r = forged.post("/accounts/login/", {"username": "alice", "password": "password"})
            assert r.status_code == 429

    def test_every_password_check_is_under_the_policy(self) -> None:
        # Not only the login view: any code that authenticates a password goes through the same count.
        request = RequestFactory().post("/", REMOTE_ADDR=ATTACKER)
        with Checks() as checks:
            users = [authenticate(request, username="carol", password="wrong") for _ in range(10)]
        assert users == [None] * 10
        assert checks.count == 5
        assert throttled_for(request) > 0

    def test_a_success_gives_the_address_its_count_back(self) -> None:
        for i in range(4):
            attempt(ATTACKER, f"made-up-{i}", "guess")
        assert attempt(ATTACKER, "bob", "password") == 302
        assert LoginThrottle.objects.get(key=f"ip:{ATTACKER}").failures == 4
        # bob's own keys are cleared: only the four made-up names are left
        assert LoginThrottle.objects.filter(key__startswith="user:").count() == 4
