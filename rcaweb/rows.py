"""Fragments of the busiest pages rendered by Jinja2: table rows, the header and cursor bar of every page, and
the top and bottom of every entity page. Pages, their layout and every tag stay Django templates.

Django's engine resolves each ``{{ … }}`` through its generic lookup chain and wraps it in
localization and escaping calls: about 5-8 µs a variable. The "changes around t" table of an entity
page (50 rows of 10 cells) and a node's GPU and pod tables were most of a page's rendering time. Jinja2
compiles a template to Python once, and the same rows cost a tenth of that.

Row fragments are ``*.jinja`` files beside the Django templates, with autoescaping on. Markup made
safe on the Django side (``mark_safe``, ``format_html``: entity links, pills) passes through unescaped,
and what Jinja2 returns is safe for Django, because both honour ``__html__``. Undefined names raise
(StrictUndefined): a misspelt field fails a test instead of rendering an empty cell.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2
from django.conf import settings
from django.template.defaultfilters import date, truncatechars
from django.utils.safestring import SafeString, mark_safe

from rcaweb.templatetags.rcaweb import asset, at_time_link, duration, pill, utc, when


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in settings.TEMPLATES[0]["DIRS"]]),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        auto_reload=settings.DEBUG,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # the template tags and filters the fragments use, under the same names
    env.globals.update(pill=pill, when=when, at_time_link=at_time_link, static=asset)
    env.filters.update(utc=utc, duration=duration, date=date, truncatechars=truncatechars)
    return env


def render_rows(template: str, **context: Any) -> SafeString:
    """The rendered fragment ``template`` (a ``.jinja`` file under templates/), safe to put in a Django template."""
    return mark_safe(environment().get_template(template).render(context))
