"""Alerts become incidents: labels → subject entities → join an open incident or open one, link related ones.

``group_alert`` is the one function that decides; each rule is a small helper
named after it and tested on its own (tests/incidents/test_grouping.py).
Nothing is ever dropped: labels that name nothing in the inventory still open
an incident, with ``unresolved_subject`` saying which labels those were.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from django.db.models import Max, Q, QuerySet

from collectors.models import Cluster, Entity, EntityVersion
from collectors.sources.dcgm import alert_workload
from incidents import lifecycle, services, titles
from incidents.diagnosis.capacity import UNKNOWN_ROOM, Room, room, shut
from incidents.models import Alert, Incident, IncidentSubject

logger = logging.getLogger(__name__)

EVIDENCE_LOOKBACK = timedelta(hours=1)  # evidence window starts this long before onset
MAX_CANDIDATE_NODES = 64  # a pending job on a 1,000-node cluster: keep the first 64 candidates, not all
MAX_RELATED = 600
MAX_RELATED_CANDIDATES = 50  # open incidents weighed for rule 7 per grouping
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


@dataclass
class Resolution:
    """What an alert's labels name: entities found, and the labels that named nothing known."""

    cluster: Cluster | None = None
    subjects: list[Entity] = field(default_factory=list)
    context: list[Entity] = field(default_factory=list)  # named by labels, less specific: attached as related
    unresolved: list[str] = field(default_factory=list)
    workload: str = ""  # the pod its labels name (exported_pod first: the plain label may be the exporter's)

    @property
    def unresolved_key(self) -> str:
        return ", ".join(self.unresolved)[:500]


class Lookups:
    """What ``resolve_subjects`` and ``related_entities`` read, prefetched for a batch of alerts in a few
    queries instead of a few per alert.

    The inventory as of the batch's start: clusters, entities and versions are written only by inventory
    sweeps, and one that commits while a batch runs is seen by the next batch, as by an alert grouped a
    moment earlier. Grouping's own writes (incidents, their subjects) are never cached here. A name that
    was not prefetched is read when asked (and remembered), so the answers are the uncached functions'.
    """

    def __init__(self) -> None:
        self._clusters: dict[str, Cluster | None] = {}
        self._only: list[Cluster | None] = []
        self._by_id: dict[int, Cluster] = {}  # the prefetched clusters by pk (prefetch fills it)
        self._entities: dict[tuple[int, str, str, str], Entity | None] = {}
        self._jobs: dict[tuple[int, str], list[Entity]] = {}
        self._gpu_versions: dict[tuple[int, str], list[EntityVersion]] = {}
        self._versions: dict[
            int, list[EntityVersion]
        ] = {}  # subject entity id -> its versions, by valid_from
        self._on_node: dict[
            tuple[int, str, str], list[EntityVersion]
        ] = {}  # (cluster, kind, node) -> versions

    @classmethod
    def prefetch(cls, alerts: list[Alert]) -> Lookups:
        """One query for the clusters, one per kind for the entities, one for the GPUs of named nodes."""
        self = cls()
        names = {a.labels.get("cluster", "") for a in alerts}
        found = {c.name: c for c in Cluster.objects.filter(name__in=names - {""})}
        self._clusters = {n: found.get(n) for n in names - {""}}
        if "" in names:
            self.cluster({})
        wanted: dict[tuple[int, str], set[tuple[str, str]]] = {}  # (cluster, kind) -> {(namespace, name)}
        gpu_nodes: dict[int, set[str]] = {}
        for a in alerts:
            cluster = self.cluster(a.labels)
            if cluster is None:
                continue
            for kind, ns, name in _identities(a.labels):
                wanted.setdefault((cluster.pk, kind), set()).add((ns, name))
            node = _node_label(a.labels)
            if a.labels.get("gpu") and not a.labels.get("UUID") and node:
                gpu_nodes.setdefault(cluster.pk, set()).add(node)
        clusters = self._by_id = {c.pk: c for c in [*self._clusters.values(), *self._only] if c is not None}
        for (cluster_id, kind), keys in wanted.items():
            by_key = {}
            for e in Entity.objects.filter(cluster_id=cluster_id, kind=kind, name__in={n for _, n in keys}):
                e.cluster = clusters[cluster_id]  # related_entities reads it: no query per entity
                by_key[(e.namespace, e.name)] = e
            for ns, name in keys:
                self._entities[(cluster_id, kind, ns, name)] = by_key.get((ns, name))
        for cluster_id, nodes in gpu_nodes.items():
            rows = EntityVersion.objects.filter(cluster_id=cluster_id, kind="gpu", node__in=nodes)
            for v in rows.select_related("entity").order_by("id"):
                v.entity.cluster = clusters[cluster_id]
                self._gpu_versions.setdefault((cluster_id, v.node), []).append(v)
            for node in nodes:
                self._gpu_versions.setdefault((cluster_id, node), [])
        return self

    def prefetch_related(self, subjects: list[Entity], start: datetime, end: datetime) -> None:
        """For ``related_entities`` of these subjects at times in [start, end]: their versions, and the GPU and
        pod versions on subject nodes (three queries)."""
        ids = {e.pk for e in subjects}
        if not ids:
            return
        for v in EntityVersion.objects.filter(entity_id__in=ids, valid_from__lte=end).order_by(
            "valid_from", "id"
        ):
            self._versions.setdefault(v.entity_id, []).append(v)
        for pk in ids:
            self._versions.setdefault(pk, [])
        nodes: dict[int, set[str]] = {}
        for e in subjects:
            if e.kind == "node":
                nodes.setdefault(e.cluster_id, set()).add(e.name)
        for cluster_id, names in nodes.items():
            for kind in ("gpu", "pod"):
                rows = (
                    EntityVersion.objects.overlapping(start, end + timedelta(microseconds=1))
                    .filter(cluster_id=cluster_id, kind=kind, node__in=names)
                    .select_related("entity")
                    .order_by("id")
                )
                for v in rows:
                    if cluster_id in self._by_id:
                        v.entity.cluster = self._by_id[cluster_id]
                    self._on_node.setdefault((cluster_id, kind, v.node), []).append(v)
                for name in names:
                    self._on_node.setdefault((cluster_id, kind, name), [])

    def version(self, ent: Entity, at: datetime) -> EntityVersion | None | Literal[False]:
        """The entity's version at ``at`` (else its last one before), as ``related_entities`` reads it; False
        when this entity was not prefetched."""
        versions = self._versions.get(ent.pk)
        if versions is None:
            return False
        current = [v for v in versions if v.valid_from <= at and (v.valid_to is None or v.valid_to > at)]
        if current:
            return min(current, key=lambda v: v.pk)
        before = [v for v in versions if v.valid_from <= at]
        return before[-1] if before else None

    def on_node(self, cluster: Cluster, kind: str, node: str, at: datetime) -> list[EntityVersion] | None:
        """Versions of ``kind`` on ``node`` at ``at`` (None when not prefetched)."""
        versions = self._on_node.get((cluster.pk, kind, node))
        if versions is None:
            return None
        return [v for v in versions if v.valid_from <= at and (v.valid_to is None or v.valid_to > at)]

    def cluster(self, labels: dict[str, str]) -> Cluster | None:
        name = labels.get("cluster", "")
        if name:
            if name not in self._clusters:
                self._clusters[name] = Cluster.objects.filter(name=name).first()
            return self._clusters[name]
        if not self._only:
            self._only.append(resolve_cluster({}))
        return self._only[0]

    def entity(self, cluster: Cluster, kind: str, name: str, namespace: str = "") -> Entity | None:
        key = (cluster.pk, kind, namespace, name)
        if key not in self._entities:
            self._entities[key] = _entity(cluster, kind, name, namespace)
        return self._entities[key]

    def jobs_named(self, cluster: Cluster, name: str) -> list[Entity]:
        key = (cluster.pk, name)
        if key not in self._jobs:
            self._jobs[key] = list(Entity.objects.filter(cluster=cluster, kind="job", name=name)[:2])
        return self._jobs[key]

    def gpu_by_index(self, cluster: Cluster, node: str, index: str, at: datetime) -> Entity | None:
        """As :func:`gpu_by_index`, on the node's prefetched GPU versions."""
        versions = self._gpu_versions.get((cluster.pk, node))
        if versions is None:
            return gpu_by_index(cluster, node, index, at)
        try:
            idx = int(index)
        except ValueError:
            return None
        mine = [v for v in versions if v.state.get("index") == idx and v.valid_from <= at]
        current = [v for v in mine if v.valid_to is None or v.valid_to > at]
        if not current:  # the GPU vanished before the alert (Xid 79): its last known version
            current = sorted(mine, key=lambda v: v.valid_from, reverse=True)[:1]
        return current[0].entity if current else None


def _node_label(labels: dict[str, str]) -> str:
    return labels.get("node") or labels.get("Hostname") or labels.get("hostname") or ""


_LABEL_TEXT = {  # how an unresolved identity is named in ``unresolved_subject``
    "pod": lambda ns, name: f"pod={ns}/{name}",
    "job": lambda ns, name: f"job_name={name}",
    "project": lambda ns, name: f"project={name}",
    "queue": lambda ns, name: f"queue={name}",
    "node": lambda ns, name: f"node={name}",
    "gpu": lambda ns, name: f"UUID={name}",
}


def _identities(labels: dict[str, str]) -> list[tuple[str, str, str]]:
    """The (kind, namespace, name) an alert's identifying labels ask the inventory for (rule 2)."""
    namespace, pod = alert_workload(labels)  # never the dcgm-exporter pod a scrape put in ``pod``
    out: list[tuple[str, str, str]] = []
    if pod and namespace:
        out.append(("pod", namespace, pod))
    if labels.get("job_name"):
        out.append(("job", namespace, labels["job_name"]))
    for kind in ("project", "queue"):
        if labels.get(kind):
            out.append((kind, "", labels[kind]))
    node = _node_label(labels)
    if node:
        out.append(("node", "", node))
    if labels.get("UUID"):
        out.append(("gpu", "", labels["UUID"]))
    return out


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


#
# Rule 2: labels -> entities
#


# Alerts about how a workload uses the GPUs it holds (not about the GPU's health): the holding pod and its job
# are subjects beside the GPU, so the job's page lists the incident and handoffs file it under the workload.
# Joining still goes by the GPU and its node (``_about``): two pods' idle GPUs stay two incidents.
WORKLOAD_GPU_ALERTS = frozenset({"GPUIdleAllocated"})


def workload_of(alert: Alert, res: Resolution, related: list[Entity]) -> list[Entity]:
    """The pod a workload-use GPU alert names (``res.workload``) and its job, among what rule 6 relates."""
    if (
        alert.name not in WORKLOAD_GPU_ALERTS
        or not res.workload
        or not any(e.kind == "gpu" for e in res.subjects)
    ):
        return []
    pods = [e for e in related if e.kind == "pod" and e.name == res.workload]
    # a GPU subject relates the job of the pod holding it, and only that job
    jobs = [e for e in related if e.kind == "job" and any(p.namespace == e.namespace for p in pods)]
    return pods[:1] + jobs[:1]


def resolve_cluster(labels: dict[str, str]) -> Cluster | None:
    """The ``cluster`` label, or the only cluster rcaweb watches when the rule does not add one."""
    name = labels.get("cluster", "")
    if name:
        return Cluster.objects.filter(name=name).first()
    only = list(Cluster.objects.all()[:2])
    return only[0] if len(only) == 1 else None


def _entity(cluster: Cluster, kind: str, name: str, namespace: str = "") -> Entity | None:
    return Entity.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name=name).first()


def resolve_subjects(alert: Alert, lookups: Lookups | None = None) -> Resolution:
    """Map identifying labels to inventory entities; what names nothing known goes to ``unresolved``.

    dcgm-exporter variants: ``Hostname`` (classic) or ``hostname`` (current) name the node, ``UUID`` the GPU
    and ``gpu`` is the GPU's index on that node; when Prometheus did not honour the exporter's labels the
    workload is in ``exported_pod``/``exported_namespace`` (the plain ones then name the exporter itself).
    """
    labels = alert.labels
    res = Resolution(cluster=lookups.cluster(labels) if lookups else resolve_cluster(labels))
    if labels.get("cluster") and res.cluster is None:
        res.unresolved.append(f"cluster={labels['cluster']}")
    node = _node_label(labels)
    found: list[Entity] = []
    for kind, ns, name in _identities(labels):
        text = _LABEL_TEXT[kind](ns, name)
        ent = None
        if res.cluster is not None:
            ent = (
                lookups.entity(res.cluster, kind, name, ns)
                if lookups
                else _entity(res.cluster, kind, name, ns)
            )
            if ent is None and kind == "job" and not ns:  # job_name without namespace: unique by name
                same = (
                    lookups.jobs_named(res.cluster, name)
                    if lookups
                    else list(Entity.objects.filter(cluster=res.cluster, kind="job", name=name)[:2])
                )
                ent = same[0] if len(same) == 1 else None
        if ent is not None:
            found.append(ent)
        else:
            res.unresolved.append(text)
    if labels.get("gpu") and not labels.get("UUID"):
        gpu = None
        if res.cluster and node:
            gpu = (
                lookups.gpu_by_index(res.cluster, node, labels["gpu"], alert.starts_at)
                if lookups
                else gpu_by_index(res.cluster, node, labels["gpu"], alert.starts_at)
            )
        if gpu is not None:
            found.append(gpu)
        else:
            res.unresolved.append(f"gpu={node}/{labels['gpu']}")
    res.subjects, res.context = most_specific(found)
    res.workload = labels.get("exported_pod") or labels.get("pod") or ""
    if not res.subjects and not res.unresolved:
        # Nothing identifying at all: the alert is its own subject (by name and its distinguishing labels).
        rest = sorted(f"{k}={v}" for k, v in labels.items() if k not in ("severity", "alertname"))
        res.unresolved.append(
            f"alertname={labels.get('alertname', '')}" + (", " + ", ".join(rest) if rest else "")
        )
    return res


# Which named entities an alert is *about*, most specific first; the rest of what its labels name is context.
# A GPU alert is about the GPU and its node (dcgm labels always carry both), even when a pod holds the GPU;
# a pod/job alert is about the workload, not the node it ran on or the project/queue it belongs to —
# otherwise every pending job of a project would join one incident through the project label.
def most_specific(found: list[Entity]) -> tuple[list[Entity], list[Entity]]:
    """Split resolved entities into (subjects, context): GPU(+node) > pod/job > node > queue/project."""
    kinds = {e.kind for e in found}
    if "gpu" in kinds:
        tier = {"gpu", "node"}
    elif kinds & {"pod", "job"}:
        tier = {"pod", "job"}
    elif "node" in kinds:
        tier = {"node"}
    else:
        tier = {"queue", "project"}
    return [e for e in found if e.kind in tier], [e for e in found if e.kind not in tier]


def gpu_by_index(cluster: Cluster, node: str, index: str, at: datetime) -> Entity | None:
    """A ``gpu`` label is an index on the node: find the GPU entity that had that index there at ``at``."""
    try:
        idx = int(index)
    except ValueError:
        return None
    versions = EntityVersion.objects.filter(cluster=cluster, kind="gpu", node=node).select_related("entity")
    current = [v for v in versions.as_of(at) if v.state.get("index") == idx]
    if not current:  # the GPU vanished before the alert (Xid 79): take its last known version
        current = [
            v
            for v in versions.filter(valid_from__lte=at).order_by("-valid_from")[:64]
            if v.state.get("index") == idx
        ]
    return current[0].entity if current else None


#
# Rules 3-5: join or open
#


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
    if gpus and res.workload:
        # A GPU alert naming the pod that holds the GPU joins the incident about that GPU, or an incident of
        # its node whose alerts name the same pod or no pod at all (a node's failing GPUs are one problem);
        # never one about another pod's GPUs only because the node is the same: two pods, two problems.
        pod = res.workload
        this_pod = Q(labels__exported_pod=pod) | (Q(labels__pod=pod) & ~Q(labels__has_key="exported_pod"))
        any_pod = Q(labels__has_key="exported_pod") | Q(labels__has_key="pod")
        naming_it = Alert.objects.filter(this_pod, incident__isnull=False).values("incident")
        naming_a_pod = Alert.objects.filter(any_pod, incident__isnull=False).values(
            "incident"
        )  # NOT IN: no NULL
        nodes = [e for e in res.subjects if e.kind == "node"]
        same_gpu = Q(incidentsubject__entity__in=gpus, incidentsubject__role="subject")
        same_node = Q(incidentsubject__entity__in=nodes, incidentsubject__role="subject") & (
            Q(pk__in=naming_it) | ~Q(pk__in=naming_a_pod)
        )
        return qs.filter(same_gpu | same_node).distinct()
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


#
# Rule 6: related entities
#


Attached = dict[int, tuple[str, str]]  # an incident's entities: entity id -> (role, kind)


def attached(incident: Incident) -> Attached:
    return attached_to([incident.pk])[incident.pk]


def attached_to(incident_ids: list[int], related_gpus: set[int] | None = None) -> dict[int, Attached]:
    """``attached`` of each incident, in one query. With ``related_gpus``, of the GPUs attached as related only
    those among them: a pending job relates every GPU of its candidate nodes (most of a busy incident's rows),
    and rule 7 reads of another incident's GPUs only its subjects and the faulty ones."""
    out: dict[int, Attached] = {pk: {} for pk in incident_ids}
    rows = IncidentSubject.objects.filter(incident_id__in=incident_ids)
    if related_gpus is not None:
        rows = rows.filter(Q(role="subject") | ~Q(entity__kind="gpu") | Q(entity_id__in=related_gpus))
    for pk, e, role, kind in rows.values_list("incident_id", "entity_id", "role", "entity__kind"):
        out[pk][e] = (role, kind)
    return out


def attach_subjects(
    incident: Incident, entities: list[Entity], *, role: str, have: Attached | None = None
) -> bool:
    """Attach entities not yet attached; an entity already a subject is never demoted to related.

    ``have`` is what is attached already (``attached(incident)``, read here when not given); it is kept
    up to date, so one read serves both roles and rule 7.
    """
    if not entities:
        return False
    if have is None:
        have = attached(incident)
    promoted = 0
    if role == "subject":
        related = [e.pk for e in entities if have.get(e.pk, ("",))[0] == "related"]
        if related:
            promoted = IncidentSubject.objects.filter(
                incident=incident, entity__in=related, role="related"
            ).update(role="subject")
            for pk in related:
                have[pk] = ("subject", have[pk][1])
    new = [
        IncidentSubject(incident=incident, entity=e, role=role) for e in _dedup(entities) if e.pk not in have
    ][:MAX_RELATED]
    IncidentSubject.objects.bulk_create(new, ignore_conflicts=True)
    for link in new:
        have[link.entity.pk] = (role, link.entity.kind)
    return bool(new) or bool(promoted)


def _dedup(entities: list[Entity]) -> list[Entity]:
    seen: dict[int, Entity] = {}
    for e in entities:
        seen.setdefault(e.pk, e)
    return list(seen.values())


def related_entities(subjects: list[Entity], at: datetime, lookups: Lookups | None = None) -> list[Entity]:
    """What an on-call engineer looks at next: a job's project, queue, pods, candidate nodes and their GPUs.

    With a batch's ``lookups`` (prefetched versions), a node's or GPU's relations are read from memory.
    """
    out: list[Entity] = []
    for ent in subjects:
        version = lookups.version(ent, at) if lookups else False
        if version is False:
            version = EntityVersion.objects.as_of(at).filter(entity=ent).first() or (
                EntityVersion.objects.filter(entity=ent, valid_from__lte=at).order_by("-valid_from").first()
            )
        hot = version or EntityVersion()
        cluster = ent.cluster
        if ent.kind == "pod":
            out += _named(cluster, "job", [hot.job], ent.namespace)
            out += _named(cluster, "node", [hot.node])
            out += _named(cluster, "queue", [hot.queue]) + _named(cluster, "project", [hot.project])
        elif ent.kind == "job":
            out += _named(cluster, "queue", [hot.queue]) + _named(cluster, "project", [hot.project])
            pods = list(
                EntityVersion.objects.as_of(at)
                .filter(cluster=cluster, kind="pod", job=ent.name, namespace=ent.namespace)
                .select_related("entity")[:64]
            )
            out += [p.entity for p in pods]
            nodes = {p.node for p in pods if p.node}
            pending = [p for p in pods if not p.node] or ([] if pods else [hot])
            node_entities = _named(cluster, "node", sorted(nodes))
            if pending:
                node_entities += candidate_nodes(cluster, (hot.state or {}).get("node_selector") or {}, at)
            out += node_entities
            out += gpus_of_nodes(cluster, [n.name for n in node_entities], at)
        elif ent.kind == "node":
            node_gpus = lookups.on_node(cluster, "gpu", ent.name, at) if lookups else None
            node_pods = lookups.on_node(cluster, "pod", ent.name, at) if lookups else None
            if node_gpus is not None and node_pods is not None:
                out += [v.entity for v in node_gpus[:MAX_RELATED]] + [v.entity for v in node_pods[:64]]
                continue
            out += gpus_of_nodes(cluster, [ent.name], at)
            out += [
                v.entity
                for v in EntityVersion.objects.as_of(at)
                .filter(cluster=cluster, kind="pod", node=ent.name)
                .select_related("entity")[:64]
            ]
        elif ent.kind == "gpu":
            if lookups is not None:
                node = lookups.entity(cluster, "node", hot.node) if hot.node else None
                out += [node] if node else []
            else:
                out += _named(cluster, "node", [hot.node])
            if hot.pod and "/" in hot.pod:
                ns, name = hot.pod.split("/", 1)
                pods = _named(cluster, "pod", [name], ns)
                out += pods
                pod_version = EntityVersion.objects.as_of(at).filter(entity__in=pods).first()
                if pod_version and pod_version.job:
                    out += _named(cluster, "job", [pod_version.job], ns)
        elif ent.kind == "queue":
            out += _named(cluster, "project", [hot.project])
        elif ent.kind == "project":
            out += _named(cluster, "queue", [hot.queue or ent.name])
    subject_ids = {s.pk for s in subjects}
    return [e for e in _dedup(out) if e.pk not in subject_ids][:MAX_RELATED]


def _named(cluster: Cluster, kind: str, names: list[str], namespace: str = "") -> list[Entity]:
    names = [n for n in names if n]
    if not names:
        return []
    return list(Entity.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name__in=names))


def candidate_nodes(cluster: Cluster, node_selector: dict[str, str], at: datetime) -> list[Entity]:
    """GPU nodes whose labels match the job's nodeSelector at ``at`` (bounded: the first MAX_CANDIDATE_NODES)."""
    ids: list[int] = []
    # Only the labels are read of each node's state (the whole state of every GPU node was most of a
    # grouping's time on a busy cluster), then the entities of those that match, in one more query.
    qs = EntityVersion.objects.as_of(at).filter(cluster=cluster, kind="node", gpus__gt=0)
    for entity_id, labels in qs.order_by("entity__name").values_list("entity_id", "state__labels"):
        labels = labels if isinstance(labels, dict) else {}
        if all(labels.get(k) == val for k, val in node_selector.items()):
            ids.append(entity_id)
            if len(ids) >= MAX_CANDIDATE_NODES:
                break
    found = Entity.objects.in_bulk(ids)
    return [found[i] for i in ids if i in found]


def gpus_of_nodes(cluster: Cluster, nodes: list[str], at: datetime) -> list[Entity]:
    if not nodes:
        return []
    qs = (
        EntityVersion.objects.as_of(at)
        .filter(cluster=cluster, kind="gpu", node__in=nodes)
        .select_related("entity")
        .only("entity")  # the entities, not the versions' states
    )
    return [v.entity for v in qs[:MAX_RELATED]]


#
# Rule 7: related incidents
#


def fault_nodes(incident: Incident, have: Attached | None = None) -> set[int]:
    """Node entity ids this incident is *about*: subject nodes, and the nodes of subject GPUs."""
    return _faulty(attached(incident) if have is None else have)


def _faulty(have: Attached) -> set[int]:
    """``fault_nodes`` of an incident whose entities are ``have``."""
    rows = [(e, k, r) for e, (r, k) in have.items()]
    subject_nodes = {e for e, k, r in rows if k == "node" and r == "subject"}
    if any(k == "gpu" and r == "subject" for _, k, r in rows):
        subject_nodes |= {e for e, k, _ in rows if k == "node"}  # a GPU subject's node is attached as related
    return subject_nodes | {e for e, k, r in rows if k == "gpu" and r == "subject"}


def link_related_incidents(
    incident: Incident, have: Attached | None = None, at: datetime | None = None
) -> list[int]:
    """Link open incidents where one's faulty node/GPU is among the other's entities (e.g. a job pending on it),
    when that can matter to the other: the fault took capacity away around ``at`` (default: the incident's
    onset), or the two share a workload (a pod or job), or the faulty entity is the other's subject too.

    A healthy GPU that is idle, or hot, takes nothing from a job pending elsewhere: on a busy cluster every
    pending job relates dozens of candidate nodes, and without that condition an idle-allocation incident
    would be linked to each of them.

    At most ``MAX_RELATED_CANDIDATES`` open incidents that can share a fault are weighed (the oldest first), and
    their subjects and the faulty entities' versions are read in one query each: the number of queries does
    not grow with the open incidents."""
    if have is None:
        have = attached(incident)
    mine_all = set(have)
    if not mine_all:  # labels that named nothing known: no entity to share with anyone
        return []
    mine_fault = fault_nodes(incident, have)
    # filter(cluster_id=None) is cluster IS NULL: said so, for the type checker
    same_cluster = (
        Q(cluster__isnull=True) if incident.cluster_id is None else Q(cluster_id=incident.cluster_id)
    )
    # Only incidents that can share a fault with this one are weighed (``sharing`` below): those holding one of
    # my faulty entities, and those about a node or GPU among my entities (their faulty entities: a subject node
    # or GPU, or the node of a subject GPU). Not every incident that merely shares an entity: a pending job
    # relates every candidate node and GPU, so on a busy cluster dozens of other pending jobs share entities
    # with it, and the oldest of them filled the candidates while the fault on its node went unweighed.
    subjects = IncidentSubject.objects.filter(role="subject")
    holds_my_fault = IncidentSubject.objects.filter(entity__in=mine_fault).values("incident")
    about_my_nodes = subjects.filter(entity__in=mine_all, entity__kind__in=("node", "gpu")).values("incident")
    my_nodes = [e for e, (_, kind) in have.items() if kind == "node"]
    gpu_on_my_nodes = subjects.filter(
        entity__kind="gpu",
        incident__in=IncidentSubject.objects.filter(entity__in=my_nodes).values("incident"),
    ).values("incident")
    candidates = list(
        Incident.objects.exclude(pk=incident.pk)
        .exclude(status="resolved")
        .filter(same_cluster)
        .filter(Q(pk__in=holds_my_fault) | Q(pk__in=about_my_nodes) | Q(pk__in=gpu_on_my_nodes))
        .order_by("pk")
        .values_list("pk", flat=True)[:MAX_RELATED_CANDIDATES]
    )
    if not candidates:
        return []
    # Of their related GPUs only my faulty ones count (_faulty reads their subjects and nodes, _matters the
    # shared faulty entities and the workloads).
    theirs = attached_to(candidates, related_gpus=mine_fault)
    faults = {pk: _faulty(theirs[pk]) for pk in candidates}
    sharing = [pk for pk in candidates if (mine_fault & set(theirs[pk])) or (faults[pk] & mine_all)]
    if not sharing:
        return []
    when = incident.onset if at is None else at
    entities = mine_fault.union(*(faults[pk] for pk in sharing))
    unusable = _unusable(entities, when)
    room = _room(entities, unusable, when)
    unusable |= {e for e, r in room.items() if r.short}
    asks = _requests({incident.pk: have, **{pk: theirs[pk] for pk in sharing}}, when)
    linked = [
        pk
        for pk in sharing
        if _matters(have, mine_fault, theirs[pk], unusable, room, asks.get(pk))
        or _matters(theirs[pk], faults[pk], have, unusable, room, asks.get(incident.pk))
    ]
    if linked:
        incident.related.add(*linked)
    return linked


FAULT_SLACK = timedelta(minutes=10)  # a fault's inventory state counts this long before or after the alert


def _matters(
    a: Attached,
    a_fault: set[int],
    b: Attached,
    unusable: set[int],
    room: dict[int, Room],
    b_asks: float | None,
) -> bool:
    """Whether ``a``'s fault (``a_fault``, its fault entities) can matter to ``b`` (both as :data:`Attached`):
    they share a faulty entity, and that entity is ``b``'s subject too, or they share a workload, or ``a``'s
    fault took away capacity that ``b`` waits for: ``b`` asks ``b_asks`` whole GPUs for a waiting pod (None:
    not known; ``inf``: nothing of it waits), and a faulty node has too few free for it while faulty and
    enough once fixed (``room``, by entity; a node not in it counts as having none now and room once fixed).

    A pending 8-GPU job is not waiting for a node whose other GPUs its running pods hold, whatever happens
    to the faulty one; nor is a 1-GPU job waiting for a GPU that fell off an empty node's bus: seven are
    still free there."""
    shared = a_fault & set(b)
    if not shared:
        return False
    if any(b[e][0] == "subject" for e in shared):
        return True
    taken = a_fault & unusable
    if taken and b_asks != math.inf:  # (nothing of b waits: capacity taken elsewhere is nothing to it)
        if b_asks is None or any(room.get(e, UNKNOWN_ROOM).keeps_out(b_asks) for e in taken):
            return True
    workloads = {e for e, (_, kind) in a.items() if kind in ("pod", "job")}
    return bool(workloads & {e for e, (_, kind) in b.items() if kind in ("pod", "job")})


NOMINAL_LOOKBACK = timedelta(hours=24)  # a node's GPUs are the most it reported over this long before t


def _room(entities: set[int], faulty: set[int], at: datetime) -> dict[int, Room]:
    """Per node or GPU among ``entities`` (entity id), the whole GPUs its node has free around ``at``, as
    :class:`Room`.

    Once fixed: the most GPUs the node reported over ``NOMINAL_LOOKBACK`` (a GPU that fell off the bus
    leaves its capacity too) less those its running pods hold. While faulty: none if the node was not Ready,
    cordoned or tainted by Kubernetes within ``FAULT_SLACK`` of ``at``; else the fewest it advertised
    allocatable then, and no more than that most less its GPUs among ``faulty`` (the device plugin may not
    have withdrawn them yet), less those held. A node is ``short`` when it had fewer usable GPUs than that
    most: the kubelet withdraws a GPU that fell off the bus at once, while the GPU is seen missing only at
    the next GPU poll. Entities whose node or count is unknown are left out. Four queries, whatever the
    number of entities."""
    if not entities:
        return {}
    node_of: dict[int, str] = {}
    nodes: set[int] = set()
    bad_gpus: dict[str, int] = {}
    versions = EntityVersion.objects.as_of(at).filter(entity_id__in=entities, kind__in=("node", "gpu"))
    for entity_id, kind, name, node in versions.values_list("entity_id", "kind", "entity__name", "node"):
        host = name if kind == "node" else node
        if host:
            node_of[entity_id] = host
            if kind == "node":
                nodes.add(entity_id)
            elif entity_id in faulty:
                bad_gpus[host] = bad_gpus.get(host, 0) + 1
    hosts = set(node_of.values())
    if not hosts:
        return {}
    nominal = dict(
        EntityVersion.objects.overlapping(at - NOMINAL_LOOKBACK, at)
        .filter(kind="node", entity__name__in=hosts, valid_from__lte=at, gpus__isnull=False)
        .values_list("entity__name")
        .annotate(most=Max("gpus"))
        .values_list("entity__name", "most")
    )
    usable: dict[str, float] = {h: nominal[h] - bad_gpus.get(h, 0) for h in hosts if h in nominal}
    window = EntityVersion.objects.overlapping(at - FAULT_SLACK, at + FAULT_SLACK).filter(
        kind="node", entity__name__in=hosts
    )
    rows = window.filter(deleted=False).values_list("entity__name", "phase", "gpus_allocatable", "state")
    for host, phase, allocatable, state in rows:
        if shut(state, phase):
            usable[host] = 0
        elif allocatable is not None:
            usable[host] = min(usable.get(host, math.inf), allocatable)
    held: dict[str, int] = dict.fromkeys(hosts, 0)
    pods = EntityVersion.objects.as_of(at).filter(kind="pod", node__in=hosts, phase="Running", deleted=False)
    for node, gpus in pods.values_list("node", "gpus"):
        held[node] += gpus or 0
    out = {}
    for e, h in node_of.items():
        if h in nominal:
            r = room(nominal[h], usable.get(h, 0), held[h])
            out[e] = r if e in nodes else r._replace(short=False)
    return out


def _requests(attachments: dict[int, Attached], at: datetime) -> dict[int, float]:
    """Per incident about jobs or pods, the fewest whole GPUs one of its waiting pods asks for (a job's per
    pod); ``inf`` when none of them waits at ``at`` (placed, finished: capacity elsewhere is nothing to
    them). Absent (not known) when a request is in fractions or MIG slices (what fits then is not a count
    of free GPUs), when a subject has no state at ``at`` (not swept yet), or the incident is about no job
    or pod. One query."""
    subjects = {
        e: pk
        for pk, have in attachments.items()
        for e, (role, kind) in have.items()
        if role == "subject" and kind in ("job", "pod")
    }
    if not subjects:
        return {}
    out: dict[int, float] = dict.fromkeys(set(subjects.values()), math.inf)
    unseen = set(subjects)
    unknown: set[int] = set()
    versions = EntityVersion.objects.as_of(at).filter(entity_id__in=subjects, deleted=False)
    for entity_id, kind, phase, gpus, state in versions.values_list(
        "entity_id", "kind", "phase", "gpus", "state"
    ):
        unseen.discard(entity_id)
        if phase != "Pending":
            continue
        state = state or {}
        per_pod = state.get("gpus_per_pod") if kind == "job" else gpus
        pk = subjects[entity_id]
        if not isinstance(per_pod, int) or per_pod <= 0 or state.get("mig") or state.get("gpu_share"):
            unknown.add(pk)
            continue
        out[pk] = min(out[pk], per_pod)
    unknown.update(subjects[e] for e in unseen)  # not known to wait or not: not "placed" either
    for pk in unknown:
        out.pop(pk, None)
    return out


def _unusable(entities: set[int], at: datetime) -> set[int]:
    """The nodes and GPUs among ``entities`` whose capacity was gone at some point within ``FAULT_SLACK`` of
    ``at`` (the inventory sees a fault a sweep after its alert, or already before): what keeps an incident
    open (``lifecycle.trouble``: a node not Ready or with fewer allocatable GPUs than it has, a GPU faulty or
    missing), and a node cordoned or tainted by Kubernetes."""
    versions = EntityVersion.objects.overlapping(at - FAULT_SLACK, at + FAULT_SLACK).filter(
        entity_id__in=entities, kind__in=("node", "gpu")
    )
    return {
        v.entity_id
        for v in versions.only("entity_id", "kind", "phase", "gpus", "gpus_allocatable", "deleted", "state")
        if lifecycle.trouble(v) or (v.kind == "node" and not v.deleted and shut(v.state, v.phase))
    }
