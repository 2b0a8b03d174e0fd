from __future__ import annotations

from django.apps import AppConfig


class WebConfig(AppConfig):
    """Every page, template tag and URL of the console: the layer above the inventory, the incidents and the
    project core (docs/design.md §3)."""

    name = "web"
    default_auto_field = "django.db.models.BigAutoField"
