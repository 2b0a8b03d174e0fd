from __future__ import annotations

from django.apps import AppConfig


class CollectorsConfig(AppConfig):
    name = "collectors"
    verbose_name = "Inventory and collectors"
