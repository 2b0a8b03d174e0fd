"""Template tags every page uses: cursor links, entity links, times in UTC and local.

Links between pages are built only here (and by ``Cursor.link``), so every
internal href carries ``t``/``w`` (docs/conventions.md §4–5).
"""

from __future__ import annotations

import functools
import html
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol

from django import template
from django.urls import get_resolver, get_script_prefix, get_urlconf, reverse
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from collectors.changefmt import Leaf, diff_leaves
from rcaweb import kinds
from rcaweb.cursor import Cursor, format_t, query_at
from rcaweb.durations import format_duration

register = template.Library()


class Linked(Protocol):
    """What a page can link to: a model (entity, incident, alert) or a row that knows its object's URL."""

    def get_absolute_url(self) -> str: ...


@functools.lru_cache(maxsize=4096)
def cursor_query(cur: Cursor) -> str:
    """``cur.query()`` (the ``t=…&w=…`` of a cursor), encoded once per cursor rather than once per link."""
    return cur.query()


@functools.lru_cache(maxsize=4096)
def moved_query(window: timedelta, when: datetime) -> str:
    """``Cursor(…, window).moved_to(when).query()`` without building the cursor (a moved cursor always has
    both t and w), memoized: a page moves the cursor to each of its 50 changes."""
    return query_at(when, window)


def _plain_path(url: str) -> bool:
    """A path as reverse() returns it: no scheme or host, query or fragment to keep."""
    return url[:1] == "/" and url[1:2] != "/" and "?" not in url and "#" not in url


def _link(cur: Cursor, url: str) -> str:
    """``cur.link(url)``: a plain path takes the cursor's query as is (memoized per cursor); the rest, a URL
    with its own query or fragment, goes through :meth:`Cursor.link`."""
    if _plain_path(url):
        q = cursor_query(cur)
        return f"{url}?{q}" if q else url
    return cur.link(url)


def at_time_link(cur: Cursor, url: str, when: datetime | None) -> str:
    """``url`` with the cursor moved to ``when`` (same window); the cursor itself when ``when`` is empty."""
    if not when:
        return _link(cur, url)
    if _plain_path(url):
        return f"{url}?{moved_query(cur.window, when)}"
    return cur.moved_to(when).link(url)


@functools.lru_cache(maxsize=8192)
def _reverse_memo(resolver: object, prefix: str, viewname: str, args: tuple, kwargs: tuple) -> str:
    return reverse(viewname, args=[a for _, a in args], kwargs={k: v for k, _, v in kwargs} or None)


def cached_reverse(
    viewname: str, args: Iterable[object] = (), kwargs: dict[str, object] | None = None
) -> str:
    """``reverse()``, memoized per URL conf, script prefix, name and arguments (typed: 1 is not "1").

    The resolver object is part of the key, so ``clear_url_caches()`` (a changed URL conf) starts afresh.
    """
    try:
        return _reverse_memo(
            get_resolver(get_urlconf()),
            get_script_prefix(),
            viewname,
            tuple((type(a), a) for a in args),
            tuple((k, type(v), v) for k, v in sorted((kwargs or {}).items())),
        )
    except TypeError:  # an unhashable argument
        return reverse(viewname, args=list(args), kwargs=kwargs or None)


_URLS: dict[tuple[object, ...], str] = {}


def _absolute_url(entity: Linked) -> str:
    """``entity.get_absolute_url()`` (the one URL builder), memoized by what the URL is made of.

    Keyed on (URL resolver, script prefix, type, kind, cluster, namespace, name), never on a primary key (tests
    reuse them): a page names the same objects again and again (the incident page ~500 times), and a warm
    lookup costs 1 µs where ``reverse()`` costs 14 (``bench/tag_caches.py``).
    """
    kind, name = str(getattr(entity, "kind", "")), str(getattr(entity, "name", ""))
    cluster = str(getattr(getattr(entity, "cluster", None), "name", ""))
    if not kind or not name or not cluster:
        return entity.get_absolute_url()
    # the resolver object changes when the URL conf does (clear_url_caches), so a new conf starts afresh
    namespace = str(getattr(entity, "namespace", ""))
    key = (get_resolver(get_urlconf()), get_script_prefix(), type(entity), kind, cluster, namespace, name)
    url = _URLS.get(key)
    if url is None:
        url = entity.get_absolute_url()
        if len(_URLS) < 50_000:
            _URLS[key] = url
    return url


def _cursor(context: template.Context) -> Cursor:
    cur = context.get("cursor")
    if cur is None and "request" in context:
        cur = getattr(context["request"], "cursor", None)
    return cur or Cursor()


@register.simple_tag(takes_context=True)
def cursor_url(context: template.Context, viewname: str, *args: object, **kwargs: object) -> str:
    """``{% cursor_url 'collectors:node' cluster name %}``: reverse() plus the page's t/w."""
    return cursor_reverse(_cursor(context), viewname, *args, **kwargs)


def cursor_reverse(cur: Cursor, viewname: str, *args: object, **kwargs: object) -> str:
    """:func:`cursor_url` for views that build links in Python."""
    return _link(cur, cached_reverse(viewname, args, kwargs))


@register.simple_tag(takes_context=True)
def cursor_link(context: template.Context, url: str) -> str:
    """Carry the cursor onto an already-built path (``obj.get_absolute_url``)."""
    return _link(_cursor(context), url)


@register.simple_tag(takes_context=True)
def at_time_url(context: template.Context, url: str, when: datetime | None) -> str:
    """``url`` with the cursor moved to ``when`` (same window): "jump to this change"."""
    return at_time_link(_cursor(context), url, when)


_DASH = mark_safe('<span class="muted">—</span>')


def entity_link_parts(entity: Linked, label: str | None = None) -> tuple[str, str, str]:
    """What an entity's link is made of, apart from its cursor: (escaped kind, URL without the cursor,
    escaped text). Rows that name the same object many times (changes around t) take these once per
    object and put each row's cursor into :func:`link_markup`."""
    kind = getattr(entity, "kind", "")
    name = getattr(entity, "name", None)
    text = label or (
        str(entity) if name is None else kinds.link_text(kind, getattr(entity, "namespace", ""), name)
    )
    # format_html('<a class="ent ent-{}" href="{}">{}</a>', …) without its per-call overhead: the same
    # escaping (django's escape() is html.escape() behind a lazy-string wrapper)
    text = conditional_escape(text) if hasattr(text, "__html__") else html.escape(str(text))
    return html.escape(str(kind)), _absolute_url(entity), text


def link_markup(parts: tuple[str, str, str], href: str) -> SafeString:
    """The ``<a>`` of :func:`entity_link_parts` pointing at ``href`` (the URL with a cursor)."""
    return SafeString(f'<a class="ent ent-{parts[0]}" href="{html.escape(href)}">{parts[2]}</a>')


def entity_link_html(
    entity: Linked | None, cur: Cursor, label: str | None = None, when: datetime | None = None
) -> str:
    """The markup of :func:`entity_link`: views that build table rows in Python call this, so every page
    still names an object the one way. ``when`` moves the link's cursor there (same window)."""
    if entity is None:
        return _DASH
    parts = entity_link_parts(entity, label)
    return link_markup(parts, _link(cur, parts[1]) if when is None else at_time_link(cur, parts[1], when))


@register.simple_tag(takes_context=True)
def entity_link(
    context: template.Context, entity: Linked | None, label: str | None = None, when: datetime | None = None
) -> str:
    """``{% entity_link obj %}``: the one way a page names an object (NetBox linkify)."""
    if entity is None:
        return _DASH
    return entity_link_html(entity, _cursor(context), label, when)


@register.filter
def utc(value: datetime | None) -> str:
    return format_t(value) if value else ""


@register.simple_tag
def when(value: datetime | None) -> str:
    """A time shown in UTC, with the browser's local time filled in by static/js/time.js."""
    if not value:
        return mark_safe('<span class="muted">—</span>')
    iso = format_t(value)
    return format_html(
        '<time datetime="{}" title="{}">{}<span class="local"></span></time>',
        iso,
        iso,
        value.strftime("%Y-%m-%d %H:%M:%S") + "Z",
    )


@register.filter
def duration(value: timedelta | None) -> str:
    return format_duration(value) if value is not None else ""


@register.simple_tag
def relative(value: datetime | None, ref: datetime | None) -> str:
    """``12m before onset``-style offsets for incident timelines."""
    if not value or not ref:
        return ""
    delta = value - ref
    word = "after" if delta.total_seconds() >= 0 else "before"
    return f"{format_duration(abs(delta)) or '0s'} {word}"


CURSOR_STEPS = [("-1h", -3600), ("-10m", -600), ("-1m", -60), ("+1m", 60), ("+10m", 600), ("+1h", 3600)]


MAIN_NAV = [
    ("home", "Console"),
    ("incidents:incidents", "Incidents"),
    ("incidents:handoffs", "Handoffs"),
    ("console:fleet", "Fleet"),
    ("console:slo", "SLO"),
    ("console:changes", "Changes"),
]


@register.inclusion_tag("_top_bar.html", takes_context=True)
def top_bar(context: template.Context) -> dict:
    """The header of every page (``_top_bar.html``): brand and, when logged in, the main navigation with the
    cursor, the user and the log-out form (the inclusion tag hands the page's CSRF token on)."""
    cur, user = _cursor(context), context.get("user")
    logged_in = user is not None and user.is_authenticated
    return {
        "home_url": _link(cur, cached_reverse("home")),
        "nav": [(_link(cur, cached_reverse(name)), label) for name, label in MAIN_NAV] if logged_in else [],
        "username": user.get_username() if user is not None and logged_in else None,
        "logout_url": cached_reverse("logout"),
    }


@register.inclusion_tag("_cursor_bar.html", takes_context=True)
def cursor_bar(context: template.Context) -> dict:
    """The cursor bar on every page: steps, now, incident start, previous/next change.

    Pages may put ``cursor_prev_change``, ``cursor_next_change`` and ``cursor_anchor``
    (e.g. the incident onset) in their context, and ``cursor_now_at``: where "now" goes on a page that
    defaults to another time when the URL has no ``t`` (an incident page opens at its onset).
    """
    return cursor_bar_context(context)


def cursor_bar_context(context: template.Context) -> dict:
    """What ``_cursor_bar.html`` shows: the cursor, its step/now/change links and the form's values."""
    request = context.get("request")
    cur = _cursor(context)
    here = request.get_full_path() if request is not None else "/"
    steps = [(label, cur.shifted(timedelta(seconds=s)).link(here)) for label, s in CURSOR_STEPS]
    prev_change = context.get("cursor_prev_change")
    next_change = context.get("cursor_next_change")
    anchor = context.get("cursor_anchor")
    now_at = context.get("cursor_now_at")
    now = timezone.now()
    return {
        "cursor": cur,
        # a t after now is shown as asked, but flagged: nothing is known past now, and durations that run to
        # t would be extrapolated
        "future": format_duration(
            max(timedelta(minutes=1), (cur.t - now) // timedelta(minutes=1) * timedelta(minutes=1))
        )
        if not cur.live and cur.t > now
        else "",
        "steps": steps,
        "now_url": cur.moved_to(now_at).link(here),
        "prev_url": cur.moved_to(prev_change).link(here) if prev_change else "",
        "next_url": cur.moved_to(next_change).link(here) if next_change else "",
        "anchor_url": cur.moved_to(anchor[1]).link(here) if anchor else "",
        "anchor_label": anchor[0] if anchor else "",
        "t_iso": format_t(cur.t),
        "window": format_duration(cur.window),
        "here_path": request.path if request is not None else "/",
        # the page's own filters (job list ?queue=…) survive a typed-in t/w
        "keep_params": [(k, v) for k, vs in request.GET.lists() if k not in ("t", "w") for v in vs][:20]
        if request is not None
        else [],
    }


#
# Entity pages (collectors): filtered-list links, compact values, state pills
#


@register.simple_tag(takes_context=True)
def list_url(context: template.Context, viewname: str, *args: object, **filters: object) -> str:
    """``{% list_url 'collectors:jobs' cluster.name queue=q phase='Pending' %}``: a count's filtered list, with t/w.

    Empty filter values are dropped, so one tag serves "all jobs" and "pending jobs of queue x".
    """
    return list_link(_cursor(context), viewname, *args, **filters)


def list_link(cur: Cursor, viewname: str, *args: object, **filters: object) -> str:
    """:func:`list_url` for views that build links in Python."""
    from urllib.parse import urlencode

    url = cached_reverse(viewname, args)
    params = {k: str(v) for k, v in filters.items() if v not in (None, "")}
    if params:
        url += "?" + urlencode(params)
    return _link(cur, url)


@register.simple_tag
def change_diff(change: object) -> list[Leaf]:
    """``{% change_diff ch as parts %}``: the differing parts of a recorded change (collectors.changefmt),
    so a list of containers shows ``[main].image 1.4 → 1.5``, not the same cut-off prefix twice."""
    return diff_leaves(
        getattr(change, "field", ""), getattr(change, "old", None), getattr(change, "new", None)
    )


@register.filter
def compact(value: object, limit: int = 120) -> str:
    """A stored JSON value in one short line: strings as is, the rest as JSON; None as an em dash."""
    import json

    if value is None:
        return "—"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:  # what json.dumps prints, without its encoder's set-up (most changed values)
        return str(value)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


PILL_CLASSES = {
    "ready": "ok",
    "running": "ok",
    "succeeded": "ok",
    "ok": "ok",
    "true": "ok",
    "pending": "warn",
    "suspended": "warn",
    "notready": "bad",
    "unknown": "warn",
    "false": "bad",
    "failed": "bad",
    "faulty": "bad",
    "missing": "bad",
    "crashloopbackoff": "bad",
    "oomkilled": "bad",
    "errimagepull": "bad",
    "imagepullbackoff": "bad",
    "error": "bad",
    "cordoned": "warn",
    "unschedulable": "warn",
}


@register.simple_tag
def pill(value: object, label: str | None = None) -> str:
    """A small coloured state word (Running, NotReady, faulty…): calm colours, the word carries the meaning."""
    if value is None or value == "":
        return mark_safe('<span class="muted">—</span>')
    if label is None and not hasattr(value, "__html__"):
        return _pill(str(value))  # a handful of plain words on every row: each made once
    return _pill_markup(str(value), label)


@functools.lru_cache(maxsize=1024)
def _pill(word: str) -> str:
    return _pill_markup(word, None)


def _pill_markup(word: str, label: str | None) -> str:
    cls = PILL_CLASSES.get(word.lower().replace(" ", ""), "")
    return format_html('<span class="pill {}">{}</span>', cls, label or word)
