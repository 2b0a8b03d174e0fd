"""Login throttling: after N failed logins for a username (or from an address) within a window, refuse for a while."""

from __future__ import annotations

import hashlib

from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

MAX_FAILURES = 5
WINDOW_S = 15 * 60


def _keys(request: HttpRequest, username: str) -> list[str]:
    ip = request.META.get("REMOTE_ADDR", "")
    user_key = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [f"login-fail:user:{user_key}", f"login-fail:ip:{ip}"]


def is_throttled(request: HttpRequest, username: str) -> bool:
    return any((cache.get(k) or 0) >= MAX_FAILURES for k in _keys(request, username))


def note_failure(request: HttpRequest, username: str) -> None:
    for k in _keys(request, username):
        cache.add(k, 0, WINDOW_S)
        try:
            cache.incr(k)
        except ValueError:
            cache.set(k, 1, WINDOW_S)


def clear(request: HttpRequest, username: str) -> None:
    cache.delete_many(_keys(request, username))


class ThrottledLoginView(LoginView):
    """Django's LoginView, answering 429 once a username or address failed too often."""

    template_name = "registration/login.html"
    form_class = AuthenticationForm

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        username = request.POST.get("username", "")[:150]
        if is_throttled(request, username):
            form = self.get_form()
            form.errors.clear()
            ctx = self.get_context_data(form=form, throttled=True)
            return self.render_to_response(ctx, status=429)
        response = super().post(request, *args, **kwargs)
        if response.status_code == 200:  # re-rendered form: the credentials were wrong
            note_failure(request, username)
        else:
            clear(request, username)
        return response
