"""The JSON API (docs/conventions.md §17): plain views behind ``@bearer_token``, ``{"error": ...}`` on 400/401/413.

- ``POST /api/v1/alerts/alertmanager``: the Alertmanager webhook (version "4").
- ``POST /api/v1/changes``: an external change (CI/CD, a scheduler admin UI) joins the change history.
- ``GET /api/v1/incidents/<id>``: the incident page's facts as JSON (token or session).
"""

from __future__ import annotations

import hmac
import json
import logging
import math
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from collectors.models import NAMESPACED_KINDS, Change, Cluster, Entity
from collectors.sources.redact import redact_value
from incidents import intake
from incidents.intake import PayloadError, payload_time
from incidents.models import Incident
from rcaweb import kinds
from rcaweb.timestamps import format_t_or_none

logger = logging.getLogger(__name__)

CHANGE_KINDS = tuple(k.name for k in kinds.KINDS if k.external_changes)  # the registry (rcaweb/kinds.py)


def error(message: str, status: int) -> JsonResponse:
    resp = JsonResponse({"error": message}, status=status)
    if status == 401:
        resp["WWW-Authenticate"] = 'Bearer realm="rcaweb"'
    return resp


def token_ok(header: str, tokens: list[str] | None = None) -> bool:
    """``Bearer <token>`` (Alertmanager's ``http_config.authorization``), or Basic with the token as password.

    Every configured token is compared, in constant time, so timing says nothing about which one matched.
    """
    scheme, _, value = (header or "").strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "basic":
        import base64
        import binascii

        try:
            value = base64.b64decode(value, validate=True).decode("utf-8").partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return False
    elif scheme.lower() != "bearer":
        return False
    if not value:
        return False
    matched = False
    for token in settings.WEBHOOK_TOKENS if tokens is None else tokens:
        matched |= hmac.compare_digest(value.encode(), token.encode())
    return matched


def bearer_token(
    view: Callable[..., HttpResponse] | None = None, *, allow_session: bool = False, scope: str = "ingest"
) -> Any:
    """401 unless the request carries a valid token of ``scope`` (or, with ``allow_session``, a logged-in user).

    Scopes: ``ingest`` (alerts and changes: ``RCAWEB_WEBHOOK_TOKEN``) and ``read`` (the incident JSON:
    ``RCAWEB_API_TOKEN``). A token of one scope is wrong for the other.
    """
    setting, env = {
        "ingest": ("WEBHOOK_TOKENS", "RCAWEB_WEBHOOK_TOKEN"),
        "read": ("API_TOKENS", "RCAWEB_API_TOKEN"),
    }[scope]

    def decorate(fn: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(fn)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            session_ok = allow_session and request.user.is_authenticated
            tokens = getattr(settings, setting)
            if not session_ok and not token_ok(request.headers.get("Authorization", ""), tokens):
                what = "missing" if not request.headers.get("Authorization") else "wrong"
                return error(f"authorization {what}: send 'Authorization: Bearer <{env}>'", 401)
            return fn(request, *args, **kwargs)

        # the token is the authentication (a session is enough only with allow_session, checked above)
        return login_not_required(csrf_exempt(wrapper))

    return decorate(view) if view is not None else decorate


class _NotFinite:
    """A number no float holds, kept as its text while the body is parsed so that the check after the parse can
    name its field: ``NaN``, ``Infinity`` and ``-Infinity`` (Python's json reads them; JSON and PostgreSQL's
    jsonb, where an alert's unknown keys are kept, do not), and a number that overflows a float (``1e400``,
    which Python reads as infinity, stored as "Infinity" or refused by the database)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def error(self, path: str) -> PayloadError:
        if self.text in ("NaN", "Infinity", "-Infinity"):
            return PayloadError(path, f"{self.text} is not a JSON number")
        return PayloadError(path, f"{self.text[:40]} is out of range: a number must fit a 64-bit float")


def _first_not_finite(value: Any) -> PayloadError | None:
    """The error naming the first :class:`_NotFinite` of a parsed body, by field path (``alerts[0].x``), if any.

    Iterative: a body nested as deep as the parser allows must not overflow the stack here either.
    """
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _NotFinite):
            return item.error(path)
        if isinstance(item, dict):
            stack.extend((f"{path}.{k[:40]}" if path else k[:40], v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return None


def read_json(request: HttpRequest) -> Any:
    """The body as JSON; raises PayloadError with 413 (over DATA_UPLOAD_MAX_MEMORY_SIZE) or 400."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        body = request.body
    except RequestDataTooBig:
        raise PayloadError("", f"body larger than {limit} bytes", status=413)
    if limit and len(body) > limit:  # chunked bodies carry no Content-Length
        raise PayloadError("", f"body larger than {limit} bytes", status=413)
    # Content-Type is not checked: Alertmanager sends application/json, but curl tests often do not.
    found: list[_NotFinite] = []

    def not_finite(text: str) -> _NotFinite:
        found.append(_NotFinite(text))
        return found[-1]

    def number(text: str) -> float | _NotFinite:
        value = float(text)
        return value if math.isfinite(value) else not_finite(text)

    try:
        payload = json.loads(body, parse_constant=not_finite, parse_float=number)
    except RecursionError:
        raise PayloadError("", "JSON nested too deeply")
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError("", f"body is not JSON: {exc}")
    if found:  # only then is the body walked: an ordinary notification pays nothing
        raise _first_not_finite(payload) or found[0].error("")
    return payload


@require_POST
@bearer_token
def alertmanager_webhook(request: HttpRequest) -> HttpResponse:
    try:
        payload = read_json(request)
        result = intake.ingest_alertmanager(payload)
    except PayloadError as exc:
        logger.info("rejected Alertmanager notification: %s", exc)
        return error(str(exc), exc.status)
    return JsonResponse({"status": "ok", **result.as_dict()})


#
# External changes
#


def _field(payload: dict, key: str, *, required: bool = False, max_len: int = 500) -> str:
    value = payload.get(key)
    if value is None or value == "":
        if required:
            raise PayloadError(key, "missing")
        return ""
    if not isinstance(value, str):
        raise PayloadError(key, "expected a string")
    if len(value) > max_len:
        raise PayloadError(key, f"longer than {max_len} characters")
    return value


def validate_change(payload: Any) -> dict[str, Any]:
    """``{"time", "cluster", "target": {"kind", "namespace", "name"}, "what", "actor", "source", "link",
    "field"?, "old"?, "new"?}``."""
    if not isinstance(payload, dict):
        raise PayloadError("", "expected a JSON object")
    try:
        payload = intake.clean_text(payload)
    except RecursionError:
        raise PayloadError("", "JSON nested too deeply")
    out: dict[str, Any] = {
        "time": payload_time(payload.get("time"), "time"),
        "cluster": _field(payload, "cluster", required=True, max_len=63),
        "what": _field(payload, "what", required=True),
        "actor": _field(payload, "actor", max_len=200),
        "source": _field(payload, "source", max_len=100),
        "link": _field(payload, "link", max_len=200),
        "field": _field(payload, "field", max_len=200) or "external",
    }
    if out["link"] and not out["link"].startswith(("http://", "https://")):
        raise PayloadError("link", "expected an http(s) URL")
    target = payload.get("target")
    if not isinstance(target, dict):
        raise PayloadError("target", "expected an object {kind, namespace, name}")
    kind = _field(target, "kind", required=True, max_len=16)
    if kind not in CHANGE_KINDS:
        raise PayloadError("target.kind", f"expected one of {', '.join(CHANGE_KINDS)}, got {kind!r}")
    try:
        name = _field(target, "name", required=True, max_len=253)
        namespace = _field(target, "namespace", max_len=253)
    except PayloadError as exc:
        raise PayloadError(f"target.{exc.path}", str(exc).split(": ", 1)[-1])
    if kind in NAMESPACED_KINDS and not namespace:
        raise PayloadError("target.namespace", f"a {kind} needs its namespace")
    out["target"] = {"kind": kind, "namespace": namespace if kind in NAMESPACED_KINDS else "", "name": name}
    for key in ("old", "new"):
        value = payload.get(key)
        if value is not None and len(json.dumps(value)) > 4000:
            raise PayloadError(key, "larger than 4000 characters of JSON")
        out[key] = value
    return out


def record_change(data: dict[str, Any]) -> tuple[Change, bool]:
    """Store an external change on the shared change axis; an identical resend is not stored twice."""
    cluster = Cluster.objects.filter(name=data["cluster"]).first()
    if cluster is None:
        raise PayloadError("cluster", f"unknown cluster {data['cluster']!r}")
    t = data["target"]
    entity = Entity.objects.filter(
        cluster=cluster, kind=t["kind"], namespace=t["namespace"], name=t["name"]
    ).first()
    target_text = f"{t['kind']} {t['namespace'] + '/' if t['namespace'] else ''}{t['name']}"
    # Every field a sender writes is redacted before it is stored or looked up (a resend must find the stored
    # row): a link's userinfo and ?token=, a secret in the actor or summary, and old/new whole when the field
    # names a secret ({"field": "spec.auth.password", "old": …}: redact_value masks a named field's values).
    texts = ("what", "actor", "source", "link", "field", "old", "new")
    data = {**data, **redact_value({k: data[k] for k in texts})}
    summary = data["what"] if entity else f"{data['what']} (target {target_text}, not in the inventory)"
    if data["source"]:
        summary = f"{summary} [via {data['source']}]"
    with transaction.atomic():
        return Change.objects.get_or_create(
            cluster=cluster,
            entity=entity,
            kind=t["kind"],
            time=data["time"],
            field=data["field"][:200],
            source="external",
            actor=data["actor"],
            summary=summary[:500],
            link=data["link"],
            defaults={"old": data["old"], "new": data["new"]},
        )


@require_POST
@bearer_token
def external_change(request: HttpRequest) -> HttpResponse:
    try:
        data = validate_change(read_json(request))
        change, created = record_change(data)
    except PayloadError as exc:
        return error(str(exc), exc.status)
    return JsonResponse(
        {"status": "ok", "id": change.pk, "created": created, "entity": change.entity_id},
        status=201 if created else 200,
    )


#
# Incidents
#


@require_GET
@bearer_token(allow_session=True, scope="read")
def incident_json(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
    # Redacted again on the way out: rows stored before a redaction pattern existed do not leak either.
    return JsonResponse(redact_value(incident_facts(incident, request)))


MAX_API_OBSERVATIONS = 2000


def incident_facts(incident: Incident, request: HttpRequest | None = None) -> dict[str, Any]:
    """Everything the incident page shows, as plain data (same queries as the page, bounded)."""
    from incidents.models import IncidentSubject

    def url(path: str) -> str:
        return request.build_absolute_uri(path) if request is not None else path

    subjects = IncidentSubject.objects.filter(incident=incident).select_related("entity", "entity__cluster")
    observations = list(incident.observations.order_by("observed_at", "id")[: MAX_API_OBSERVATIONS + 1])
    hypotheses = incident.hypotheses.current().prefetch_related("citation_set", "actions")
    runs = list(incident.diagnoses.order_by("at", "id"))
    now = timezone.now()
    return {
        "id": incident.pk,
        "url": url(incident.get_absolute_url()),
        "title": incident.title,
        "status": incident.status,
        "severity": incident.severity,
        "cluster": incident.cluster.name if incident.cluster else None,
        "onset": format_t_or_none(incident.onset),
        "window": {"start": format_t_or_none(incident.window_start), "end": format_t_or_none(incident.window_end)},
        "resolved_at": format_t_or_none(incident.resolved_at),
        "resolved_automatically": incident.auto_resolved,
        "all_clear_since": format_t_or_none(incident.all_clear_at),
        # onset → resolution, or → now while unresolved (the incident page shows the same)
        "duration_s": int(incident.duration_at(now).total_seconds()),
        "ongoing": incident.ended_at(now) is None,
        "owner": incident.owner,
        "unresolved_subject": incident.unresolved_subject,
        "collection": {"state": incident.collection_state, "collected_at": format_t_or_none(incident.collected_at)},
        "related_incidents": list(incident.related.values_list("id", flat=True)),
        "subjects": [
            {
                "kind": s.entity.kind,
                "cluster": s.entity.cluster.name,
                "namespace": s.entity.namespace,
                "name": s.entity.name,
                "role": s.role,
                "url": url(s.entity.get_absolute_url()),
            }
            for s in subjects
        ],
        "alerts": [
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
        ],
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
        "hypotheses": [
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
            for h in hypotheses
        ],
        "actions": [
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
        ],
        "diagnoses": [
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
        ],
        "handoff_notes": [
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
        ],
    }
