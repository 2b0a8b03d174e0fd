"""Incident pages and the JSON API (DESIGN.md section 6). Names: incidents:<name>."""

from __future__ import annotations

from django.urls import path

from incidents import views

app_name = "incidents"

urlpatterns = [
    path("incidents/", views.incident_list, name="incidents"),
    path("incidents/<int:pk>/", views.incident_detail, name="incident"),
    path("alerts/<int:pk>/", views.alert_detail, name="alert"),
]
