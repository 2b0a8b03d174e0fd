"""Django's admin site, behind the one login of every page.

Since Django 5.1 the admin's own login form is marked ``@login_not_required`` and its site-wide views send
LoginRequiredMiddleware's visitors there. Here everyone signs in at ``/accounts/login/`` (throttled:
``rcaweb.throttle``; or OIDC), and the admin offers no second password form: its login page, for everyone,
signed in or not, sends the visitor to the one login (a staff member already signed in goes on to the admin).
"""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, reverse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache


class RcaAdminSite(AdminSite):
    @method_decorator(never_cache)
    def login(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # not @login_not_required: LoginRequiredMiddleware sends an anonymous visitor to settings.LOGIN_URL
        if request.method == "GET" and self.has_permission(request):
            return super().login(request, extra_context)  # Django's redirect to the admin index
        # No password is checked here, whatever is posted: the one login checks it, under the one policy.
        # The login view checks where `next` leads before it redirects there.
        target = request.GET.get(REDIRECT_FIELD_NAME) or reverse("admin:index", current_app=self.name)
        return redirect_to_login(target)

    def get_urls(self) -> list[URLResolver | URLPattern]:
        urls = super().get_urls()
        for p in urls:
            # AdminSite.get_urls points LoginRequiredMiddleware at admin:login; without it, at settings.LOGIN_URL
            if isinstance(p, URLPattern) and "login_url" in getattr(p.callback, "__dict__", {}):
                delattr(p.callback, "login_url")
        return urls
