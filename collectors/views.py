"""Entity pages: every project, queue, job, pod, node and GPU, rendered as of the cursor.

(Foundation version: one generic renderer; the per-kind pages grow their own panels.)
"""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from collectors import inventory
from collectors.models import Cluster, Entity
from rcaweb.http import RcaRequest


def _get_entity(cluster: str, kind: str, name: str, namespace: str = "") -> Entity:
    """The entity, or 404. Entities that existed at any time resolve (the page says when)."""
    c = get_object_or_404(Cluster, name=cluster)
    try:
        return Entity.objects.select_related("cluster").get(cluster=c, kind=kind, namespace=namespace, name=name)
    except Entity.DoesNotExist:
        raise Http404(f"No {kind} {namespace + '/' if namespace else ''}{name} in cluster {cluster}")


def _render_entity(request: RcaRequest, entity: Entity) -> HttpResponse:
    t = request.cursor.t
    version = inventory.version_of(entity, t)
    first, last, still_open = inventory.lifespan(entity)
    changes = list(inventory.changes_in_window([entity], request.cursor.start, t))
    ctx = {"entity": entity, "version": version, "first": first, "last": last, "still_open": still_open, "changes": changes}
    return render(request, "collectors/entity_detail.html", ctx)


@require_GET
def project_detail(request: RcaRequest, cluster: str, name: str) -> HttpResponse:
    return _render_entity(request, _get_entity(cluster, "project", name))


@require_GET
def queue_detail(request: RcaRequest, cluster: str, name: str) -> HttpResponse:
    return _render_entity(request, _get_entity(cluster, "queue", name))


@require_GET
def job_list(request: RcaRequest, cluster: str) -> HttpResponse:
    c = get_object_or_404(Cluster, name=cluster)
    versions = inventory.as_of(c, "job", request.cursor.t).order_by("entity__namespace", "entity__name")[:500]
    return render(request, "collectors/job_list.html", {"cluster": c, "versions": versions})


@require_GET
def job_detail(request: RcaRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    return _render_entity(request, _get_entity(cluster, "job", name, namespace))


@require_GET
def pod_detail(request: RcaRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    return _render_entity(request, _get_entity(cluster, "pod", name, namespace))


@require_GET
def node_detail(request: RcaRequest, cluster: str, name: str) -> HttpResponse:
    return _render_entity(request, _get_entity(cluster, "node", name))


@require_GET
def gpu_detail(request: RcaRequest, cluster: str, name: str) -> HttpResponse:
    return _render_entity(request, _get_entity(cluster, "gpu", name))
