"""Every change in the window, across Kubernetes objects, scheduler policy/quota and external sources.

The signal first: what people and their pipelines changed — policy and quota (queues, projects), nodes
(cordon, taints, capacity), a job's spec (image, request, selector) and external changes (CI/CD, tickets) —
one row each. Who made a change decides (:func:`by_system`): what the kubelet, controllers, schedulers and
operators wrote, and a node's own conditions, is the cluster's. That churn (pods starting and ending, jobs'
status, GPU attribution, a recovering node's condition flips) is summed up per kind, field and source with a
count, first and last time; each of those rows opens its changes one by one (``show=all``).
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet

from collectors.mapping.core import JOB_SPEC_KEYS
from collectors.models import Change, EntityVersion
from rcaweb.cursor import Cursor

PAGE_SIZE = 100
CHURN_ROWS = 40
SIGNAL_KINDS = ("node", "queue", "project", "department")


# Writers that are the cluster itself: the kubelet, controllers, schedulers, operators and exporters (the
# managedFields manager or audit user of a change, collectors.mapping.writers.actor), not a person or a pipeline.
SYSTEM_ACTORS = (
    "kubelet",
    "kube-controller-manager",
    "kube-scheduler",
    "cloud-controller-manager",
    "node-problem-detector",
    "cluster-autoscaler",
    "kueue",
    "kai-scheduler",
    "dcgm-exporter",
)
SYSTEM_ACTOR_SUFFIXES = (
    "-controller",
    "-controller-manager",
    "-operator",
    "-scheduler",
    "-exporter",
    "-device-plugin",
)
# What a node reports about itself through its status (the kubelet's, whoever the source names as the last
# writer): a condition or readiness flip is the node recovering or failing, never a change made on purpose.
NODE_STATUS_FIELDS = ("ready", "ready_reason", "conditions")


def by_system() -> Q:
    """Changes the cluster made by itself: written by a system actor (:data:`SYSTEM_ACTORS`, ``system:…``
    users, controllers and operators by name), or a node's own status."""
    q = Q(actor__in=SYSTEM_ACTORS) | Q(actor__startswith="system:")
    for suffix in SYSTEM_ACTOR_SUFFIXES:
        q |= Q(actor__endswith=suffix)
    for key in NODE_STATUS_FIELDS:
        q |= Q(kind="node") & (Q(field=key) | Q(field__startswith=f"{key}."))
    return q


def signal() -> Q:
    """Changes people and pipelines made: to policy, quota, nodes or a job's spec, by anyone but the cluster
    itself (:func:`by_system`), and external changes."""
    spec = Q()
    for key in sorted(JOB_SPEC_KEYS):
        spec |= Q(field=key) | Q(field__startswith=f"{key}.")
    return Q(source="external") | ((Q(kind__in=SIGNAL_KINDS) | (Q(kind="job") & spec)) & ~by_system())


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
    if filters.get("field"):
        qs = qs.filter(Q(field=filters["field"]) | Q(field__startswith=f"{filters['field']}."))
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


def signal_first(qs: QuerySet[Change], show_all: bool) -> tuple[QuerySet[Change], list[dict[str, Any]]]:
    """(the changes listed one by one, the churn summary): the signal and churn grouped, or (show_all)
    every change and no summary."""
    if show_all:
        return qs, []
    churn = (
        qs.exclude(signal())
        .order_by()
        .values("kind", "field", "source")
        .annotate(n=Count("id"), first=Min("time"), last=Max("time"), actors=Count("actor", distinct=True))
        .order_by("-n", "kind", "field")[:CHURN_ROWS]
    )
    return qs.filter(signal()), [dict(row) for row in churn]
