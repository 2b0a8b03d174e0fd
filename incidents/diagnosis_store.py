"""Store a diagnosis: the run for its moment, its hypotheses with their citations, the actions it proposes, and
the computed facts it cites as Observations (source "inventory").

Persisting a new moment marks the previous runs' hypotheses and actions superseded instead of deleting them;
the same moment again (more evidence) replaces that run. "No citation, no hypothesis" (docs/design.md §8) is
enforced in :func:`save_hypothesis`, the only writer of Hypothesis rows in the pipeline.
"""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from collectors.models import Entity
from collectors.sources.redact import redact_text, redact_value
from incidents import inline_worker, problems, titles
from incidents.diagnosis.checks import Diagnosis
from incidents.diagnosis.types import ActionDraft, Cite, Derived, DiagnosisInput, Finding, Ref
from incidents.models import Citation, DiagnosisRun, Hypothesis, Incident, Observation, ProposedAction


class NoEvidence(ValueError):
    """A hypothesis without a single cited observation (docs/design.md §8: no citation, no hypothesis)."""


def persist(
    incident: Incident, di: DiagnosisInput, result: Diagnosis, trigger: str = "manual"
) -> list[Hypothesis]:
    with inline_worker.serialized(), transaction.atomic():  # on SQLite, one writer per process
        # The incident's runs' moments, once: whether this moment was diagnosed, whether it is the first run,
        # whether a later moment was.
        runs = list(
            DiagnosisRun.objects.filter(incident=incident).order_by("id").values_list("pk", "at", "trigger")
        )
        same = [pk for pk, at, _ in runs if at == di.t]
        if same:  # the same moment again (more evidence): this run replaces it
            trigger = next(tr for _, at, tr in runs if at == di.t) or trigger
            DiagnosisRun.objects.filter(pk__in=same).delete()
        others = [at for _, at, _ in runs if at != di.t]
        if di.t <= incident.onset and not others:
            trigger = "onset"  # the first run describing the onset, whatever asked for it
        causes = [f for f in result.findings if f.scope == "cause"]
        top = next((f for f in causes if f.supported), None)
        top_statement = redact_text(top.statement) if top else ""
        # the title as this run tells it ("<subject> <symptom>: <top cause>"), for pages where it is in force
        title = titles.title_for(incident, top.code if top else "", top_statement) or incident.title
        run = DiagnosisRun.objects.create(
            incident=incident,
            at=di.t,
            made_at=timezone.now(),
            trigger=trigger,
            title=title[:300],
            top_code=top.code if top else "",
            top_statement=top_statement,
            cause_key=problems.cause_key(top),
            supported=sum(1 for f in causes if f.supported),
            checked=sorted({f.code for f in causes}),
        )
        derived_ids = store_derived(incident, di, result.findings)
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
                run=run,
                scope=f.scope,
            )
            saved.append(h)
            if f.scope == "cause":
                by_code.setdefault(f.code, h)
        save_actions(incident, result.actions, by_code, run=run)
        _mark_current(incident)
        # An open incident's title follows its latest run: this one, unless a later moment was diagnosed before.
        if any(at > run.at for at in others):
            titles.refresh_title(incident)
        elif run.title != incident.title:
            Incident.objects.filter(pk=incident.pk).update(title=run.title)
            incident.title = run.title
    return saved


def _mark_current(incident: Incident) -> None:
    """The run describing the latest moment is the current one; every other run's rows are superseded."""
    current = (
        DiagnosisRun.objects.filter(incident=incident).order_by("-at", "-id").values_list("pk", flat=True)
    )
    current_id = current.first()
    key = (
        DiagnosisRun.objects.filter(pk=current_id).values_list("cause_key", flat=True).first()
        if current_id is not None
        else None
    ) or ""
    Incident.objects.filter(pk=incident.pk).exclude(cause_key=key).update(cause_key=key)
    incident.cause_key = key
    for model in (Hypothesis, ProposedAction):
        model.objects.filter(incident=incident, superseded=False).exclude(run_id=current_id).update(
            superseded=True
        )
        model.objects.filter(incident=incident, run_id=current_id, superseded=True).update(superseded=False)


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
    run: DiagnosisRun | None = None,
    scope: str = "cause",
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
        run=run,
        scope=scope,
    )
    h.full_clean(exclude=["incident", "subject", "next_questions", "why", "run"])
    h.save()
    seen: set[int] = set()
    rows = []
    for oid, role in evidence:
        if oid in known and oid not in seen:
            seen.add(oid)
            rows.append(Citation(hypothesis=h, observation_id=oid, role=role))
    Citation.objects.bulk_create(rows)
    return h


def save_actions(
    incident: Incident,
    actions: list[ActionDraft],
    by_code: dict[str, Hypothesis],
    run: DiagnosisRun | None = None,
) -> None:
    ProposedAction.objects.bulk_create(
        [
            ProposedAction(
                incident=incident,
                run=run,
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


def store_derived(incident: Incident, di: DiagnosisInput, findings: list[Finding]) -> dict[str, int]:
    """Store every computed fact the findings cite as an Observation (idempotent on its dedup key)."""
    facts: dict[str, Derived] = {}
    for f in findings:
        for c in f.cites:
            if isinstance(c, Derived):
                facts.setdefault(c.key, c)
    if not facts:
        return {}
    _complete_partial(incident, di, facts)
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


def _complete_partial(incident: Incident, di: DiagnosisInput, facts: dict[str, Derived]) -> None:
    """A cited state the loader read by its hot keys only (``DiagnosisInput.partial``) is stored whole: one
    query for those cited, so the evidence shows the object as the inventory holds it at t."""
    wanted = {
        k: d
        for k, d in facts.items()
        if d.entity is not None and d.entity in di.partial and d.kind == f"{d.entity.kind}_state"
    }
    if not wanted or incident.cluster_id is None:
        return
    from collectors.models import EntityVersion

    q = Q()
    for ref in {d.entity for d in wanted.values() if d.entity is not None}:
        q |= Q(entity__kind=ref.kind, entity__name=ref.name, entity__namespace=ref.namespace)
    full = {
        Ref(kind, name, ns): state
        for kind, name, ns, state in EntityVersion.objects.as_of(di.t)
        .filter(q, cluster_id=incident.cluster_id, deleted=False)
        .values_list("entity__kind", "entity__name", "entity__namespace", "state")
    }
    for k, d in wanted.items():
        if d.entity in full:
            facts[k] = dataclasses.replace(d, content={**d.content, "state": full[d.entity] or {}})


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
