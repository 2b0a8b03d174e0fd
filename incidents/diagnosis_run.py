"""Diagnose an incident: load observations and inventory as of t, run the pure checks, persist the hypotheses.

Not pure (it reads and writes the database); everything it decides is decided
in ``incidents.diagnosis``. Each diagnosis describes one moment: the onset (the
first alert's firing time), then the firing time of every alert that joins, then
the moments a subject changed while the incident still fires
(:func:`rediagnose_changed`). Every run is kept (``DiagnosisRun``): persisting a
new moment marks the previous hypotheses and actions superseded instead of
deleting them; re-diagnosing the same moment (more evidence) replaces that run.
Storing a run, the computed facts it cites (Observations, source "inventory") and
"no citation, no hypothesis" (:func:`save_hypothesis`, the only writer of
Hypothesis rows in the pipeline) are ``incidents.diagnosis_store``.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import OperationalError
from django.db.models import Q
from django.utils import timezone

from collectors.models import Entity
from collectors.sources.redact import redact_text
from incidents import batch_reads
from incidents.diagnosis import material_change
from incidents.diagnosis.checks import Diagnosis, run_checks
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.types import (
    DiagnosisInput,
)
from incidents.diagnosis_input import default_t, diagnosis_moment, load_incident_input, load_job_input
from incidents.diagnosis_store import NoEvidence, persist, save_hypothesis
from incidents.models import (
    DiagnosisRun,
    Hypothesis,
    Incident,
    ProposedAction,
)

logger = logging.getLogger(__name__)

__all__ = [
    "NoEvidence",
    "default_t",
    "diagnose_incident",
    "diagnosis_moment",
    "load_incident_input",
    "load_job_input",
    "rediagnose_changed",
    "pick_run",
    "run_for",
    "save_hypothesis",
]


_gc_lock = threading.Lock()
_gc_holders = 0  # diagnoses running in this process (threads) while the collector is held off
_gc_was_enabled = False


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Hold off Python's cycle collector while one diagnosis loads and checks its input.

    A diagnosis at 1,000 nodes builds ~60,000 small objects (states, rows, index lists) beside the fleet rows the
    process keeps (``snapshot``); each allocation burst set off collections that walked all of them: half of
    the input's CPU time (0.40 -> 0.17 s warm at 1,000 nodes). Refcounting still frees the input; the collector
    is restored as it was when the last diagnosis running in the process ends.
    """
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


#
# Entry points
#
def diagnose_incident(
    incident_id: int, t: datetime | None = None, trigger: str | None = None, only_if_changed: bool = False
) -> list[Hypothesis]:
    """Diagnose the incident as of t (default: the firing time of its newest alert, see ``diagnosis_moment``).

    ``only_if_changed``: keep the result as a new run only when it names another cause than the latest
    run (else mark the latest run as checked up to t and return nothing); "no cause found" after a cause
    is the symptom ending, not a new answer.
    """
    incident = Incident.objects.select_related("cluster").get(pk=incident_id)
    if t is None:
        t, moment_trigger = diagnosis_moment(incident)
        trigger = trigger or moment_trigger
    with no_cycle_collection():
        di = load_incident_input(incident, t)
        result = run_checks(di)
    if only_if_changed:
        last = DiagnosisRun.objects.filter(incident=incident).order_by("-at", "-id").first()
        new, old = _answer(result), _run_answer(last) if last is not None else None
        # Nothing supported where a cause was found is the symptom ending (the node is back, the job
        # started), seen before its alert's resolution arrived: the last answer stands. Not while a subject
        # job still waits at t: then the cause it was given has cleared and something else holds it, and a
        # cleared fault must not stay "the cause".
        ended = not new[0] and bool(old and old[0]) and not _still_waiting(di)
        if last is not None and old is not None and (new == old or ended):
            DiagnosisRun.objects.filter(pk=last.pk).update(seen_until=t)
            return []
    saved = persist(incident, di, result, trigger=trigger or "manual")
    logger.info("incident %s diagnosed at %s: %s", incident_id, di.t, [h.code for h in saved])
    return saved


def _still_waiting(di: DiagnosisInput) -> bool:
    """Whether a subject job is still waiting at the input's moment (its symptom goes on)."""
    for ref in di.subjects:
        if ref.kind == "job":
            job = di.find("job", ref.name, ref.namespace)
            if job is not None and is_pending(job) and not any(p.get("node") for p in di.pods_of_job(job)):
                return True
    return False


# A subject change that the alert outlives by SETTLE did not end the symptom.
SETTLE = timedelta(minutes=10)
SPACING = timedelta(minutes=15)  # at most one new moment per incident per this much cluster time
REDIAGNOSE_LIMIT = 200
# A workload's incident is checked again this often even when nothing of its own changed (the queue moved).
RECHECK = timedelta(minutes=30)


def rediagnose_changed(now: datetime | None = None, cluster_id: int | None = None) -> int:
    """Diagnose again every firing incident whose subjects changed materially since its latest diagnosis;
    returns how many were diagnosed.

    "Changed" is a new inventory version of a subject, or of the queue or project linked to the incident (a
    quota raised while the job still waits, a node back Ready while its GPU is still missing), after the
    moment the latest run describes, and at least ``SETTLE`` before ``now`` while an alert of the incident
    still fires: a change that ended the symptom (the job started, so its alert resolves) is not a new
    moment of the problem. Only a *material* change counts (``incidents.diagnosis.material_change``: not a new
    timestamp, the counts in a scheduler message, a restart counter); an immaterial one marks the latest run
    as standing up to there without diagnosing. The new diagnosis describes the moment of that change, not
    "now", so a page at any t shows what was true then; it is kept as a new run only when its answer differs
    (another top cause, or other supported causes), else the latest run notes that it was checked up to
    there. At most one new moment per ``SPACING`` of cluster time: a change sooner after the latest run is
    diagnosed as of ``SPACING`` after it (a quota raised five minutes after the onset is not lost for want
    of a later change). Incidents whose alerts all resolved keep their last firing answer. Every incident's
    candidate versions are read in one query.
    """
    now = now or timezone.now()
    horizon = now - SETTLE
    due, latest = _due_incidents(horizon, cluster_id)
    if not due:
        return 0
    watched, waiting = _watched_entities(due, cluster_id)
    versions = _versions_since(watched, due, horizon)
    if versions is None:
        return 0
    # One batch: the fleet's history and changes are read once for the waiting jobs' incidents.
    with batch_reads.shared_reads():
        return _rediagnose_due(due, latest, watched, waiting, versions, horizon)


def _due_incidents(
    horizon: datetime, cluster_id: int | None
) -> tuple[dict[int, tuple[datetime, datetime]], dict[int, DiagnosisRun]]:
    """The firing incidents a new moment may be diagnosed for, each with the moment its answer was last
    known to stand (the base) and the earliest moment a new diagnosis may describe (SPACING after its latest
    run); and every such incident's latest run."""
    firing = Incident.objects.exclude(status="resolved").filter(alerts__status="firing")
    if cluster_id is not None:
        firing = firing.filter(cluster_id=cluster_id)
    ids = sorted(set(firing.values_list("pk", flat=True)))[:REDIAGNOSE_LIMIT]
    latest: dict[int, DiagnosisRun] = {}
    for run in DiagnosisRun.objects.filter(incident_id__in=ids).order_by("at", "id"):
        latest[run.incident_id] = run
    due: dict[int, tuple[datetime, datetime]] = {}
    for incident_id in ids:
        last = latest.get(incident_id)
        if last is None:
            continue  # never diagnosed yet: its evidence collection will
        base = max(last.at, last.seen_until or last.at)
        earliest = last.at + SPACING
        if max(base, earliest) <= horizon:
            due[incident_id] = (base, earliest)
    return due, latest


def _watched_entities(
    due: dict[int, tuple[datetime, datetime]], cluster_id: int | None
) -> tuple[dict[int, set[int]], set[int]]:
    """Per incident, the entities whose change may change its answer: its subjects, and the policy a subject
    job waits on (its queue and project: a quota raised while it still waits changes why it waits); and the
    incidents about a workload, whose queue moves around them without touching them."""
    from incidents.models import IncidentSubject

    # The policy entities as a subquery rather than a join on every link: a pending job's incident relates
    # hundreds of candidate nodes and GPUs, none of which is read here.
    policy = Entity.objects.filter(kind__in=("queue", "project", "department"))
    if cluster_id is not None:
        policy = policy.filter(cluster_id=cluster_id)
    watched: dict[int, set[int]] = {}
    waiting: set[int] = set()  # incidents about a workload: the queue around it moves without touching it
    for incident_id, entity_id, role, kind in (
        IncidentSubject.objects.filter(incident_id__in=due)
        .filter(Q(role="subject") | Q(entity_id__in=policy.values("pk")))
        .values_list("incident_id", "entity_id", "role", "entity__kind")
    ):
        watched.setdefault(incident_id, set()).add(entity_id)
        if role == "subject" and kind in ("job", "pod"):
            waiting.add(incident_id)
    return watched, waiting


def _versions_since(
    watched: dict[int, set[int]], due: dict[int, tuple[datetime, datetime]], horizon: datetime
) -> dict[int, list[tuple[datetime, str]]] | None:
    """Each watched entity's versions (start, material digest) from the earliest base that watches it up to
    the horizon, in one query; None when nothing is watched."""
    from collectors.models import EntityVersion

    # Each entity's versions from the earliest base that watches it up to the horizon, one query for all.
    start: dict[int, datetime] = {}
    for incident_id, entities in watched.items():
        for entity_id in entities:
            base = due[incident_id][0]
            start[entity_id] = min(start.get(entity_id, base), base)
    by_start: dict[datetime, list[int]] = {}
    for entity_id, moment in start.items():
        by_start.setdefault(moment, []).append(entity_id)
    if not by_start:
        return None
    reach = Q()
    for moment, entity_ids in by_start.items():
        reach |= Q(entity_id__in=entity_ids) & (Q(valid_to__isnull=True) | Q(valid_to__gt=moment))
    versions: dict[int, list[tuple[datetime, str]]] = {}
    for entity_id, valid_from, deleted, state in (
        EntityVersion.objects.filter(reach, valid_from__lte=horizon)
        .order_by("entity_id", "valid_from")
        .values_list("entity_id", "valid_from", "deleted", "state")
    ):
        versions.setdefault(entity_id, []).append((valid_from, material_change.digest(state, deleted)))
    return versions


def _rediagnose_due(
    due: dict[int, tuple[datetime, datetime]],
    latest: dict[int, DiagnosisRun],
    watched: dict[int, set[int]],
    waiting: set[int],
    versions: dict[int, list[tuple[datetime, str]]],
    horizon: datetime,
) -> int:
    """:func:`rediagnose_changed`'s pass over the incidents due (one batch of ``batch_reads``)."""
    done = 0
    for incident_id, (base, earliest) in due.items():
        newest: datetime | None = None  # the newest change in (base, horizon]
        moved = False  # a subject's state at that change differs materially from its state at the base
        for entity_id in watched.get(incident_id, ()):
            history = versions.get(entity_id) or []
            if not history:
                continue
            at_base = next((d for valid_from, d in reversed(history) if valid_from <= base), None)
            last_from, last_digest = history[-1]
            if last_from > base and (newest is None or last_from > newest):
                newest = last_from
            moved = moved or last_digest != at_base
        if newest is None or not moved:
            # Nothing of its own moved. A workload's answer also rests on what is around it (a fault it was
            # told to wait for clears, freed GPUs go to a job ahead, a job ahead starts): checked again once
            # every RECHECK of cluster time, kept as a new run only if the answer differs.
            if incident_id in waiting and base + RECHECK <= horizon:
                moment = max(horizon, earliest)
                if diagnose_incident(incident_id, moment, trigger="recheck", only_if_changed=True):
                    Incident.objects.filter(pk=incident_id).update(diagnosed_at=timezone.now())
                    done += 1
                continue
        if newest is None:
            continue
        if not moved:  # nothing the diagnosis reads as news: the latest answer stands up to there
            DiagnosisRun.objects.filter(pk=latest[incident_id].pk).update(seen_until=newest)
            continue
        moment = max(newest, earliest)  # <= horizon (due)
        if diagnose_incident(incident_id, moment, trigger="change", only_if_changed=True):
            Incident.objects.filter(pk=incident_id).update(diagnosed_at=timezone.now())
            done += 1
    return done


def _answer(result: Diagnosis) -> tuple[str, frozenset[str], tuple[str, ...]]:
    """What a new run must differ in to be kept: the top cause, the supported causes, the actions proposed
    (a node cordoned meanwhile changes what is left to do, not why)."""
    causes = [f for f in result.findings if f.scope == "cause" and f.supported]
    actions = tuple(redact_text(a.title[:300]) for a in result.actions)
    return (causes[0].code if causes else "", frozenset(f.code for f in causes), actions)


def _run_answer(run: DiagnosisRun) -> tuple[str, frozenset[str], tuple[str, ...]]:
    codes = Hypothesis.objects.filter(run=run, scope="cause", status="supported").values_list(
        "code", flat=True
    )
    actions = ProposedAction.objects.filter(run=run).order_by("rank", "id").values_list("title", flat=True)
    return (run.top_code, frozenset(codes), tuple(actions))


def after_sweep(sender: object = None, *, cluster: str, at: datetime, **kwargs: Any) -> None:
    """``collectors.signals.inventory_swept`` receiver: re-diagnose what changed, as of the sweep's moment."""
    from collectors.models import Cluster

    try:
        cluster_id = Cluster.objects.filter(name=cluster).values_list("pk", flat=True).first()
        if cluster_id is not None:
            rediagnose_changed(at, cluster_id)
    except OperationalError as exc:  # SQLite's one writer busy (the demo's intake): the next sweep retries
        logger.warning("re-diagnosis after the sweep of %s postponed to the next sweep: %s", cluster, exc)


def run_for(incident: Incident, t: datetime | None) -> DiagnosisRun | None:
    """The run a page at t shows: the latest made for a moment at or before t, else the first (onset) one."""
    return pick_run(list(DiagnosisRun.objects.filter(incident=incident).order_by("at", "id")), t)


def pick_run(runs: list[DiagnosisRun], t: datetime | None) -> DiagnosisRun | None:
    """:func:`run_for` over runs already read, oldest first."""
    if not runs:
        return None
    if t is None:
        return runs[-1]
    before = [r for r in runs if r.at <= t]
    return before[-1] if before else runs[0]
