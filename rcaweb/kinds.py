"""The registry of entity kinds: every kind that has a page, and what the rest of rcaweb needs to know of it.

One entry per ``Entity.kind`` (docs/design.md §4, §6): its URL name and path, its page's view and template,
whether it lives in a namespace, the charts its page shows, how it is listed (the job list's filter that
selects its jobs, the involvedObject kind of its Kubernetes events) and how it is linked (its URL's arguments,
its link text). The model's choices, ``Entity.get_absolute_url``, ``queries.Ref``, the ``entity_link`` tag, the
entity pages, the chart endpoint, ``POST /api/v1/changes`` and the fleet snapshot read it instead of keeping
their own lists; ``tests/rcaweb/test_kinds.py`` checks it against ``web/inventory/urls.py`` and that every kind's
page, link and charts answer. How to add a kind: docs/design.md §6.

Pure data: it imports no model (``collectors.models`` imports it), only ``reverse`` when a URL is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

FleetRead = Literal["full", "hot", ""]


@dataclass(frozen=True)
class Chart:
    """One chart of an entity page: its name (``console:chart``'s last part, a ``chartdata`` builder) and the
    title the page shows above it (the figure carries its own, ``chartdata.TITLES``)."""

    name: str
    title: str


@dataclass(frozen=True)
class Kind:
    """One entity kind and its page."""

    name: str  # Entity.kind, and the page's URL name collectors:<name>
    segment: str  # the path segment of its pages: /c/<cluster>/<segment>/[<namespace>/]<name>/
    view: str  # the page's view, as web.inventory exports it
    template: str  # the page's template (its inline partial ``body`` is the htmx fragment)
    namespaced: bool = False  # jobs and pods live in a namespace; the rest are cluster-scoped
    charts: tuple[Chart, ...] = ()  # loaded lazily by the page (partials/entity_charts.html), in this order
    pages: tuple[str, ...] = ()  # other collectors:<name> pages of this kind (the job list, the why panel, logs)
    job_filter: str = ""  # the job list's query parameter that lists this object's jobs (?queue=train)
    event_kind: str = ""  # Kubernetes events' involvedObject.kind when its events are shown on pages
    external_changes: bool = True  # POST /api/v1/changes may name it as a target
    fleet_read: FleetRead = "full"  # incidents.snapshot: in full, by hot keys, or not at all
    healthy_phases: frozenset[str] = frozenset()  # phases the incident page shows as healthy (no pill colour)

    @property
    def url_name(self) -> str:
        return f"collectors:{self.name}"

    def url_args(self, cluster: str, namespace: str, name: str) -> list[str]:
        """The arguments of its page's URL (``reverse(url_name, args=…)``)."""
        return [cluster, namespace, name] if self.namespaced else [cluster, name]

    def url(self, cluster: str, namespace: str, name: str) -> str:
        """Its page's path, without the cursor (callers add it): what ``get_absolute_url`` returns."""
        from django.urls import reverse

        return reverse(self.url_name, args=self.url_args(cluster, namespace, name))

    def ident(self, namespace: str, name: str) -> str:
        """How a link and a chart URL name one object of this kind: ``namespace/name`` or ``name``."""
        return f"{namespace}/{name}" if self.namespaced and namespace else name

    def split_ident(self, ident: str) -> tuple[str, str]:
        """(namespace, name) of an :meth:`ident`."""
        if self.namespaced:
            namespace, _, name = ident.rpartition("/")
            return namespace, name
        return "", ident


_TELEMETRY_CHARTS = (
    Chart("utilization", "GPU utilization / SM activity"),
    Chart("memory", "GPU memory used"),
    Chart("power", "power"),
    Chart("temperature", "temperature"),
)
_POLICY_CHARTS = (Chart("allocation", "GPUs allocated vs quota"), Chart("queue_length", "queue length"))

# In the order of Entity.kind's choices (migrations record them so; a new kind goes last).
KINDS: tuple[Kind, ...] = (
    Kind(
        "project",
        "projects",
        "project_detail",
        "collectors/project_detail.html",
        charts=_POLICY_CHARTS,
        job_filter="project",
    ),
    Kind(
        "queue",
        "queues",
        "queue_detail",
        "collectors/queue_detail.html",
        charts=_POLICY_CHARTS,
        job_filter="queue",
    ),
    Kind(
        "job",
        "jobs",
        "job_detail",
        "collectors/job_detail.html",
        namespaced=True,
        charts=(
            Chart("utilization", "GPU utilization / SM activity of its GPUs"),
            Chart("memory", "GPU memory used"),
        ),
        pages=("jobs", "job_why"),
        event_kind="Job",
        fleet_read="hot",
        healthy_phases=frozenset({"Running", "Succeeded"}),
    ),
    Kind(
        "pod",
        "pods",
        "pod_detail",
        "collectors/pod_detail.html",
        namespaced=True,
        pages=("pod_logs",),
        event_kind="Pod",
        fleet_read="hot",
        healthy_phases=frozenset({"Running", "Succeeded"}),
    ),
    Kind(
        "node",
        "nodes",
        "node_detail",
        "collectors/node_detail.html",
        charts=_TELEMETRY_CHARTS,
        job_filter="node",
        event_kind="Node",
        healthy_phases=frozenset({"Ready"}),
    ),
    Kind(
        "gpu",
        "gpus",
        "gpu_detail",
        "collectors/gpu_detail.html",
        charts=_TELEMETRY_CHARTS,
        healthy_phases=frozenset({"ok"}),
    ),
    Kind(
        "department",
        "departments",
        "department_detail",
        "collectors/department_detail.html",
        external_changes=False,
        fleet_read="",  # few: the diagnosis input reads them as of t itself
    ),
)
BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}

# How objects are listed: the job list, filtered by the job_filter of the object's kind (?node=h100-01).
JOB_LIST = "collectors:jobs"

# The fleet page's charts (console:chart with kind "fleet"): not an entity kind, the same chart endpoint.
FLEET = "fleet"
FLEET_CHARTS: tuple[str, ...] = ("allocation", "utilization", "queue_length")


def get(name: str) -> Kind:
    """The kind called ``name`` (KeyError for one without a page)."""
    return BY_NAME[name]


def names() -> tuple[str, ...]:
    return tuple(BY_NAME)


def choices() -> list[tuple[str, str]]:
    """``Entity.kind``'s choices."""
    return [(k.name, k.name) for k in KINDS]


def namespaced() -> frozenset[str]:
    return frozenset(k.name for k in KINDS if k.namespaced)


def with_charts() -> Iterator[Kind]:
    return (k for k in KINDS if k.charts)


def url_for(kind: str, cluster: str, namespace: str, name: str) -> str:
    """The page of an object named by its kind, cluster, namespace and name (``Entity``, ``queries.Ref``)."""
    return BY_NAME[kind].url(cluster, namespace, name)


def link_text(kind: str, namespace: str, name: str) -> str:
    """What a link to an object reads: ``namespace/name`` for a namespaced kind, else the name."""
    k = BY_NAME.get(kind)
    return f"{namespace}/{name}" if namespace and k is not None and k.namespaced else name
