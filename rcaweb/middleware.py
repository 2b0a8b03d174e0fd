"""Cursor parsing, request ids, JSON errors under /api/, and security headers (login: Django's
``LoginRequiredMiddleware``, docs/decisions.md)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from http import HTTPStatus
from typing import cast

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils.cache import patch_cache_control

from rcaweb.cursor import Cursor, CursorError
from rcaweb.http import RcaRequest

# What a client's X-Request-Id may be before it is trusted into the audit log and the answer's headers:
# the shapes proxies and tracers send (UUIDs, hex, W3C trace ids, "abc-123.4"), nothing that can forge a log line.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,63}$")


class RequestIdMiddleware:
    """``request.request_id``: the client's ``X-Request-Id`` when it is a plain id, else a fresh one."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.headers.get("X-Request-Id", "")
        rid = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        cast(RcaRequest, request).request_id = rid  # this middleware is what makes it an RcaRequest
        response = self.get_response(request)
        response["X-Request-Id"] = rid
        return response


class TextInputMiddleware:
    """A NUL byte in the URL's path or in a query or form parameter is a 400 naming where, on every page and
    database.

    PostgreSQL refuses NUL in any text value, so a filter like ``?kind=%00`` or a path like
    ``/c/gpu-prod/nodes/%00/`` was a 500 there and a silent empty list or 404 on SQLite. Checked here, before
    any view, so no route can forget it. Lone surrogates cannot arrive here: Django decodes paths, query
    strings and forms as UTF-8 (with replacement characters, or left percent-encoded in a path).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or "\x00" in request.path_info:
            return _bad_request(request, "the URL path contains a NUL byte")
        sources = [("query", request.GET)]
        if not request.path.startswith(
            "/api/"
        ):  # the API reads its JSON body itself (web.incidents.api.read_json)
            sources.append(("form", request.POST))
        for where, params in sources:
            for key, values in params.lists():
                if "\x00" in key or any("\x00" in v for v in values):
                    msg = f"{where} parameter {key.replace(chr(0), '?')[:40]!r} contains a NUL byte"
                    return _bad_request(request, msg)
        return self.get_response(request)


def _bad_request(request: HttpRequest, msg: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"error": msg}, status=400)
    return HttpResponseBadRequest(msg + "\n", content_type="text/plain; charset=utf-8")


class CursorMiddleware:
    """Sets ``request.cursor``; a malformed ``t``/``w`` is a 400 naming the expected format."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            # this middleware is what makes it an RcaRequest
            cast(RcaRequest, request).cursor = Cursor.from_params(request.GET.get("t"), request.GET.get("w"))
        except CursorError as exc:
            if request.path.startswith("/api/"):
                return JsonResponse({"error": str(exc)}, status=400)
            return HttpResponseBadRequest(
                f"Bad time cursor: {exc}\n", content_type="text/plain; charset=utf-8"
            )
        return self.get_response(request)


class SecurityHeadersMiddleware:
    """CSP without inline scripts: data reaches JS only through json_script (docs/conventions.md §10–11); and
    ``Cache-Control: no-store`` on whatever answers a request that carries credentials.

    First in ``MIDDLEWARE``, so every answer passes it: a 400 from the cursor or NUL check, a CSRF 403, a 503
    of ``handler500`` (which answers for every middleware after this one). Who asks is read from the request's
    headers, never from ``request.user``: loading a user needs the database, and this must hold while the
    database is down.
    """

    CSP = (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'; "
        "form-action 'self'"
    )

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", self.CSP)
        # XFrameOptionsMiddleware's, for an answer made before it ran (a middleware's failure, answered by
        # handler500 where it happened)
        if not getattr(response, "xframe_options_exempt", False):
            response.setdefault("X-Frame-Options", settings.X_FRAME_OPTIONS)
        # Signed-in pages, API answers and whatever a token unlocks (/metrics, /readyz's details) hold incident
        # facts: no shared or browser cache keeps a copy. Nor of an answer that sets a cookie (a login). Static
        # files keep WhiteNoise's caching whoever asks: they are the same for everyone.
        static = request.path.startswith(settings.STATIC_URL or "/static/")
        if not static and (
            request.path.startswith("/api/")
            or "Authorization" in request.headers
            or settings.SESSION_COOKIE_NAME in request.COOKIES
            or settings.SESSION_COOKIE_NAME in response.cookies
        ):
            patch_cache_control(response, no_store=True, private=True)
        return response


class ApiErrorsMiddleware:
    """Under /api/ every error is JSON ``{"error": ...}``: a 404, a 405 or a CSRF 403 from Django included."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            request.path.startswith("/api/")
            and response.status_code >= 400
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            try:
                phrase = HTTPStatus(response.status_code).phrase.lower()
            except ValueError:
                phrase = "error"
            what = f"{phrase}: {request.method} {request.path[:200]}"
            json_response = JsonResponse({"error": what}, status=response.status_code)
            for header in ("Allow", "Retry-After", "WWW-Authenticate", "X-Request-Id"):
                if header in response:
                    json_response[header] = response[header]
            return json_response
        return response
