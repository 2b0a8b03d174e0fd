"""The JSON API (docs/conventions.md §17): plain views behind ``@bearer_token``, ``{"error": ...}`` on 400/401/413.

This module holds what every API view shares: the token check and the reading of a JSON body. The views:

- ``POST /api/v1/alerts/alertmanager`` and ``POST /api/v1/changes``: the webhooks (web/incidents/webhooks.py).
- ``GET /api/v1/incidents/<id>``: the incident page's facts as JSON (web/incidents/incident_facts.py).
"""

from __future__ import annotations

import hmac
import json
import logging
import math
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from incidents.intake import PayloadError

logger = logging.getLogger(__name__)


def error(message: str, status: int) -> JsonResponse:
    resp = JsonResponse({"error": message}, status=status)
    if status == 401:
        resp["WWW-Authenticate"] = 'Bearer realm="rcaweb"'
    return resp


def token_ok(header: str, tokens: list[str] | None = None) -> bool:
    """``Bearer <token>`` (Alertmanager's ``http_config.authorization``), or Basic with the token as password.

    Every configured token is compared, in constant time, so timing says nothing about which one matched.
    """
    scheme, _, value = (header or "").strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "basic":
        import base64
        import binascii

        try:
            value = base64.b64decode(value, validate=True).decode("utf-8").partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return False
    elif scheme.lower() != "bearer":
        return False
    if not value:
        return False
    matched = False
    for token in settings.WEBHOOK_TOKENS if tokens is None else tokens:
        matched |= hmac.compare_digest(value.encode(), token.encode())
    return matched


def bearer_token(
    view: Callable[..., HttpResponse] | None = None, *, allow_session: bool = False, scope: str = "ingest"
) -> Any:
    """401 unless the request carries a valid token of ``scope`` (or, with ``allow_session``, a logged-in user).

    Scopes: ``ingest`` (alerts and changes: ``RCAWEB_WEBHOOK_TOKEN``) and ``read`` (the incident JSON:
    ``RCAWEB_API_TOKEN``). A token of one scope is wrong for the other.
    """
    setting, env = {
        "ingest": ("WEBHOOK_TOKENS", "RCAWEB_WEBHOOK_TOKEN"),
        "read": ("API_TOKENS", "RCAWEB_API_TOKEN"),
    }[scope]

    def decorate(fn: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(fn)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            session_ok = allow_session and request.user.is_authenticated
            tokens = getattr(settings, setting)
            if not session_ok and not token_ok(request.headers.get("Authorization", ""), tokens):
                what = "missing" if not request.headers.get("Authorization") else "wrong"
                return error(f"authorization {what}: send 'Authorization: Bearer <{env}>'", 401)
            return fn(request, *args, **kwargs)

        # the token is the authentication (a session is enough only with allow_session, checked above)
        return login_not_required(csrf_exempt(wrapper))

    return decorate(view) if view is not None else decorate


class _NotFinite:
    """A number no float holds, kept as its text while the body is parsed so that the check after the parse can
    name its field: ``NaN``, ``Infinity`` and ``-Infinity`` (Python's json reads them; JSON and PostgreSQL's
    jsonb, where an alert's unknown keys are kept, do not), and a number that overflows a float (``1e400``,
    which Python reads as infinity, stored as "Infinity" or refused by the database)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def error(self, path: str) -> PayloadError:
        if self.text in ("NaN", "Infinity", "-Infinity"):
            return PayloadError(path, f"{self.text} is not a JSON number")
        return PayloadError(path, f"{self.text[:40]} is out of range: a number must fit a 64-bit float")


def _first_not_finite(value: Any) -> PayloadError | None:
    """The error naming the first :class:`_NotFinite` of a parsed body, by field path (``alerts[0].x``), if any.

    Iterative: a body nested as deep as the parser allows must not overflow the stack here either.
    """
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _NotFinite):
            return item.error(path)
        if isinstance(item, dict):
            stack.extend((f"{path}.{k[:40]}" if path else k[:40], v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return None


def read_json(request: HttpRequest) -> Any:
    """The body as JSON; raises PayloadError with 413 (over DATA_UPLOAD_MAX_MEMORY_SIZE) or 400."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        body = request.body
    except RequestDataTooBig:
        raise PayloadError("", f"body larger than {limit} bytes", status=413)
    if limit and len(body) > limit:  # chunked bodies carry no Content-Length
        raise PayloadError("", f"body larger than {limit} bytes", status=413)
    # Content-Type is not checked: Alertmanager sends application/json, but curl tests often do not.
    found: list[_NotFinite] = []

    def not_finite(text: str) -> _NotFinite:
        found.append(_NotFinite(text))
        return found[-1]

    def number(text: str) -> float | _NotFinite:
        value = float(text)
        return value if math.isfinite(value) else not_finite(text)

    try:
        payload = json.loads(body, parse_constant=not_finite, parse_float=number)
    except RecursionError:
        raise PayloadError("", "JSON nested too deeply")
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError("", f"body is not JSON: {exc}")
    if found:  # only then is the body walked: an ordinary notification pays nothing
        raise _first_not_finite(payload) or found[0].error("")
    return payload
