"""What every entity page shares: lookup or 404, existence at t, changes around t, collection errors, fragments.

A page view builds its kind-specific context, then calls :func:`finish` with the Q of its related
entities; :func:`render_page` returns the whole page, or only ``#page`` for an htmx cursor move.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import render

from collectors import queries
from collectors.models import Entity
from rcaweb.http import RcaRequest

logger = logging.getLogger(__name__)

FRAGMENT_TEMPLATE = "collectors/_fragment.html"
CHANGES_SHOWN = 50  # rows of "changes around t" (rendering dominates a page's cost; 50 nearest t read well)


def entity_or_404(cluster: str, kind: str, name: str, namespace: str = "") -> Entity:
    """The entity (with its cluster), whatever its lifespan; the page itself says whether it existed at t."""
    entity = queries.get_entity(cluster, kind, name, namespace)
    if entity is None:
        raise Http404(f"No {kind} {namespace + '/' if namespace else ''}{name} in cluster {cluster}")
    return entity


def entity_context(request: RcaRequest, entity: Entity) -> dict[str, Any]:
    """The version at t and, when there is none, when the object existed before/after t."""
    t = request.cursor.t
    version = queries.version_at(entity, t)
    ctx: dict[str, Any] = {
        "entity": entity,
        "cluster": entity.cluster,
        "version": version,
        "state": version.state if version else {},
        "t": t,
    }
    if version is None:
        ctx["existed_until"], ctx["exists_from"] = queries.existence_around(entity, t)
        if ctx["existed_until"] is not None:
            # valid_to is the first moment it was gone: show it one second earlier, when it still existed.
            ctx["last_seen_at"] = ctx["existed_until"] - timedelta(seconds=1)
    return ctx


def finish(request: RcaRequest, ctx: dict[str, Any], related: Q) -> dict[str, Any]:
    """Add changes around t, cursor ⇤/⇥ targets and collection errors (four queries)."""
    cur = request.cursor
    cluster = ctx["cluster"]
    changes = queries.changes_around(cluster, related, cur.t, cur.window)
    ctx["changes_total"] = len(changes)
    ctx["changes_limited"] = len(changes) >= queries.CHANGES_LIMIT
    if len(changes) > CHANGES_SHOWN:  # the ones nearest t; the rest are a cursor step away
        changes = sorted(changes, key=lambda ch: abs((ch.time - cur.t).total_seconds()))[:CHANGES_SHOWN]
        changes.sort(key=lambda ch: (ch.time, ch.id))
    ctx["changes"] = changes
    ctx["changes_before"] = sum(1 for ch in changes if ch.time <= cur.t)
    ctx["cursor_prev_change"], ctx["cursor_next_change"] = queries.neighbour_changes(cluster, related, cur.t)
    ctx["collection_errors"] = queries.collection_errors(cluster, cur.start, cur.t)
    return ctx


def render_page(request: RcaRequest, template: str, ctx: dict[str, Any], status: int = 200) -> HttpResponse:
    """The page, or for an htmx request only the ``#page`` fragment (the template's ``body`` partial)."""
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.history_restore_request:
        ctx["body_template"] = f"{template}#body"
        return render(request, FRAGMENT_TEMPLATE, ctx, status=status)
    return render(request, template, ctx, status=status)
