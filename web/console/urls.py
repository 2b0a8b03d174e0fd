"""Console URLs (docs/design.md §6). Names: console:<name>; the home page is also the root name ``home``."""

from __future__ import annotations

from django.urls import path

from web.console import queues, usage, views, whatif

app_name = "console"

urlpatterns = [
    path("", views.home_view, name="home"),
    path("fleet/", views.fleet_view, name="fleet"),
    path("slo/", views.slo_view, name="slo"),
    path("slo/jobs/", views.slo_jobs_view, name="slo_jobs"),
    path("changes/", views.changes_view, name="changes"),
    path("c/<slug:cluster>/whatif/", whatif.whatif_view, name="whatif"),
    path("c/<slug:cluster>/usage/", usage.usage_view, name="usage"),
    path(
        "c/<slug:cluster>/usage/project/<str:name>/",
        usage.workload_usage_view,
        {"kind": "project", "namespace": ""},
        name="usage_project",
    ),
    path(
        "c/<slug:cluster>/usage/<str:kind>/<str:namespace>/<str:name>/",
        usage.workload_usage_view,
        name="usage_workload",
    ),
    path("c/<slug:cluster>/queues/", queues.queues_view, name="queues"),
    path("charts/<slug:cluster>/<str:kind>/<path:ident>/<str:name>/", views.chart_view, name="chart"),
]
