"""Alerts become incidents: labels → subject entities → join an open incident or open one, link related ones.

``group_alert`` is the one function that decides; each rule is a small helper
named after it and tested on its own (tests/incidents/test_grouping.py).
Nothing is ever dropped: labels that name nothing in the inventory still open
an incident, with ``unresolved_subject`` saying which labels those were.

The rules by module: labels → entities (``labels``, ``lookups``, ``subjects``: rule 2), join, reopen or open
(``joining``: rules 3-5), related entities (``related``: rule 6), related incidents (``linking``, with what a
fault took away in ``room``: rule 7).
"""

from __future__ import annotations

from incidents import lifecycle, services
from incidents.diagnosis.capacity import Room
from incidents.grouping.joining import (
    EVIDENCE_LOOKBACK,
    escalate,
    find_open_incident,
    find_reopenable,
    normalize_severity,
    open_incident,
    open_unresolved,
    update_window,
)
from incidents.grouping.linking import MAX_RELATED_CANDIDATES, fault_nodes, link_related_incidents
from incidents.grouping.lookups import Lookups, gpu_by_index, resolve_cluster
from incidents.grouping.related import (
    MAX_CANDIDATE_NODES,
    MAX_RELATED,
    Attached,
    attach_subjects,
    attached,
    attached_to,
    candidate_nodes,
    gpus_of_nodes,
    related_entities,
)
from incidents.grouping.subjects import (
    WORKLOAD_GPU_ALERTS,
    Resolution,
    most_specific,
    resolve_subjects,
    workload_of,
)
from incidents.models import Alert, Incident


def group_alert(alert: Alert, *, lookups: Lookups | None = None) -> Incident:
    """Put ``alert`` into an incident (existing or new) and return it.

    ``lookups`` (a batch's prefetched clusters, entities and GPU versions, see :class:`Lookups`) only saves
    queries: the outcome is the same with or without it.

    Rules, in order:
      1. an alert already in an incident stays there (resends, resolutions) and only moves its window;
      2. its labels resolve to entities; the most specific are its subjects (GPU+node > pod/job > node >
         queue/project), the others are context (attached as related);
      3. it joins an unresolved incident of the same cluster that has one of those subjects (repeats of an
         alert on the same subject join its open incident, however long ago its alerts ended) — unless that
         incident was already over when this alert started (incidents.lifecycle, at the alert's start: the
         outcome does not depend on when the lifecycle's periodic check last ran);
      4. labels that resolved to nothing join an unresolved incident with the same unresolved labels;
      5. otherwise it reopens the incident of those subjects resolved at most RCAWEB_REOPEN_WINDOW before it
         started (audited), or a new incident opens at the alert's start;
      6. related entities (job → project, queue, pods, candidate nodes and their GPUs; node → GPUs, pods) attach;
      7. open incidents sharing a faulty node or GPU with this one are linked, when the fault took capacity
         away (the inventory shows it around the alert's start), shares a workload, or is both's subject.
    ``incident.needs_evidence`` is True when the incident is new or grew (collect evidence again).
    """
    if alert.incident_id:  # rule 1
        current = Incident.objects.get(pk=alert.incident_id)
        current.needs_evidence = update_window(current)
        return current
    res = resolve_subjects(alert, lookups)  # rule 2
    incident = find_open_incident(res, alert.starts_at)  # rule 3 and 4
    opened = False
    if incident is not None and lifecycle.resolve_if_over(incident, alert.starts_at):
        incident = None  # it was over before this alert: resolved as of then, and a re-fire from now on
    if incident is None:  # rule 5
        incident = find_reopenable(res, alert.starts_at)
        if incident is not None:
            services.reopen_for_alert(incident, alert, lifecycle.reopen_window())
            escalate(incident, alert)
        else:
            incident = open_incident(alert, res)
            opened = True
    else:
        escalate(incident, alert)
    Alert.objects.filter(pk=alert.pk).update(incident=incident)
    alert.incident = incident
    have: Attached = {} if opened else attached(incident)  # one read for rules 6 and 7
    related = res.context + related_entities(res.subjects, alert.starts_at, lookups)
    attach_subjects(incident, res.subjects + workload_of(alert, res, related), role="subject", have=have)
    attach_subjects(incident, related, role="related", have=have)  # rule 6
    link_related_incidents(incident, have, alert.starts_at)  # rule 7
    update_window(incident)
    if incident.all_clear_at is not None and incident.window_end is None:
        # A held incident flagged all clear is not over after all.
        services.withdraw_all_clear(incident, alert)
    incident.needs_evidence = True  # new, grown, or at least one more alert: all are new evidence
    return incident


__all__ = [
    "EVIDENCE_LOOKBACK",
    "MAX_CANDIDATE_NODES",
    "MAX_RELATED",
    "MAX_RELATED_CANDIDATES",
    "WORKLOAD_GPU_ALERTS",
    "Attached",
    "Lookups",
    "Resolution",
    "Room",
    "attach_subjects",
    "attached",
    "attached_to",
    "candidate_nodes",
    "escalate",
    "fault_nodes",
    "find_open_incident",
    "find_reopenable",
    "gpu_by_index",
    "gpus_of_nodes",
    "group_alert",
    "link_related_incidents",
    "most_specific",
    "normalize_severity",
    "open_incident",
    "open_unresolved",
    "related_entities",
    "resolve_cluster",
    "resolve_subjects",
    "update_window",
    "workload_of",
]
