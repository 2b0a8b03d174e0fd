"""What every entity page shares: lookup or 404, existence at t, changes around t, collection errors, fragments.

A page view starts from :func:`entity_page_context`, adds its kind-specific context, then calls :func:`finish` with its related
entities (``queries.related_entities``); :func:`render_page` returns the whole page, or only ``#page`` for an htmx cursor move.
"""

from __future__ import annotations

import html
import logging
from datetime import timedelta
from typing import Any, NamedTuple

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timezone import get_current_timezone

from collectors import changes_around, queries
from collectors.models import Entity, EntityVersion
from rcaweb import kinds
from rcaweb.http import RcaRequest
from web.inventory.incidents_about import About
from web.inventory.incidents_about import incidents_about as about
from web.templatetags.rcaweb import (
    at_time_link,
    compact,
    cursor_reverse,
    entity_link_parts,
    link_markup,
    relative,
    utc,
)

logger = logging.getLogger(__name__)

FRAGMENT_TEMPLATE = "collectors/_fragment.html"
# The charts of each kind's page (console:chart names and titles), loaded lazily by htmx so the page paints
# first: the registry of kinds declares them (rcaweb/kinds.py).
ENTITY_CHARTS: dict[str, list[tuple[str, str]]] = {
    k.name: [(ch.name, ch.title) for ch in k.charts] for k in kinds.with_charts()
}
CHANGES_SHOWN = 50  # rows of "changes around t" (rendering dominates a page's cost; 50 nearest t read well)


def not_found(cluster: str, kind: str, name: str, namespace: str = "") -> Http404:
    return Http404(f"No {kind} {namespace + '/' if namespace else ''}{name} in cluster {cluster}")


def _context_at(request: RcaRequest, entity: Entity, version: EntityVersion | None) -> dict[str, Any]:
    t = request.cursor.t
    ctx: dict[str, Any] = {
        "entity": entity,
        "cluster": entity.cluster,
        "version": version,
        "state": version.state if version else {},
        "t": t,
        "entity_charts": entity_charts(request, entity),
    }
    ctx["existed_until"] = ctx["exists_from"] = ctx["last_seen_at"] = None
    if version is None:
        ctx["existed_until"], ctx["exists_from"] = queries.existence_around(entity, t)
        if ctx["existed_until"] is not None:
            # valid_to is the first moment it was gone: show it one second earlier, when it still existed.
            ctx["last_seen_at"] = ctx["existed_until"] - timedelta(seconds=1)
    return ctx


def entity_charts(request: RcaRequest, entity: Entity) -> list[tuple[str, str]]:
    """(URL with the cursor, title) of each chart of this entity's page (``partials/entity_charts.html``)."""
    ident = kinds.get(entity.kind).ident(entity.namespace, entity.name)
    cur, cluster = request.cursor, entity.cluster.name
    return [
        (cursor_reverse(cur, "console:chart", cluster, entity.kind, ident, name), title)
        for name, title in ENTITY_CHARTS.get(entity.kind, [])
    ]


def entity_page_context(
    request: RcaRequest, cluster: str, kind: str, name: str, namespace: str = ""
) -> dict[str, Any]:
    """The entity page's context: the entity (404 if never recorded; an entity absent at t still has its
    page, which says so), its version at t and the cluster's collection errors in the window, read together
    (``queries.entity_page_at``), and when an absent object existed before/after t."""
    cur = request.cursor
    entity, version, troubles = queries.entity_page_at(cluster, kind, name, namespace, cur.t, cur.start)
    if entity is None:
        raise not_found(cluster, kind, name, namespace)
    ctx = _context_at(request, entity, version)
    ctx["collection_errors"] = troubles
    return ctx


def finish(request: RcaRequest, ctx: dict[str, Any], related: queries.Related) -> dict[str, Any]:
    """Add changes around t with the cursor's ⇤/⇥ targets (one query) and the incidents about the object, what
    the page's top and bottom show (``collectors/_entity_head.html``, ``collectors/_entity_foot.html``): call it
    last, on an :func:`entity_page_context`."""
    cur = request.cursor
    cluster = ctx["cluster"]
    # each side reads as many as are shown: enough for the nearest CHANGES_SHOWN, whichever side they are on
    around = changes_around.changes_around(
        cluster, related, cur.t, cur.window, limit=CHANGES_SHOWN, shown=CHANGES_SHOWN
    )
    changes = around.lines  # the ones nearest t; the rest are a cursor step away
    ctx["cursor_prev_change"], ctx["cursor_next_change"] = around.prev, around.next
    ctx["changes_limited"], ctx["changes_total"] = around.limited, around.total
    ctx["changes"] = changes
    ctx["changes_before"] = sum(1 for ch in changes if ch.time <= cur.t)
    ctx["change_rows"] = change_rows(request, ctx["entity"], changes, ctx["changes_before"])
    ctx["change_rows_html"] = change_rows_html(ctx["change_rows"], ctx["changes_before"], utc(cur.t))
    ctx["incidents_about"] = incidents_about(ctx["entity"], request)
    return ctx


def incidents_about(entity: Entity, request: RcaRequest) -> About:
    """The incidents about this object at t (one query), from ``web.inventory.incidents_about``."""
    return about(entity, request.cursor)


class ChangeRow(NamedTuple):
    """One row of "changes around t", its links and texts built (:func:`change_rows_html` writes its markup)."""

    cursor_before: bool  # the "t = …" line goes above this row
    after: bool
    at_url: str
    hms: str
    relative: str
    object: str
    field: str
    old_new: str
    source: str
    actor: str
    link: str


def change_rows(
    request: RcaRequest, entity: Entity, changes: list[changes_around.ChangeLine], before: int
) -> list[ChangeRow]:
    """The "changes around t" rows, each with its links and texts built here.

    The same links and words the row's template tags made (``at_time_url``, ``entity_link … when=``,
    ``relative``, ``compact``), each built once in Python: a page shows up to 50 rows, and per-row tags
    were most of its rendering time. An object's link parts are made once per object, not per row.
    """
    cur, path, t = request.cursor, request.path, request.cursor.t
    tz = get_current_timezone()  # the |date filter shows times in it
    this_entity = format_html('<span class="muted">this {}</span>', entity.kind)
    objects: dict[int, tuple[tuple[str, str, str], str]] = {}  # entity id -> (link parts, kind markup)
    rows = []
    for i, ch in enumerate(changes):
        when = ch.time
        if ch.entity_id == entity.pk:
            obj = this_entity
        elif ch.entity is not None and ch.entity_id is not None:  # a Ref comes with its id
            known = objects.get(ch.entity_id)
            if known is None:
                parts = entity_link_parts(ch.entity)
                known = objects[ch.entity_id] = (parts, f'<span class="kind">{parts[0]}</span> ')
            obj = SafeString(known[1] + link_markup(known[0], at_time_link(cur, known[0][1], when)))
        else:
            obj = format_html('<span class="muted">{}</span>', ch.summary or "—")
        rows.append(
            ChangeRow(
                cursor_before=i == before,
                after=when > t,
                at_url=at_time_link(cur, path, when),
                hms=when.astimezone(tz).strftime("%H:%M:%S"),
                relative=relative(when, t),
                object=obj,
                field=ch.field,
                old_new=ch.field
                if ch.field in ("created", "deleted")
                else f"{compact(ch.old)} → {compact(ch.new)}",
                source=ch.source,
                actor=ch.actor or "",
                link=ch.link,
            )
        )
    return rows


def _escape(value: object) -> str:
    """``conditional_escape(value)`` without its lazy-string wrapper (Django's ``escape`` is ``html.escape``)."""
    html_method = getattr(value, "__html__", None)
    return html_method() if html_method is not None else html.escape(str(value))


def change_rows_html(rows: list[ChangeRow], before: int, t_utc: str) -> SafeString:
    """The ``<tr>``s of "changes around t" (``collectors/_entity_foot.html``), with the "t = …" row above the first
    change after t, or last when every change is at or before t.

    Written here, not in a template: every entity page shows up to 50 of these rows of 10 values, and Django's
    engine took 1.3 ms for them where this takes a fifth of that (docs/decisions.md). Every value is escaped
    as ``conditional_escape`` would: the entity links ``change_rows`` made stay as they are.
    """
    esc = _escape
    cursor_row = f'<tr class="cursor-row"><td colspan="7">▸ t = {esc(t_utc)}</td></tr>\n'
    out = []
    for r in rows:
        if r.cursor_before:
            out.append(cursor_row)
        link = f' <a href="{esc(r.link)}" rel="noopener external">link</a>' if r.link else ""
        out.append(
            f'<tr class="{"after" if r.after else ""}">'
            f'<td class="nowrap"><a href="{esc(r.at_url)}" title="move the cursor to this change">{esc(r.hms)}</a></td>'
            f'<td class="muted nowrap">{esc(r.relative)}</td><td>{esc(r.object)}</td>'
            f'<td class="mono">{esc(r.field)}</td><td class="mono">{esc(r.old_new)}</td>'
            f"<td>{esc(r.source)}</td><td>{esc(r.actor)}{link}</td></tr>\n"
        )
    if before == len(rows):
        out.append(cursor_row)
    return SafeString("".join(out))


def render_page(request: RcaRequest, template: str, ctx: dict[str, Any], status: int = 200) -> HttpResponse:
    """The page, or for an htmx request only the ``#page`` fragment (the template's ``body`` partial)."""
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.history_restore_request:
        ctx["body_template"] = f"{template}#body"
        return render(request, FRAGMENT_TEMPLATE, ctx, status=status)
    return render(request, template, ctx, status=status)
