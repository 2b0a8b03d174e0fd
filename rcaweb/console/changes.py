"""Every change in the window, across Kubernetes objects, scheduler policy/quota and external sources."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet

from collectors.models import Change, EntityVersion
from rcaweb.cursor import Cursor

PAGE_SIZE = 100


def changes(cursor: Cursor, filters: dict[str, Any]) -> QuerySet[Change]:
    """Changes with time in [t-w, t], newest first, narrowed by the validated ChangeFilterForm data."""
    qs = Change.objects.filter(time__gte=cursor.start, time__lte=cursor.t)
    if filters.get("cluster") is not None:
        qs = qs.filter(cluster=filters["cluster"])
    kind = filters.get("kind")
    if kind == "external":
        qs = qs.filter(source="external")
    elif kind:
        qs = qs.filter(kind=kind)
    if filters.get("source"):
        qs = qs.filter(source=filters["source"])
    if filters.get("actor"):
        qs = qs.filter(actor__icontains=filters["actor"])
    if filters.get("project"):
        p = filters["project"]
        # A project's changes: its project/queue objects, and every object that belonged to it at some time.
        belongs = EntityVersion.objects.filter(entity=OuterRef("entity"), project=p)
        qs = qs.filter(Q(entity__kind__in=["project", "queue"], entity__name=p) | Q(Exists(belongs)))
    if filters.get("node"):
        n = filters["node"]
        on_node = EntityVersion.objects.filter(entity=OuterRef("entity"), node=n)
        qs = qs.filter(Q(entity__kind="node", entity__name=n) | Q(Exists(on_node)))
    return qs.select_related("entity", "entity__cluster", "cluster").order_by("-time", "-id")


def page_of(qs: QuerySet[Change], number: int | None) -> Page:
    """A bounded page (PAGE_SIZE rows); a page number past the end gives the last page."""
    return Paginator(qs, PAGE_SIZE).get_page(number or 1)
