"""Diagnose an incident: load observations and inventory as of t, run the pure checks, persist the hypotheses.

Not pure (it reads and writes the database); everything it decides is decided
in ``incidents.diagnosis``. Persistence replaces the incident's previous
hypotheses and actions in one transaction, stores the computed facts it cites
as Observations (source "inventory"), and enforces "no citation, no
hypothesis" in :func:`save_hypothesis`, the only writer of Hypothesis rows in
the pipeline.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from collectors.models import Entity
from collectors.sources.redact import redact_text, redact_value
from incidents.diagnose_input import default_t, load_incident_input, load_job_input
from incidents.diagnosis.checks import Diagnosis, run_checks
from incidents.diagnosis.types import (
    ActionDraft,
    Cite,
    Derived,
    DiagnosisInput,
    Finding,
    Ref,
)
from incidents.models import (
    Citation,
    Hypothesis,
    Incident,
    Observation,
    ProposedAction,
)

logger = logging.getLogger(__name__)

__all__ = [
    "NoEvidence",
    "default_t",
    "diagnose_incident",
    "load_incident_input",
    "load_job_input",
    "save_hypothesis",
]


class NoEvidence(ValueError):
    """A hypothesis without a single cited observation (DESIGN §8: no citation, no hypothesis)."""


#
# Entry points
#
def diagnose_incident(incident_id: int, t: datetime | None = None) -> list[Hypothesis]:
    """(Re)diagnose the incident at t (default: the newest inventory moment within its window)."""
    incident = Incident.objects.select_related("cluster").get(pk=incident_id)
    di = load_incident_input(incident, t)
    result = run_checks(di)
    saved = persist(incident, di, result)
    logger.info("incident %s diagnosed at %s: %s", incident_id, di.t, [h.code for h in saved])
    return saved


#
# Persistence
#
def persist(incident: Incident, di: DiagnosisInput, result: Diagnosis) -> list[Hypothesis]:
    with transaction.atomic():
        ProposedAction.objects.filter(incident=incident).delete()
        Hypothesis.objects.filter(incident=incident).delete()
        derived_ids = _store_derived(incident, di, result.findings)
        saved: list[Hypothesis] = []
        by_code: dict[str, Hypothesis] = {}
        for rank, f in enumerate(result.findings, start=1):
            evidence = [(_cite_id(c, derived_ids), "supports") for c in f.supports]
            evidence += [(_cite_id(c, derived_ids), "refutes") for c in f.refutes]
            h = save_hypothesis(
                incident,
                code=f.code,
                statement=f.statement,
                status=f.status,
                confidence=f.confidence,
                rank=rank,
                next_questions=f.next_questions,
                why=f.why,
                subject=_entity(incident, f.subject),
                evidence=evidence,
            )
            saved.append(h)
            by_code.setdefault(f.code, h)
        save_actions(incident, result.actions, by_code)
    return saved


def save_hypothesis(
    incident: Incident,
    *,
    code: str,
    statement: str,
    status: str,
    confidence: float,
    rank: int,
    evidence: list[tuple[int, str]],
    next_questions: list[str] | None = None,
    why: str = "",
    subject: Entity | None = None,
) -> Hypothesis:
    """Create a hypothesis with its citations; refuses one without evidence or citing another incident's facts."""
    ids = [oid for oid, _ in evidence if oid]
    if not ids:
        raise NoEvidence(f"hypothesis {code!r} cites no observation: no citation, no hypothesis")
    known = set(Observation.objects.filter(incident=incident, pk__in=ids).values_list("pk", flat=True))
    if not known:
        raise NoEvidence(f"hypothesis {code!r} cites no observation of incident {incident.pk}")
    if status not in ("supported", "refuted", "unverified"):
        raise ValueError(f"status must be supported, refuted or unverified, not {status!r}")
    h = Hypothesis(
        incident=incident,
        code=code,
        statement=redact_text(statement),
        status=status,
        confidence=max(0.0, min(float(confidence), 1.0)),
        rank=rank,
        next_questions=redact_value(next_questions or []),
        why=redact_text(why),
        subject=subject,
    )
    h.full_clean(exclude=["incident", "subject", "next_questions", "why"])
    h.save()
    seen: set[int] = set()
    rows = []
    for oid, role in evidence:
        if oid in known and oid not in seen:
            seen.add(oid)
            rows.append(Citation(hypothesis=h, observation_id=oid, role=role))
    Citation.objects.bulk_create(rows)
    return h


def save_actions(incident: Incident, actions: list[ActionDraft], by_code: dict[str, Hypothesis]) -> None:
    ProposedAction.objects.bulk_create(
        [
            ProposedAction(
                incident=incident,
                hypothesis=by_code.get(a.code),
                title=redact_text(a.title[:300]),
                command=redact_text(a.command),
                impact=redact_text(a.impact),
                verify=redact_text(a.verify),
                rollback=redact_text(a.rollback),
                rank=i,
            )
            for i, a in enumerate(actions, start=1)
        ]
    )


def _cite_id(c: Cite, derived_ids: dict[str, int]) -> int:
    return c if isinstance(c, int) else derived_ids.get(c.key, 0)


def _derived_key(d: Derived) -> str:
    return "dx:" + hashlib.sha1(d.key.encode()).hexdigest()


def _store_derived(incident: Incident, di: DiagnosisInput, findings: list[Finding]) -> dict[str, int]:
    """Store every computed fact the findings cite as an Observation (idempotent on its dedup key)."""
    facts: dict[str, Derived] = {}
    for f in findings:
        for c in f.cites:
            if isinstance(c, Derived):
                facts.setdefault(c.key, c)
    if not facts:
        return {}
    keys = {k: _derived_key(d) for k, d in facts.items()}
    existing = {
        o.dedup_key: o for o in Observation.objects.filter(incident=incident, dedup_key__in=keys.values())
    }
    now = timezone.now()
    entities = _entities_for(incident, [d.entity for d in facts.values() if d.entity])
    out: dict[str, int] = {}
    for k, d in facts.items():
        content = redact_value(_jsonable(d.content))
        summary = redact_text(d.summary[:500])
        obs = existing.get(keys[k])
        if obs is None:
            obs = Observation.objects.create(
                incident=incident,
                entity=entities.get(d.entity) if d.entity else None,
                source=d.source,
                kind=d.kind,
                locator=d.locator[:1000],
                observed_at=_aware(d.observed_at, di.t),
                collected_at=now,
                content=content,
                summary=summary,
                dedup_key=keys[k],
            )
        elif obs.content != content:
            Observation.objects.filter(pk=obs.pk).update(content=content, summary=summary, collected_at=now)
        out[k] = obs.pk
    return out


def _entities_for(incident: Incident, refs: list[Ref]) -> dict[Ref, Entity]:
    if not refs or incident.cluster_id is None:
        return {}
    q = Q()
    for r in set(refs):
        q |= Q(kind=r.kind, name=r.name, namespace=r.namespace)
    return {
        Ref(e.kind, e.name, e.namespace): e for e in Entity.objects.filter(q, cluster_id=incident.cluster_id)
    }


def _entity(incident: Incident, ref: Ref | None) -> Entity | None:
    if ref is None:
        return None
    return _entities_for(incident, [ref]).get(ref)


def _aware(t: datetime | None, fallback: datetime) -> datetime:
    if t is None or t == datetime.min:
        return fallback
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _jsonable(value: Any) -> Any:
    """Derived content may hold datetimes and Refs; store them as ISO strings and labels."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, Ref):
        return {"kind": value.kind, "namespace": value.namespace, "name": value.name}
    return value
