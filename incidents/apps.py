from __future__ import annotations

from django.apps import AppConfig


class IncidentsConfig(AppConfig):
    name = "incidents"
    verbose_name = "Alerts and incidents"

    def ready(self) -> None:
        from collectors.signals import inventory_swept
        from incidents.diagnosis_run import after_sweep

        inventory_swept.connect(after_sweep, dispatch_uid="incidents.rediagnose")
