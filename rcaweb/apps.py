from __future__ import annotations

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class RcawebConfig(AppConfig):
    name = "rcaweb"
    verbose_name = "rcaweb"

    def ready(self) -> None:
        from django.conf import settings

        from rcaweb import gc_policy, timestamptz_loader

        timestamptz_loader.connect()
        # The startup heap frozen, higher thresholds (rcaweb/gc_policy.py; the value was checked by settings)
        gc_policy.tune(settings.RCAWEB_GC_THRESHOLDS)


class RcaAdminConfig(admin_apps.AdminConfig):
    """``django.contrib.admin`` with rcaweb's site (``rcaweb.admin_site``: its login page needs a session)."""

    default = False  # named in INSTALLED_APPS; "rcaweb" itself is RcawebConfig
    default_site = "rcaweb.admin_site.RcaAdminSite"
