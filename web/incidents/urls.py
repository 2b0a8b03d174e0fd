"""Incident pages and the JSON API (docs/design.md §6). Names: incidents:<name>."""

from __future__ import annotations

from django.urls import include, path

from web.incidents import incident_facts, views, webhooks

app_name = "incidents"

urlpatterns = [
    path("incidents/", views.incident_list, name="incidents"),
    path("incidents/<int:pk>/", views.incident_detail, name="incident"),
    path("incidents/<int:pk>/history/", views.incident_history, name="history"),
    path("alerts/<int:pk>/", views.alert_detail, name="alert"),
    path("api/v1/alerts/alertmanager", webhooks.alertmanager_webhook, name="api-alertmanager"),
    path("api/v1/changes", webhooks.external_change, name="api-changes"),
    path("api/v1/incidents/<int:pk>", incident_facts.incident_json, name="api-incident"),
    path("", include("web.handoffs.urls")),  # handoffs, handoffs_md, handoff, handoff_md
]
