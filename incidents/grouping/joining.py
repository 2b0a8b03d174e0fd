"""Rules 3-5: an alert joins an open incident about its subjects, reopens a recent one, or opens one."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q, QuerySet

from incidents import lifecycle, titles
from incidents.grouping.subjects import WORKLOAD_GPU_ALERTS, Resolution
from incidents.models import Alert, Incident

EVIDENCE_LOOKBACK = timedelta(hours=1)  # evidence window starts this long before onset
SEVERITY_ORDER = {"info": 0, "warning": 1, "critical": 2}
SEVERITY_ALIASES = {
    "page": "critical",
    "error": "critical",
    "high": "critical",
    "fatal": "critical",
    "warn": "warning",
    "medium": "warning",
    "low": "info",
    "none": "info",
    "notice": "info",
}


def find_open_incident(res: Resolution, starts_at: datetime) -> Incident | None:
    """The oldest unresolved incident with one of these subjects (or the same unresolved labels)."""
    return _about(Incident.objects.exclude(status="resolved"), res).order_by("onset", "id").first()


def find_reopenable(res: Resolution, starts_at: datetime) -> Incident | None:
    """The incident about these subjects resolved most recently, at most the reopen window before ``starts_at``.

    Only a re-fire: an alert that started before the resolution (delivered late) does not undo it.
    """
    window = lifecycle.reopen_window()
    if window <= timedelta(0):
        return None
    qs = Incident.objects.filter(
        status="resolved", resolved_at__gte=starts_at - window, resolved_at__lte=starts_at
    )
    return _about(qs, res).order_by("-resolved_at", "-id").first()


def _about(qs: QuerySet[Incident], res: Resolution) -> QuerySet[Incident]:
    gpus = [e for e in res.subjects if e.kind == "gpu"]
    if gpus:
        # A GPU's health (an Xid, ECC, heat, off the bus) joins the incident about that GPU or its node's other
        # faults, whoever holds the GPUs: a node's failing GPUs are one problem. How a pod uses its GPUs
        # (``res.uses``: idle while allocated) joins the incident about the same pod's GPUs. Never the one with
        # the other: a pod idle because it cannot pull its image and an Xid on its GPU are two problems, two
        # answers and two owners, linked (rule 7); nor two pods' problems because the node is the same.
        nodes = [e for e in res.subjects if e.kind == "node"]
        about = Q(incidentsubject__entity__in=[*gpus, *nodes], incidentsubject__role="subject")
        used = Alert.objects.filter(name__in=WORKLOAD_GPU_ALERTS, incident__isnull=False)
        if not res.uses:
            return qs.filter(about & ~Q(pk__in=used.values("incident"))).distinct()  # NOT IN: no NULL
        if not res.workload:
            same_gpu = Q(incidentsubject__entity__in=gpus, incidentsubject__role="subject")
            return qs.filter(same_gpu & Q(pk__in=used.values("incident"))).distinct()
        pod = res.workload
        this_pod = Q(labels__exported_pod=pod) | (Q(labels__pod=pod) & ~Q(labels__has_key="exported_pod"))
        return qs.filter(about & Q(pk__in=used.filter(this_pod).values("incident"))).distinct()
    if res.subjects:
        return qs.filter(incidentsubject__entity__in=res.subjects, incidentsubject__role="subject").distinct()
    return qs.filter(cluster=res.cluster, unresolved_subject=res.unresolved_key)


def open_unresolved(items: list[tuple[Alert, Resolution]]) -> dict[int, Incident]:
    """Rules 4 and 5 for a batch of new alerts whose labels named nothing known, in a fixed number of queries.

    The storm case: thousands of alerts about things the inventory does not know, each label set its own
    incident. Alerts are grouped by (cluster, unresolved labels) in their order, as ``group_alert`` would one
    after the other: the first opens the incident, the next ones join it and escalate it. That needs no
    entity, related object or linked incident (an incident with unresolved labels has none), so the new
    incidents are one ``bulk_create`` and the alerts one ``bulk_update``. Label sets that already have an
    open or reopenable incident, or a resolved alert in the batch (the lifecycle decides those), are left
    to ``group_alert``: the caller groups every alert missing from the returned ``{alert pk: incident}``.
    """
    groups: dict[tuple[int | None, str], list[tuple[Alert, Resolution]]] = {}
    for alert, res in items:
        groups.setdefault((res.cluster.pk if res.cluster else None, res.unresolved_key), []).append(
            (alert, res)
        )
    if not groups:
        return {}
    keys = {key for _, key in groups}
    taken = set(
        Incident.objects.exclude(status="resolved")
        .filter(unresolved_subject__in=keys)
        .values_list("cluster_id", "unresolved_subject")
    )
    window = lifecycle.reopen_window()
    if window > timedelta(0):
        starts = [alert.starts_at for alert, _ in items]
        taken |= set(
            Incident.objects.filter(
                status="resolved",
                unresolved_subject__in=keys,
                resolved_at__gte=min(starts) - window,
                resolved_at__lte=max(starts),
            ).values_list("cluster_id", "unresolved_subject")
        )
    grouped: dict[int, Incident] = {}
    opened: list[Incident] = []
    for key, members in groups.items():
        if key in taken or any(alert.status != "firing" for alert, _ in members):
            continue
        first, res = members[0]
        incident = Incident(
            title=titles.alert_title(first, [])[:300],
            severity=normalize_severity(first.severity),
            cluster=res.cluster,
            onset=first.starts_at,
            window_start=first.starts_at - EVIDENCE_LOOKBACK,
            unresolved_subject=res.unresolved_key or "unresolved",
        )
        for alert, _ in members[1:]:  # escalate, in memory
            sev = normalize_severity(alert.severity)
            if SEVERITY_ORDER[sev] > SEVERITY_ORDER[incident.severity]:
                incident.severity = sev
            if alert.starts_at < incident.onset:
                incident.onset, incident.window_start = alert.starts_at, alert.starts_at - EVIDENCE_LOOKBACK
        opened.append(incident)
        for alert, _ in members:
            grouped[alert.pk] = incident
    Incident.objects.bulk_create(opened, batch_size=500)
    joined = [alert for alert, _ in items if alert.pk in grouped]
    for alert in joined:
        alert.incident = grouped[alert.pk]
    Alert.objects.bulk_update(joined, ["incident"], batch_size=500)
    for incident in opened:
        incident.needs_evidence = True
    return grouped


def normalize_severity(value: str) -> str:
    v = (value or "").strip().lower()
    v = SEVERITY_ALIASES.get(v, v)
    return v if v in SEVERITY_ORDER else "warning"


def open_incident(alert: Alert, res: Resolution) -> Incident:
    title = titles.alert_title(alert, [(e.kind, e.namespace, e.name) for e in res.subjects])
    return Incident.objects.create(
        title=title[:300],
        severity=normalize_severity(alert.severity),
        cluster=res.cluster,
        onset=alert.starts_at,
        window_start=alert.starts_at - EVIDENCE_LOOKBACK,
        unresolved_subject="" if res.subjects else (res.unresolved_key or "unresolved"),
    )


def escalate(incident: Incident, alert: Alert) -> None:
    """A joining alert can raise the severity and move the onset earlier, never the reverse."""
    sev = normalize_severity(alert.severity)
    updates: dict[str, object] = {}
    if SEVERITY_ORDER[sev] > SEVERITY_ORDER.get(incident.severity, 1):
        updates["severity"] = sev
    if alert.starts_at < incident.onset:
        updates.update(onset=alert.starts_at, window_start=alert.starts_at - EVIDENCE_LOOKBACK)
    if updates:
        Incident.objects.filter(pk=incident.pk).update(**updates)
        for k, v in updates.items():
            setattr(incident, k, v)


def update_window(incident: Incident) -> bool:
    """All alerts resolved → the window closes at the last endsAt; one firing again → it reopens.

    A resolved alert without endsAt ends when its resolution arrived. A resolved incident keeps its window
    (a late firing resend does not reopen it; only a new alert can, through rule 5).
    """
    alerts = list(Alert.objects.filter(incident=incident).values_list("status", "ends_at", "updated_at"))
    firing = any(s == "firing" for s, _, _ in alerts)
    if firing and incident.status == "resolved":
        return False
    end = None if firing or not alerts else max(e or u for _, e, u in alerts)
    if end != incident.window_end:
        Incident.objects.filter(pk=incident.pk).update(window_end=end)
        incident.window_end = end
        return True
    return False
