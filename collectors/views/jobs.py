"""Job page (pods, request history, scheduling condition, why pending) and the filtered job list."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django import forms
from django.core.validators import RegexValidator
from django.db.models import Exists, OuterRef
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.template import TemplateDoesNotExist
from django.template.loader import get_template
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors import queries
from collectors.models import Cluster, Entity, EntityVersion
from collectors.views.common import entity_context, entity_or_404, finish, render_page
from rcaweb.http import RcaRequest

logger = logging.getLogger(__name__)

JOB_PHASES = ["Pending", "Running", "Succeeded", "Failed", "Suspended"]
REQUEST_FIELDS = ("gpus_per_pod", "pods", "gpus_total", "created")
WHY_PENDING_TEMPLATE = "incidents/_why_pending.html"
NO_WHY_PHASES = ("Running", "Succeeded")
LIST_LIMIT = 500

k8s_name = RegexValidator(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
    "must be a Kubernetes object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
)


def why_pending(entity: Entity, t: datetime) -> tuple[Any, str]:
    """The diagnosis helper's explanation of this job at t, and the template to show it; (None, "") when absent.

    The diagnosis package is optional at this layer: pages must render without it.
    """
    try:
        from incidents.diagnosis.explain import explain_job_at  # type: ignore[import-not-found]
    except ImportError:
        return None, ""
    try:
        get_template(WHY_PENDING_TEMPLATE)
    except TemplateDoesNotExist:
        logger.warning("incidents.diagnosis.explain exists but %s does not", WHY_PENDING_TEMPLATE)
        return None, ""
    try:
        return explain_job_at(entity, t), WHY_PENDING_TEMPLATE
    except Exception:  # a failing diagnosis must not take the job page down during an outage
        logger.exception("explain_job_at failed for %s at %s", entity, t)
        return {"error": "The diagnosis failed for this job; see the server log."}, ""


@require_GET
@vary_on_headers("HX-Request")
def job_detail(request: RcaRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    job = entity_or_404(cluster, "job", name, namespace)
    ctx = entity_context(request, job)
    c, t, version, state = job.cluster, ctx["t"], ctx["version"], ctx["state"]
    pods = queries.pods_of_job(c, namespace, name, t)
    nodes = sorted({p.node for p in pods if p.node})
    queue_name = version.queue if version else ""
    position = None
    if version is not None and version.phase == "Pending" and queue_name:
        waiting = queries.queue_order(queries.jobs_where(c, t, queue=queue_name, phase="Pending"))
        ids = [w.entity_id for w in waiting]
        position = (ids.index(job.pk) + 1, len(ids)) if job.pk in ids else None
    for p in pods:
        p.node_ref = queries.ref(c, "node", p.node)
    # The diagnosis explains jobs that wait or failed; a running or finished job needs no "why".
    explain = version is not None and version.phase not in NO_WHY_PHASES
    explanation, explanation_template = why_pending(job, t) if explain else (None, "")
    ctx.update(
        pods=pods,
        pods_running=sum(1 for p in pods if p.phase == "Running"),
        node_refs=[queries.ref(c, "node", n) for n in nodes],
        queue_ref=queries.ref(c, "queue", queue_name),
        project_ref=queries.ref(c, "project", version.project if version else ""),
        scheduling=state.get("scheduling") or {},
        queue_position=position,
        request_history=queries.field_history(job, REQUEST_FIELDS),
        events=queries.events_near(
            c,
            [("Job", namespace, name)] + [("Pod", namespace, p.entity.name) for p in pods],
            t,
            request.cursor.window,
        ),
        why_pending=explanation,
        why_pending_template=explanation_template,
    )
    related = queries.related_q(c, [job.pk] + [p.entity_id for p in pods], [("queue", "", queue_name)])
    return render_page(request, "collectors/job_detail.html", finish(request, ctx, related))


class JobFilterForm(forms.Form):
    """Filters of the job list, named after the hot columns (CONVENTIONS 6); invalid values are a 400."""

    queue = forms.CharField(required=False, max_length=253, validators=[k8s_name])
    project = forms.CharField(required=False, max_length=253, validators=[k8s_name])
    namespace = forms.CharField(required=False, max_length=63, validators=[k8s_name])
    node = forms.CharField(required=False, max_length=253, validators=[k8s_name])
    phase = forms.ChoiceField(required=False, choices=[("", "any")] + [(p, p) for p in JOB_PHASES])

    def active(self) -> dict[str, str]:
        return {k: v for k, v in self.cleaned_data.items() if v}


@require_GET
@vary_on_headers("HX-Request")
def job_list(request: RcaRequest, cluster: str) -> HttpResponse:
    c = get_object_or_404(Cluster, name=cluster)
    t = request.cursor.t
    form = JobFilterForm(request.GET)
    ctx: dict[str, Any] = {"cluster": c, "form": form, "t": t, "phases": JOB_PHASES}
    if not form.is_valid():
        ctx.update(versions=[], total=0, bad_filter=True)
        return render_page(request, "collectors/job_list.html", ctx, status=400)
    f = form.active()
    qs = EntityVersion.objects.as_of(t).filter(cluster=c, kind="job", deleted=False).select_related("entity")
    for key in ("queue", "project", "namespace", "phase"):
        if key in f:
            qs = qs.filter(**{key: f[key]})
    if "node" in f:
        pods_there = EntityVersion.objects.as_of(t).filter(
            cluster=c,
            kind="pod",
            node=f["node"],
            namespace=OuterRef("namespace"),
            job=OuterRef("entity__name"),
        )
        qs = qs.filter(Exists(pods_there))
    total = qs.count()
    if f.get("phase") == "Pending" and total <= 5 * LIST_LIMIT:
        versions = queries.queue_order(qs)[:LIST_LIMIT]  # waiting jobs read in scheduling order
        ordered_by = "priority, then submission time"
    else:
        versions = list(qs.order_by("entity__namespace", "entity__name")[:LIST_LIMIT])
        ordered_by = "namespace and name"
    for v in versions:
        v.entity.cluster = c
        v.queue_ref = queries.ref(c, "queue", v.queue)
        v.project_ref = queries.ref(c, "project", v.project)
    ctx.update(
        versions=versions, total=total, filters=f, ordered_by=ordered_by, limited=total > len(versions)
    )
    return render_page(request, "collectors/job_list.html", ctx)
