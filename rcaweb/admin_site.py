"""Django's admin site, behind the one login of every page.

Since Django 5.1 the admin's own login form is marked ``@login_not_required`` and its site-wide views send
LoginRequiredMiddleware's visitors there. Here everyone signs in at ``/accounts/login/`` (throttled:
``rcaweb.throttle``; or OIDC), so without a session every admin URL, ``/admin/login/`` included, redirects
there like every other page instead of offering a second, unthrottled password form. Signed in, the admin's
login page is Django's (a staff member goes on to the admin, anyone else is told the account has no access).
"""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver


class RcaAdminSite(AdminSite):
    def login(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # not @login_not_required: LoginRequiredMiddleware sends an anonymous visitor to settings.LOGIN_URL
        return super().login(request, extra_context)

    def get_urls(self) -> list[URLResolver | URLPattern]:
        urls = super().get_urls()
        for p in urls:
            # AdminSite.get_urls points LoginRequiredMiddleware at admin:login; without it, at settings.LOGIN_URL
            if isinstance(p, URLPattern) and "login_url" in getattr(p.callback, "__dict__", {}):
                delattr(p.callback, "login_url")
        return urls
