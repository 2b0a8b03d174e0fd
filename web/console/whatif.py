"""The what-if page ``/c/<cluster>/whatif/?t=…&quota=vision:16&uncordon=h100-03…`` (docs/design.md §6).

The state at t with the edits of the query string (``incidents.diagnosis.whatif``), one scheduling pass over every
waiting job before and after, and their difference. It reads; it never executes an edit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors.models import Cluster
from incidents.diagnosis.scheduling_pass import STARTS, Considered
from incidents.diagnosis.whatif import KINDS, Edit, EditError, WhatIf, allocation_table, compare, parse_edits
from incidents.diagnosis_input import load_cluster_input
from rcaweb.cursor import Cursor
from rcaweb.http import RcaRequest
from web.inventory.entity_page import render_page

logger = logging.getLogger(__name__)

# The page's own parameters besides the edits: the cursor's.
CURSOR_PARAMS = ("t", "w")
# Rows of the full order table (the pass itself stops at scheduling_pass.MAX_CONSIDERED).
MAX_ORDER_ROWS = 400


def whatif_url(cluster: str, cursor: Cursor, edits: list[Edit]) -> str:
    """The page with ``edits`` at the cursor: what the why-pending panel links to, prefilled."""
    query = [*cursor.params().items(), *((e.kind, e.value) for e in edits)]
    base = reverse("console:whatif", args=[cluster])
    return f"{base}?{urlencode(query)}" if query else base


@dataclass
class Placement:
    """Where a job's pods go: a node of the inventory (linked) or one the edits added."""

    node: str
    pods: int
    added: bool


@dataclass
class JobRow:
    """One waiting job of the comparison."""

    namespace: str
    name: str
    queue: str
    units: str
    change: str
    before: str
    after: str
    order_before: int | None
    order_after: int | None
    nodes: list[Placement]


def _outcome(c: Considered | None) -> str:
    if c is None:
        return "not considered"
    if c.outcome == STARTS:
        return "starts"
    return f"{c.outcome} ({c.why})" if c.why else c.outcome


def _rows(wi: WhatIf) -> list[JobRow]:
    added = set(wi.added_nodes)
    out = []
    for j in wi.jobs:
        c = j.after or j.before
        assert c is not None
        where = j.after.nodes if j.after is not None and j.after.outcome == STARTS else {}
        out.append(
            JobRow(
                namespace=c.job.namespace,
                name=c.job.name,
                queue=c.queue,
                units=c.units_words,
                change=j.change,
                before=_outcome(j.before),
                after=_outcome(j.after),
                order_before=j.before.order if j.before else None,
                order_after=j.after.order if j.after else None,
                nodes=[Placement(n, p, n in added) for n, p in where.items()],
            )
        )
    return out


def bad_edit(message: str) -> HttpResponse:
    return HttpResponseBadRequest(f"Bad edit: {message}\n", content_type="text/plain; charset=utf-8")


@require_GET
@vary_on_headers("HX-Request")
def whatif_view(request: RcaRequest, cluster: str) -> HttpResponse:
    c = Cluster.objects.filter(name=cluster).first()
    if c is None:
        raise Http404(f"unknown cluster {cluster!r}")
    unknown = sorted(set(request.GET) - {*KINDS, *CURSOR_PARAMS})
    if unknown:
        return bad_edit(f"{', '.join(unknown)}: not an edit (edits: {', '.join(KINDS)})")
    # An empty field of the page's own form adds no edit.
    params = {k: [v.strip() for v in request.GET.getlist(k) if v.strip()] for k in KINDS}
    try:
        edits = parse_edits(params)
        wi = compare(load_cluster_input(c, request.cursor.t), edits)
    except EditError as e:
        return bad_edit(str(e))
    rows = _rows(wi)
    ctx = {
        "cluster": c,
        "t": request.cursor.t,
        "wi": wi,
        "alloc": allocation_table(wi.allocations),
        "changed": [r for r in rows if r.change != "same"],
        "order": sorted(rows, key=lambda r: r.order_after or len(rows) + 1)[:MAX_ORDER_ROWS],
        "kinds": KINDS,
        "edits": [(e, whatif_url(c.name, request.cursor, [x for x in edits if x != e])) for e in edits],
        "clear_url": whatif_url(c.name, request.cursor, []),
        "cursor_params": request.cursor.params(),
        "starts_before": len(wi.before.starts),
        "starts_after": len(wi.after.starts),
    }
    return render_page(request, "console/whatif.html", ctx)
