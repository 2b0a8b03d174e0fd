"""The audit trail for what humans edit, and what rcaweb changes by itself (docs/conventions.md §12): written explicitly, never by signals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import models
from django.utils import timezone

from incidents.models import AuditEntry


def record(
    *,
    user: Any,
    action: str,
    target: models.Model,
    before: dict | None,
    after: dict | None,
    request_id: str = "",
    time: datetime | None = None,
) -> AuditEntry:
    """Write one AuditEntry (who, what, when, before/after). Call inside the service's transaction.

    ``time`` defaults to now; rcaweb's own transitions (incidents.lifecycle) pass the clock they ran at, which
    in a fast-forwarded scenario is the simulated time, so the history reads on the same clock as the alerts.
    """
    is_user = user is not None and getattr(user, "is_authenticated", False)
    return AuditEntry.objects.create(
        time=time or timezone.now(),
        user=user if is_user else None,
        user_name=user.get_username() if is_user else str(user or "system"),
        request_id=request_id,
        action=action,
        target_type=target._meta.model_name or target.__class__.__name__.lower(),
        target_id=target.pk,
        object_repr=str(target)[:300],
        before=before,
        after=after,
    )
