from __future__ import annotations

from django.http import HttpRequest


def cursor(request: HttpRequest) -> dict:
    return {"cursor": getattr(request, "cursor", None)}
