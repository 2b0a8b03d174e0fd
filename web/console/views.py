"""Console pages: home ``/``, ``/fleet/``, ``/slo/``, ``/changes/``, and the chart fragments.

Each page is one typed view; ``?cluster=`` and other filters go through one Form per page
(invalid -> 400). An htmx request aimed at a panel (HX-Target other than ``page``) gets the
page's inline partial; the cursor bar's swaps target ``#page`` and get the whole page.
"""

from __future__ import annotations

import logging
import zlib
from datetime import timedelta
from urllib.parse import urlencode

from django import forms
from django.http import HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors.models import Cluster
from rcaweb.cursor import Cursor
from rcaweb.durations import format_duration, format_minutes
from rcaweb.http import RcaRequest
from web.console import changes as changes_q
from web.console import chartdata, charts, fleet, heatmap, home, slo
from web.console.forms import SLO_METRICS, ChangeFilterForm, ScopeForm, SloForm, SloJobsForm
from web.console.gpu_activity import ACTIVE_SM, WELL_USED_SM

logger = logging.getLogger(__name__)


def wants_fragment(request: RcaRequest) -> bool:
    """An htmx request for a panel, not the cursor bar's whole-page swap (which targets #page)."""
    return bool(request.htmx) and request.htmx.target != "page"


def bad_filter(form: forms.Form) -> HttpResponse:
    errors = "; ".join(f"{name}: {' '.join(str(e) for e in errs)}" for name, errs in form.errors.items())
    return HttpResponseBadRequest(f"Bad filter: {errors}\n", content_type="text/plain; charset=utf-8")


@require_GET
@vary_on_headers("HX-Request", "HX-Target")
def home_view(request: RcaRequest) -> HttpResponse:
    ctx = home.home_context(request.cursor)
    template = "console/home.html"
    if wants_fragment(request):
        template += "#panels"
    return render(request, template, ctx)


@require_GET
@vary_on_headers("HX-Request", "HX-Target")
def fleet_view(request: RcaRequest) -> HttpResponse:
    form = ScopeForm(request.GET)
    if not form.is_valid():
        return bad_filter(form)
    cluster = form.cleaned_data["cluster"]
    clusters = list(Cluster.objects.order_by("name"))
    ctx = {
        "form": form,
        "cluster": cluster,
        "clusters": clusters,
        "chart_clusters": [cluster] if cluster else clusters[:4],
        "fleet": heatmap.with_cell_html(fleet.compute(request.cursor, cluster), request.cursor),
        "active_sm": ACTIVE_SM,
        "well_sm": WELL_USED_SM,
        "fleet_charts": [(n, chartdata.TITLES[n]) for n in chartdata.CHARTS_BY_KIND["fleet"]],
    }
    template = "console/fleet.html"
    if wants_fragment(request):
        template += "#fleet-body"
    return render(request, template, ctx)


@require_GET
@vary_on_headers("HX-Request", "HX-Target")
def slo_view(request: RcaRequest) -> HttpResponse:
    form = SloForm(request.GET)
    if not form.is_valid():
        return bad_filter(form)
    cluster = form.cleaned_data["cluster"]
    target = form.cleaned_data["target"] or slo.DEFAULT_TARGET
    result = slo.compute(request.cursor, cluster, target)
    target_label = format_duration(target)
    ctx = {
        "form": form,
        "cluster": cluster,
        "clusters": list(Cluster.objects.order_by("name")),
        "slo": result,
        "target_label": target_label,
        "hist_fig": charts.histogram_figure(
            [(lab, c) for lab, c, _s in result.histogram], target_label=target_label
        ),
        "by_tables": [("project", result.by_project, "project"), ("queue", result.by_queue, "queue")],
        "reason_rows": [
            (
                p,
                sorted(result.diag_codes.get(p, {}).items()),
                sorted(result.sched_reasons.get(p, {}).items()),
                sorted(result.diag_faults.get(p, {}).items()),
            )
            for p in sorted(set(result.sched_reasons) | set(result.diag_codes) | set(result.diag_faults))
        ],
        "rp_rows": [
            (p, result.restarts.get(p, 0), result.preemptions.get(p, 0))
            for p in sorted(set(result.restarts) | set(result.preemptions))
        ],
        "link_tail": _filter_qs(cluster, form.cleaned_data["target"], request.cursor),
    }
    template = "console/slo.html"
    if wants_fragment(request):
        template += "#slo-body"
    return render(request, template, ctx)


@require_GET
def slo_jobs_view(request: RcaRequest) -> HttpResponse:
    """The jobs (or pods, hypotheses) behind one number of the SLO page."""
    form = SloJobsForm(request.GET)
    if not form.is_valid():
        return bad_filter(form)
    d = form.cleaned_data
    target = d["target"] or slo.DEFAULT_TARGET
    result = slo.compute(request.cursor, d["cluster"], target)
    project, queue, reason, metric = d["project"], d["queue"], d["reason"], d["metric"]
    ctx = {
        "form": form,
        "metric": metric,
        "metric_label": dict(SLO_METRICS)[metric],
        "project": project,
        "queue": queue,
        "reason": reason,
        "target_label": format_duration(target),
        "cluster": d["cluster"],
        "link_tail": _filter_qs(d["cluster"], d["target"], request.cursor),
    }
    if metric in ("wait", "over"):
        jobs = [
            j
            for j in result.jobs
            if (not project or j.project == project) and (not queue or j.queue == queue)
        ]
        if metric == "over":
            jobs = [j for j in jobs if j.wait_s > target.total_seconds()]
        ctx["waits"] = [(j, format_minutes(j.wait_s)) for j in sorted(jobs, key=lambda j: -j.wait_s)]
    elif metric == "waiting":
        ctx["still"] = [
            (v, format_minutes(w))
            for v, w in result.still_waiting
            if (not project or v.project == project) and (not queue or v.queue == queue)
        ]
    elif metric == "reason":
        ctx["reason_jobs"] = result.sched_reason_jobs.get((project or "—", reason), [])
    elif metric == "code":
        ctx["hypotheses"] = result.diag_hypotheses.get((project or "—", reason), [])
    elif metric == "restarts":
        ctx["restart_pods"] = result.restart_pods.get(project or "—", [])
    else:
        ctx["preempted"] = result.preempted_pods.get(project or "—", [])
    return render(request, "console/slo_jobs.html", ctx)


def _filter_qs(cluster: Cluster | None, target: timedelta | None, cursor: Cursor) -> str:
    """``&cluster=…&target=…&t=…&w=…``: appended to the SLO drill-down links (filters plus the cursor)."""
    params: dict[str, str] = {}
    if cluster is not None:
        params["cluster"] = cluster.name
    if target is not None:
        params["target"] = format_duration(target)
    params.update(cursor.params())
    return ("&" + urlencode(params)) if params else ""


def _churn_links(request: RcaRequest, params: QueryDict, churn: list[dict]) -> None:
    """Each churn group's link: its changes one by one (show=all, the group's kind, field and source)."""
    for row in churn:
        q = params.copy()
        q.pop("page", None)
        for k in ("show", "kind", "field", "source"):
            q[k] = "all" if k == "show" else row[k] or ""
        row["url"] = request.cursor.link(f"{request.path}?{q.urlencode()}")


@require_GET
@vary_on_headers("HX-Request", "HX-Target")
def changes_view(request: RcaRequest) -> HttpResponse:
    form = ChangeFilterForm(request.GET)
    if not form.is_valid():
        return bad_filter(form)
    d = form.cleaned_data
    # every change one by one when asked, or when the filters name what to see (a kind, a field)
    show_all = d.get("show") == "all" or bool(d.get("kind") or d.get("field"))
    listed, churn = changes_q.signal_first(changes_q.changes(request.cursor, d), show_all)
    page = changes_q.page_of(listed, form.cleaned_data["page"])
    _churn_links(request, request.GET, churn)
    params = request.GET.copy()
    params.pop("page", None)
    base = f"{request.path}?{params.urlencode()}"
    ctx = {
        "form": form,
        "page": page,
        "filter_qs": params.urlencode(),
        "churn": churn,
        "show_all": show_all,
        "page_size": changes_q.PAGE_SIZE,
        "prev_url": request.cursor.link(f"{base}&page={page.previous_page_number()}")
        if page.has_previous()
        else "",
        "next_url": request.cursor.link(f"{base}&page={page.next_page_number()}") if page.has_next() else "",
    }
    template = "console/changes.html"
    if wants_fragment(request):
        template += "#change-list"
    return render(request, template, ctx)


@require_GET
def chart_view(request: RcaRequest, cluster: str, kind: str, ident: str, name: str) -> HttpResponse:
    """One chart as an htmx fragment (figure via json_script, or "no data: <why>"); a page without htmx."""
    c, entity = chartdata.resolve(cluster, kind, ident, name)
    result = chartdata.build(c, kind, entity, name, request.cursor)
    chart_id = f"{kind}-{name}-{zlib.crc32(f'{cluster}/{ident}'.encode()):08x}"
    ctx = {
        "chart": result,
        "chart_id": chart_id,
        "fig_id": f"fig-{chart_id}",
        "entity": entity,
        "chart_cluster": c,
        "kind": kind,
    }
    template = "console/_chart.html" if request.htmx else "console/chart_page.html"
    return render(request, template, ctx)
