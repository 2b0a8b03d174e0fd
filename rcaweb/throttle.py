"""Login throttling: a progressive delay per username and per source address, shared through the database.

- The username is keyed NFKC-normalized and case-folded, as Django's ``UsernameField`` normalizes what it
  authenticates: ``ｖictim`` (fullwidth) and ``Victim`` count against ``victim``.
- After ``RCAWEB_LOGIN_FREE_ATTEMPTS`` failures a key waits ``2^(n - free)`` seconds (capped by
  ``RCAWEB_LOGIN_MAX_DELAY_S``) before its next attempt is heard; the answer meanwhile is a 429 with
  ``Retry-After``. A delay, not a lock: guessing stays slow, and the real user gets in once it passes.
- A username's delay does not apply from an address where that user has logged in before (a known-good
  address), so guesses from elsewhere cannot keep the real user out of their usual desk.
- A successful login clears only that user's own username count; the address's count decays with time
  (``WINDOW``), so an attacker's own account cannot reset the count of the address it guesses from.
- State lives in ``rcaweb.LoginThrottle`` (the database): every worker process and host sees one count,
  which the per-process cache did not.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from rcaweb.models import LoginThrottle

WINDOW = timedelta(hours=24)  # a key with no failure for this long starts again from zero
KNOWN_GOOD = timedelta(days=30)  # an address a user logged in from stays trusted for them this long


def normalize_username(username: str) -> str:
    """The identity a username authenticates as, for counting: NFKC (as UsernameField), then case-folded."""
    return unicodedata.normalize("NFKC", username or "").strip().casefold()


def _user_key(username: str) -> str:
    return hashlib.sha256(normalize_username(username).encode()).hexdigest()[:32]


def _address(request: HttpRequest) -> str:
    return (request.META.get("REMOTE_ADDR") or "")[:64]


def _keys(request: HttpRequest, username: str) -> tuple[str, str]:
    return f"user:{_user_key(username)}", f"ip:{_address(request)}"


def _good_key(request: HttpRequest, username: str) -> str:
    return f"good:{_user_key(username)}:{_address(request)}"


def delay_after(failures: int) -> float:
    """Seconds the key waits after its ``failures``-th failure: none while free, then doubling, capped."""
    free = settings.LOGIN_FREE_ATTEMPTS
    if failures < free:
        return 0.0
    exponent = min(failures - free, 30)  # 2^30 s is far past any cap: no float overflow
    return float(min(2**exponent, settings.LOGIN_MAX_DELAY_S))


def retry_after(request: HttpRequest, username: str, now: datetime | None = None) -> int:
    """Seconds until an attempt for ``username`` from this address is heard; 0 when it may go ahead."""
    now = now or timezone.now()
    user_key, ip_key = _keys(request, username)
    wanted = [ip_key, user_key, _good_key(request, username)]
    rows = {r.key: r for r in LoginThrottle.objects.filter(key__in=wanted)}
    good = rows.get(wanted[2])
    trusted = good is not None and good.last_seen >= now - KNOWN_GOOD
    waits = []
    for key in (ip_key, user_key):
        row = rows.get(key)
        if row is None or row.next_allowed is None or row.last_seen < now - WINDOW:
            continue
        if key == user_key and trusted:
            continue
        waits.append((row.next_allowed - now).total_seconds())
    return max(0, math.ceil(max(waits, default=0)))


def note_failure(request: HttpRequest, username: str, now: datetime | None = None) -> None:
    now = now or timezone.now()
    for key in _keys(request, username):
        with transaction.atomic():
            row = _row_for_update(key, now)
            failures = 1 if row.last_seen < now - WINDOW else row.failures + 1
            LoginThrottle.objects.filter(pk=row.pk).update(
                failures=failures, last_seen=now, next_allowed=now + timedelta(seconds=delay_after(failures))
            )


def note_success(request: HttpRequest, username: str, now: datetime | None = None) -> None:
    """The user's own count is cleared and this address remembered as theirs; the address count stays."""
    now = now or timezone.now()
    user_key, _ = _keys(request, username)
    good = _good_key(request, username)
    LoginThrottle.objects.filter(key=user_key).delete()
    if not LoginThrottle.objects.filter(key=good).update(last_seen=now):
        try:
            with transaction.atomic():
                LoginThrottle.objects.create(key=good, last_seen=now)
        except IntegrityError:  # a concurrent login from the same place created it
            pass
    LoginThrottle.objects.filter(last_seen__lt=now - KNOWN_GOOD).delete()  # old rows, by the last_seen index


def _row_for_update(key: str, now: datetime) -> LoginThrottle:
    row = LoginThrottle.objects.select_for_update().filter(key=key).first()
    if row is not None:
        return row
    try:
        with transaction.atomic():
            return LoginThrottle.objects.create(key=key, failures=0, last_seen=now)
    except IntegrityError:  # another worker inserted it between our read and write
        return LoginThrottle.objects.select_for_update().get(key=key)


class ThrottledLoginView(LoginView):
    """Django's LoginView, answering 429 with ``Retry-After`` while the username or address must wait."""

    template_name = "registration/login.html"
    form_class = AuthenticationForm

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        username = request.POST.get("username", "")[:150]
        wait = retry_after(request, username)
        if wait:
            form = self.get_form()
            form.errors.clear()
            ctx = self.get_context_data(form=form, throttled=True, retry_after=wait)
            response = self.render_to_response(ctx, status=429)
            response["Retry-After"] = str(wait)
            return response
        response = super().post(request, *args, **kwargs)
        if response.status_code == 200:  # re-rendered form: the credentials were wrong
            note_failure(request, username)
        else:
            note_success(request, username)
        return response
