from __future__ import annotations

from django.apps import AppConfig


class RcawebConfig(AppConfig):
    name = "rcaweb"
    verbose_name = "rcaweb"

    def ready(self) -> None:
        from rcaweb import pgtime

        pgtime.connect()
