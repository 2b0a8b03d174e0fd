"""Login throttling: one policy for every password check, a progressive delay shared through the database.

Where it applies. ``ThrottledModelBackend`` is the one authentication backend that checks passwords
(``AUTHENTICATION_BACKENDS``), so whatever form signs someone in with a password goes through it. The admin
offers no password form of its own: ``rcaweb.admin_site`` sends its login page to ``/accounts/login/``.

What is counted. A username is normalised, then truncated, then counted: stripped and NFKC-normalised as
Django's ``UsernameField`` cleans what it authenticates, case-folded, then cut to the longest username
(150): `` alice`` padded with spaces, ``ａlice`` (fullwidth) and ``Alice`` count against ``alice``. An attempt
counts under three keys:

- ``user:<hash>``, the username from anywhere (a guesser spread over many addresses);
- ``pair:<hash>:<address>``, the username from this address;
- ``ip:<address>``, the address, whatever the username (a guesser trying many names).

When. After ``RCAWEB_LOGIN_FREE_ATTEMPTS`` failures a key waits ``2^(n - free)`` seconds (capped by
``RCAWEB_LOGIN_MAX_DELAY_S``) before its next attempt is heard; meanwhile the answer is a 429 with
``Retry-After`` and no password is checked. A delay, not a lock: guessing stays slow, and the real user gets
in once it passes. A key with no failure for ``WINDOW`` starts again from zero.

Counted before the password is checked. An attempt takes its number under each key by an atomic claim (a
conditional update of the count it read: docs/conventions.md §15) before the password is checked, so
concurrent guesses each take their own number and only the free ones are heard. A success gives its claims
back: the user's own keys are cleared and the address's count is what it was; an attacker's own account
cannot reset the count of the address it guesses from.

Known users are not held back by others' guesses. A user is known at an address they logged in from
(a ``good:<hash>:<address>`` row) and on a browser that holds the signed cookie their login set
(``rcaweb_known``), each for ``KNOWN_GOOD``:

- the user key does not hold back a known user, so guesses from elsewhere cannot keep them out;
- the address key holds back only usernames unknown there, so failures for made-up users from one address
  (behind a TLS proxy, everyone's) do not lock out the users who sign in from it;
- the pair key holds back everyone but a known browser, so a guesser behind the same proxy as its victim is
  slowed as any other.

Every key counts every failure, whether or not it held that attempt back. State lives in
``rcaweb.LoginThrottle`` (the database): every worker process and host sees one count.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from weakref import WeakKeyDictionary

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F
from django.http import HttpRequest
from django.utils import timezone

from rcaweb.models import LoginThrottle

WINDOW = timedelta(hours=24)  # a key with no failure for this long starts again from zero
KNOWN_GOOD = timedelta(days=30)  # a user stays known at an address, or on a browser, this long
USERNAME_MAX_LENGTH = 150  # AbstractUser.username: the login form refuses a longer one unchecked
COOKIE = "rcaweb_known"  # the users who signed in on this browser (hashes), signed
COOKIE_SALT = "rcaweb-login-known-browser"
COOKIE_USERS = 5  # a shared browser remembers this many users, the latest first
CLAIM_TRIES = 20  # conditional updates lost to concurrent attempts before the attempt is told to retry


def normalize_username(username: str) -> str:
    """Normalise, then truncate: the identity a username authenticates as, as it is counted."""
    cleaned = unicodedata.normalize("NFKC", (username or "").strip()).strip().casefold()
    return cleaned[:USERNAME_MAX_LENGTH]


def user_hash(username: str) -> str:
    return hashlib.sha256(normalize_username(username).encode()).hexdigest()[:32]


def _address(request: HttpRequest) -> str:
    return (request.META.get("REMOTE_ADDR") or "")[:64]


def delay_after(failures: int) -> float:
    """Seconds the key waits after its ``failures``-th failure: none while free, then doubling, capped."""
    free = settings.LOGIN_FREE_ATTEMPTS
    if failures < free:
        return 0.0
    exponent = min(failures - free, 30)  # 2^30 s is far past any cap: no float overflow
    return float(min(2**exponent, settings.LOGIN_MAX_DELAY_S))


def known_on_browser(request: HttpRequest) -> list[str]:
    value = request.get_signed_cookie(COOKIE, default="", salt=COOKIE_SALT, max_age=KNOWN_GOOD)
    return [h for h in (value or "").split(",") if h]


#
# Admission: claim every key before the password is checked, give the claims back on success
#


@dataclass(frozen=True)
class Claim:
    """One key's number taken by an attempt, and the key's delay before it (given back on success)."""

    key: str
    failures: int
    before: datetime | None


@dataclass
class Admission:
    """What ``admit`` decided: wait ``wait`` seconds, or go ahead holding ``claims``."""

    user_keys: tuple[str, str]  # the user's own keys, cleared when they log in
    good_key: str
    wait: int = 0
    claims: list[Claim] = field(default_factory=list)


class _Refused(Exception):
    def __init__(self, wait: int) -> None:
        super().__init__(wait)
        self.wait = wait


def _seconds(delta: timedelta) -> int:
    return max(1, math.ceil(delta.total_seconds()))


def admit(request: HttpRequest, username: str, now: datetime | None = None) -> Admission:
    """Count an attempt for ``username`` from this request under each key, or say how long it must wait."""
    now = now or timezone.now()
    user, address = user_hash(username), _address(request)
    user_key, pair_key, ip_key, good_key = (
        f"user:{user}",
        f"pair:{user}:{address}",
        f"ip:{address}",
        f"good:{user}:{address}",
    )
    rows = {r.key: r for r in LoginThrottle.objects.filter(key__in=[user_key, pair_key, ip_key, good_key])}
    good = rows.get(good_key)
    known_browser = user in known_on_browser(request)
    known = known_browser or (good is not None and good.last_seen >= now - KNOWN_GOOD)
    # (key, whether it holds this attempt back), in one order for every attempt: row locks never cross
    keys = sorted([(user_key, not known), (pair_key, not known_browser), (ip_key, not known)])
    admission = Admission(user_keys=(user_key, pair_key), good_key=good_key)
    waits = [
        row.next_allowed - now
        for key, holds in keys
        if holds
        and (row := rows.get(key)) is not None
        and row.next_allowed is not None
        and row.next_allowed > now
        and row.last_seen >= now - WINDOW
    ]
    if waits:
        admission.wait = _seconds(max(waits))
        return admission
    try:
        with transaction.atomic():  # all the keys or none: a refusal on one gives back the others
            admission.claims = [_claim(key, holds, now) for key, holds in keys]
    except _Refused as refused:  # a concurrent attempt took the last free number meanwhile
        admission.wait = refused.wait
    return admission


def _claim(key: str, holds: bool, now: datetime) -> Claim:
    for _ in range(CLAIM_TRIES):
        row = _row(key, now)
        fresh = row.last_seen >= now - WINDOW
        if holds and fresh and row.next_allowed is not None and row.next_allowed > now:
            raise _Refused(_seconds(row.next_allowed - now))
        failures = row.failures + 1 if fresh else 1
        delay = delay_after(failures)
        # no wait while free: "now + 0" would hold back a concurrent attempt whose clock read a moment earlier
        after = now + timedelta(seconds=delay) if delay > 0 else None
        taken = LoginThrottle.objects.filter(
            pk=row.pk, failures=row.failures, last_seen=row.last_seen
        ).update(failures=failures, last_seen=now, next_allowed=after)
        if taken:
            return Claim(key, failures, row.next_allowed if fresh else None)
    raise _Refused(1)  # every try lost to another attempt: this one is heard again in a second


def _row(key: str, now: datetime) -> LoginThrottle:
    row = LoginThrottle.objects.filter(key=key).first()
    if row is not None:
        return row
    try:
        with transaction.atomic():
            return LoginThrottle.objects.create(key=key, failures=0, last_seen=now)
    except IntegrityError:  # another attempt inserted it between our read and write
        return LoginThrottle.objects.get(key=key)


def settle(admission: Admission, success: bool, now: datetime | None = None) -> None:
    """A failure keeps its claims. A success clears the user's own keys, gives the address's count back as
    it was, and remembers the address as the user's."""
    if not success:
        return
    now = now or timezone.now()
    LoginThrottle.objects.filter(key__in=admission.user_keys).delete()
    for claim in admission.claims:
        if claim.key in admission.user_keys:
            continue
        given_back = LoginThrottle.objects.filter(key=claim.key, failures=claim.failures).update(
            failures=claim.failures - 1, next_allowed=claim.before
        )
        if not given_back:  # others were counted since: take ours off and leave their delay
            LoginThrottle.objects.filter(key=claim.key, failures__gt=0).update(failures=F("failures") - 1)
    if not LoginThrottle.objects.filter(key=admission.good_key).update(last_seen=now):
        try:
            with transaction.atomic():
                LoginThrottle.objects.create(key=admission.good_key, last_seen=now)
        except IntegrityError:  # a concurrent login from the same place created it
            pass
    LoginThrottle.objects.filter(last_seen__lt=now - KNOWN_GOOD).delete()  # old rows, by the last_seen index


#
# Where passwords are checked
#

_WAITS: WeakKeyDictionary[HttpRequest, int] = WeakKeyDictionary()  # requests held back, for the login view


def throttled_for(request: HttpRequest) -> int:
    """Seconds the login attempt of ``request`` was told to wait (0: it was heard)."""
    return _WAITS.get(request, 0)


class ThrottledModelBackend(ModelBackend):
    """Django's ModelBackend under the login policy: an attempt is counted before its password is checked,
    and one that must wait is refused without a check (``PermissionDenied`` stops ``authenticate()``).

    Without a request (``Client.login`` in tests, a shell) there is no address and nothing is throttled.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        if request is None or username is None or password is None:
            return super().authenticate(request, username, password, **kwargs)
        admission = admit(request, username)
        if admission.wait:
            _WAITS[request] = admission.wait
            raise PermissionDenied
        user = super().authenticate(request, username, password, **kwargs)
        settle(admission, user is not None)
        return user
