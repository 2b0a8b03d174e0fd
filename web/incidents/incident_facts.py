"""``GET /api/v1/incidents/<id>``: everything the incident page shows, as plain data (token or session).

The same queries as the page, bounded: observations stop at MAX_API_OBSERVATIONS and say so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.views.decorators.http import require_GET

from collectors.sources.redact import redact_value
from incidents.models import Incident, IncidentSubject
from rcaweb.timestamps import format_t_or_none
from web.incidents.api import bearer_token

MAX_API_OBSERVATIONS = 2000


@require_GET
@bearer_token(allow_session=True, scope="read")
def incident_json(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
    # Redacted again on the way out: rows stored before a redaction pattern existed do not leak either.
    return JsonResponse(redact_value(incident_facts(incident, request)))


def incident_facts(incident: Incident, request: HttpRequest | None = None) -> dict[str, Any]:
    """Everything the incident page shows, as plain data (same queries as the page, bounded)."""

    def url(path: str) -> str:
        return request.build_absolute_uri(path) if request is not None else path

    return {
        **_incident(incident, url),
        "subjects": _subjects(incident, url),
        "alerts": _alerts(incident),
        **_observations(incident),
        "hypotheses": _hypotheses(incident),
        "actions": _actions(incident),
        "diagnoses": _diagnoses(incident),
        "handoff_notes": _handoff_notes(incident),
    }


def _incident(incident: Incident, url: Callable[[str], str]) -> dict[str, Any]:
    now = timezone.now()
    return {
        "id": incident.pk,
        "url": url(incident.get_absolute_url()),
        "title": incident.title,
        "status": incident.status,
        "severity": incident.severity,
        "cluster": incident.cluster.name if incident.cluster else None,
        "onset": format_t_or_none(incident.onset),
        "window": {
            "start": format_t_or_none(incident.window_start),
            "end": format_t_or_none(incident.window_end),
        },
        "resolved_at": format_t_or_none(incident.resolved_at),
        "resolved_automatically": incident.auto_resolved,
        "all_clear_since": format_t_or_none(incident.all_clear_at),
        # onset → resolution, or → now while unresolved (the incident page shows the same)
        "duration_s": int(incident.duration_at(now).total_seconds()),
        "ongoing": incident.ended_at(now) is None,
        "owner": incident.owner,
        "unresolved_subject": incident.unresolved_subject,
        "collection": {
            "state": incident.collection_state,
            "collected_at": format_t_or_none(incident.collected_at),
        },
        "related_incidents": list(incident.related.values_list("id", flat=True)),
    }


def _subjects(incident: Incident, url: Callable[[str], str]) -> list[dict[str, Any]]:
    subjects = IncidentSubject.objects.filter(incident=incident).select_related("entity", "entity__cluster")
    return [
        {
            "kind": s.entity.kind,
            "cluster": s.entity.cluster.name,
            "namespace": s.entity.namespace,
            "name": s.entity.name,
            "role": s.role,
            "url": url(s.entity.get_absolute_url()),
        }
        for s in subjects
    ]


def _alerts(incident: Incident) -> list[dict[str, Any]]:
    return [
        {
            "id": a.pk,
            "name": a.name,
            "status": a.status,
            "severity": a.severity,
            "fingerprint": a.fingerprint,
            "labels": a.labels,
            "annotations": a.annotations,
            "starts_at": format_t_or_none(a.starts_at),
            "ends_at": format_t_or_none(a.ends_at),
        }
        for a in incident.alerts.order_by("starts_at", "id")
    ]


def _observations(incident: Incident) -> dict[str, Any]:
    """``observations``, the first MAX_API_OBSERVATIONS, and ``observations_truncated``."""
    observations = list(incident.observations.order_by("observed_at", "id")[: MAX_API_OBSERVATIONS + 1])
    return {
        "observations": [
            {
                "id": o.pk,
                "kind": o.kind,
                "source": o.source,
                "locator": o.locator,
                "observed_at": format_t_or_none(o.observed_at),
                "collected_at": format_t_or_none(o.collected_at),
                "summary": o.summary,
                "error": o.error or None,
                "entity_id": o.entity_id,
                "content": o.content,
            }
            for o in observations[:MAX_API_OBSERVATIONS]
        ],
        "observations_truncated": len(observations) > MAX_API_OBSERVATIONS,
    }


def _hypotheses(incident: Incident) -> list[dict[str, Any]]:
    return [
        {
            "id": h.pk,
            "code": h.code,
            "statement": h.statement,
            "status": h.status,
            "confidence": h.confidence,
            "rank": h.rank,
            "scope": h.scope,
            "why": h.why,
            "next_questions": h.next_questions,
            "evidence": [{"observation": c.observation_id, "role": c.role} for c in h.citation_set.all()],
            "actions": [a.pk for a in h.actions.all()],
        }
        for h in incident.hypotheses.current().prefetch_related("citation_set", "actions")
    ]


def _actions(incident: Incident) -> list[dict[str, Any]]:
    return [
        {
            "id": a.pk,
            "hypothesis": a.hypothesis_id,
            "title": a.title,
            "command": a.command,
            "impact": a.impact,
            "verify": a.verify,
            "rollback": a.rollback,
            "rank": a.rank,
        }
        for a in incident.actions.current()
    ]


def _diagnoses(incident: Incident) -> list[dict[str, Any]]:
    runs = list(incident.diagnoses.order_by("at", "id"))
    return [
        {
            "at": format_t_or_none(r.at),
            "made_at": format_t_or_none(r.made_at),
            "trigger": r.trigger,
            "top": r.top_code or None,
            "top_statement": r.top_statement,
            "supported": r.supported,
            "current": r is runs[-1],
        }
        for r in runs
    ]


def _handoff_notes(incident: Incident) -> list[dict[str, Any]]:
    return [
        {
            "id": n.pk,
            "author": n.author_name,
            "created": format_t_or_none(n.created),
            "updated": format_t_or_none(n.updated),
            "summary": n.summary,
            "checked": n.checked,
            "missing": n.missing,
            "next_steps": n.next_steps,
            "owner": n.owner,
        }
        for n in incident.handoffs.all()
    ]
