"""The incident page's evidence: the observations the hypotheses cite and what could not be collected, pinned
above the paginated list of every observation.

The whole list is one click away (htmx swaps it in); the first view carries what is cited.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db.models import Q

from incidents.models import DiagnosisRun, Incident, Observation
from rcaweb.cursor import Cursor
from rcaweb.http import RcaRequest

EVIDENCE_PAGE = 50
CITED_MAX = 200
LIST_PARAMS = ("evidence", "page", "kind", "errors")  # any of them asks for the list itself


def evidence_context(
    request: RcaRequest,
    incident: Incident,
    cursor: Cursor,
    run: DiagnosisRun | None,
    runs: list[DiagnosisRun],
) -> dict[str, Any]:
    """The page's ``evidence`` (a page of observations, filtered by ``?kind=`` and ``?errors=1``), ``cited``,
    ``cited_ids`` and the links to the previous and next pages."""
    page = _evidence_page(request, incident)
    cited = _cited(incident, run, runs)
    ctx: dict[str, Any] = {"evidence": page, "cited": cited, "cited_ids": {o.pk for o in cited}}
    keep = {k: request.GET[k] for k in ("kind", "errors") if request.GET.get(k)}
    base = incident.get_absolute_url() + "?" + (urlencode(keep) + "&" if keep else "")
    if page.has_previous():
        ctx["evidence_prev_url"] = cursor.link(f"{base}page={page.previous_page_number()}")
    if page.has_next():
        ctx["evidence_next_url"] = cursor.link(f"{base}page={page.next_page_number()}")
    return ctx


def evidence_folding(
    request: RcaRequest, incident: Incident, cursor: Cursor, fragment: str | None
) -> dict[str, Any]:
    """Whether the first view folds the list (``evidence_folded``) and, on the whole page, the link that
    unfolds it (``evidence_all_url``)."""
    ctx: dict[str, Any] = {
        "evidence_folded": fragment is None and not any(request.GET.get(k) for k in LIST_PARAMS)
    }
    if fragment is None:
        ctx["evidence_all_url"] = cursor.link(incident.get_absolute_url() + "?evidence=all") + "#evidence"
    return ctx


def _cited(incident: Incident, run: DiagnosisRun | None, runs: list[DiagnosisRun]) -> list[Observation]:
    """Observations the hypotheses of ``run`` cite, so every "#obs-N" anchor resolves, and what could not be
    collected (a source that failed lowers confidence; a gap says why data is missing): both belong in the
    first view."""
    cited = (
        Q(hypotheses__run=run)
        if run is not None and run is not runs[-1]
        else Q(hypotheses__incident=incident, hypotheses__superseded=False)
    )
    return list(
        Observation.objects.filter(
            cited | (Q(incident=incident) & (~Q(error="") | Q(summary__startswith="no data:")))
        )
        .defer("content")
        .distinct()
        .select_related("entity", "entity__cluster")
        .order_by("observed_at", "id")[:CITED_MAX]
    )


def _evidence_page(request: RcaRequest, incident: Incident) -> Page[Observation]:
    qs = (
        Observation.objects.filter(incident=incident)
        .defer("content")
        .select_related("entity", "entity__cluster")
        .order_by("observed_at", "id")
    )
    kind = request.GET.get("kind", "")
    if kind:
        qs = qs.filter(kind=kind[:48])
    if request.GET.get("errors") == "1":
        qs = qs.exclude(error="")
    return Paginator(qs, EVIDENCE_PAGE).get_page(request.GET.get("page"))
