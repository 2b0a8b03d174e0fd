from __future__ import annotations

from django.http import HttpRequest

from rcaweb.roles import can_respond, is_admin


def cursor(request: HttpRequest) -> dict:
    """``cursor`` on every page, and the role flags templates use to hide write buttons."""
    user = getattr(request, "user", None)
    return {
        "cursor": getattr(request, "cursor", None),
        # Callables: the template calls them only where a page asks (no query on pages that don't).
        "can_respond": (lambda: can_respond(user)) if user is not None else False,
        "is_admin": (lambda: is_admin(user)) if user is not None else False,
    }
