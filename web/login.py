"""The sign-in page: Django's login form under the login policy of ``rcaweb.throttle``.

A 429 with ``Retry-After`` when the policy held the attempt back (the password was not checked), and on
success the browser is remembered as one its user signed in on, so others' guesses do not hold them back.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse

from rcaweb.throttle import (
    COOKIE,
    COOKIE_SALT,
    COOKIE_USERS,
    KNOWN_GOOD,
    known_on_browser,
    throttled_for,
    user_hash,
)


def remember_browser(request: HttpRequest, response: HttpResponse, username: str) -> None:
    """Mark this browser as one ``username`` signed in on, so others' guesses do not hold them back here."""
    user = user_hash(username)
    known = [user, *(h for h in known_on_browser(request) if h != user)][:COOKIE_USERS]
    response.set_signed_cookie(
        COOKIE,
        ",".join(known),
        salt=COOKIE_SALT,
        max_age=int(KNOWN_GOOD.total_seconds()),
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


class ThrottledLoginView(LoginView):
    """Django's LoginView: a 429 with ``Retry-After`` when the policy held the attempt back, and the
    browser remembered on success."""

    template_name = "registration/login.html"
    form_class = AuthenticationForm

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        wait = throttled_for(self.request)
        if not wait:
            return super().form_invalid(form)
        form.errors.clear()  # "didn't match" would be wrong: the password was not checked
        ctx = self.get_context_data(form=form, throttled=True, retry_after=wait)
        response = self.render_to_response(ctx, status=429)
        response["Retry-After"] = str(wait)
        return response

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_valid(form)
        remember_browser(self.request, response, form.get_user().get_username())
        return response
