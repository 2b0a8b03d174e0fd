"""What a sweep is of: a configured cluster, at a moment (an aware UTC datetime, to the second)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from collectors.models import Cluster


def resolve(cluster_name: str, at: datetime | None) -> tuple[Cluster, datetime]:
    try:
        cluster = Cluster.objects.get(name=cluster_name)
    except Cluster.DoesNotExist:
        known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
        raise ValueError(f"unknown cluster {cluster_name!r} (configured: {known})")
    at = at or timezone.now()
    if timezone.is_naive(at):
        raise ValueError(f"at={at!r} is naive: pass an aware UTC datetime")
    return cluster, at.replace(microsecond=0)
