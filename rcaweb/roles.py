"""Roles: viewer (read), responder (change incident status, write handoffs), admin (audit log, admin site).

Roles are Django groups named ``viewer`` and ``responder``; staff/superusers are admins and
may do everything a responder may. A user in no group can read (viewer is the floor).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseForbidden

RESPONDER = "responder"
VIEWER = "viewer"


def is_admin(user: Any) -> bool:
    return bool(user and user.is_authenticated and (user.is_superuser or user.is_staff))


def can_respond(user: Any) -> bool:
    if not (user and user.is_authenticated):
        return False
    return is_admin(user) or user.groups.filter(name=RESPONDER).exists()


def admin_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_admin(request.user):
            return HttpResponseForbidden("This page is for admins.\n")
        return view(request, *args, **kwargs)

    return wrapper
