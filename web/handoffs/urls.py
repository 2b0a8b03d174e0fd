"""Handoff routes, included into the ``incidents`` namespace (names: incidents:handoffs, incidents:handoff, ...)."""

from __future__ import annotations

from django.urls import path

from web.handoffs import views

urlpatterns = [
    path("handoffs/", views.handoff_list, name="handoffs"),
    path("handoffs.md", views.handoff_list_markdown, name="handoffs_md"),
    path("incidents/<int:pk>/handoff/", views.incident_handoff, name="handoff"),
    path("incidents/<int:pk>/handoff.md", views.incident_handoff_markdown, name="handoff_md"),
]
