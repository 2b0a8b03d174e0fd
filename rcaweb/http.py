"""Request type for mypy: what middleware adds to every request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_htmx.middleware import HtmxDetails

    from rcaweb.cursor import Cursor


class RcaRequest(HttpRequest):
    user: User
    htmx: HtmxDetails
    cursor: Cursor
    request_id: str
