"""The API's webhooks: Alertmanager's notifications become alerts, external changes join the change history.

- ``POST /api/v1/alerts/alertmanager``: the Alertmanager webhook (version "4").
- ``POST /api/v1/changes``: an external change (CI/CD, a scheduler admin UI) joins the change history.

Both take an ``ingest`` token (web/incidents/api.py) and read their body with ``read_json``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_POST

from collectors.models import NAMESPACED_KINDS, Change, Cluster, Entity
from collectors.sources.redact import redact_value
from incidents import intake
from incidents.intake import PayloadError, payload_time
from rcaweb import kinds
from web.incidents.api import bearer_token, error, read_json

logger = logging.getLogger(__name__)


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

CHANGE_KINDS = tuple(k.name for k in kinds.KINDS if k.external_changes)  # the registry (rcaweb/kinds.py)


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
