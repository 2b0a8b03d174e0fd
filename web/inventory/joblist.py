"""The job list: jobs as of t, filtered by queue, project, namespace, node and phase (docs/conventions.md §6)."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.validators import RegexValidator
from django.db.models import Exists, OuterRef
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors import queries
from collectors.models import Cluster, EntityVersion
from incidents import waiting_order
from rcaweb.http import RcaRequest
from web.inventory.entity_page import render_page
from web.inventory.rows import JobRow

logger = logging.getLogger(__name__)

JOB_PHASES = ["Pending", "Running", "Succeeded", "Failed", "Suspended"]
LIST_LIMIT = 500  # rows per page
MAX_PAGE = 100_000

k8s_name = RegexValidator(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
    "must be a Kubernetes object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
)


class JobFilterForm(forms.Form):
    """Filters of the job list, named after the hot columns (docs/conventions.md §6); invalid values are a 400."""

    queue = forms.CharField(required=False, max_length=253, validators=[k8s_name])
    project = forms.CharField(required=False, max_length=253, validators=[k8s_name])
    namespace = forms.CharField(required=False, max_length=63, validators=[k8s_name])
    node = forms.CharField(required=False, max_length=253, validators=[k8s_name])
    phase = forms.ChoiceField(required=False, choices=[("", "any")] + [(p, p) for p in JOB_PHASES])
    page = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)

    def active(self) -> dict[str, str]:
        """The filters in use (the page is not a filter)."""
        return {k: v for k, v in self.cleaned_data.items() if v and k != "page"}


def page_links(request: RcaRequest, cluster: Cluster, filters: dict[str, str], page: int, pages: int) -> dict:
    """first/prev/next/last URLs of the list (its filters, the page, the cursor's t/w; "" where none)."""
    base = reverse("collectors:jobs", args=[cluster.name])

    def url(n: int) -> str:
        return request.cursor.link(f"{base}?{urlencode({**filters, 'page': n})}")

    return {
        "first_url": url(1) if page > 1 else "",
        "prev_url": url(page - 1) if page > 1 else "",
        "next_url": url(page + 1) if page < pages else "",
        "last_url": url(pages) if page < pages else "",
    }


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
    pages = max(1, -(-total // LIST_LIMIT))
    # Past the last page (the list shrank as the cursor moved): the last page, said so above the table.
    page = min(form.cleaned_data.get("page") or 1, pages)
    start = (page - 1) * LIST_LIMIT
    if f.get("phase") == "Pending" and total <= 5 * LIST_LIMIT:
        # waiting jobs in the scheduling model's order (the positions the job pages and incidents give them)
        ordered, ordered_by = waiting_order.in_model_order(c, t, qs)
        versions = ordered[start : start + LIST_LIMIT]
    else:
        versions = list(
            qs.order_by("entity__namespace", "entity__name", "entity_id")[start : start + LIST_LIMIT]
        )
        ordered_by = "namespace and name"
    rows = []
    for i, v in enumerate(versions, start=start + 1):
        v.entity.cluster = c
        rows.append(
            JobRow(
                v,
                position=i,
                queue_ref=queries.ref(c, "queue", v.queue),
                project_ref=queries.ref(c, "project", v.project),
            )
        )
    ctx.update(
        versions=rows,
        total=total,
        filters=f,
        ordered_by=ordered_by,
        limited=total > len(versions),
        page=page,
        pages=pages,
        page_asked=form.cleaned_data.get("page") or 1,
        first_row=start + 1,
        last_row=start + len(versions),
        **page_links(request, c, f, page, pages),
    )
    return render_page(request, "collectors/job_list.html", ctx)
