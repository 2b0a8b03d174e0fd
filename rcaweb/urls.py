"""Root URL conf (docs/design.md §6)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import URLPattern, include, path

from web import metrics, views
from web.console import views as console_views
from web.login import ThrottledLoginView


def _oidc_urls() -> list[URLPattern]:
    """mozilla-django-oidc's pages (start, callback, logout), which sign people in: no session needed."""
    from mozilla_django_oidc import urls as oidc

    return [path(f"oidc/{p.pattern}", login_not_required(p.callback), name=p.name) for p in oidc.urlpatterns]


urlpatterns = [
    *(_oidc_urls() if settings.OIDC_ENABLED else []),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("audit/", views.audit_log, name="audit"),
    path("admin/", admin.site.urls),
    path("", include("web.inventory.urls")),
    path("", include("web.incidents.urls")),
    path("", include("web.console.urls")),
    path("", console_views.home_view, name="home"),  # base.html's {% cursor_url 'home' %}
]

handler500 = "web.views.server_error"
