"""What a fault took away around a moment: the room on faulty nodes, what waiting pods ask, what is unusable
(rule 7 of ``incidents.grouping``)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.db.models import Max

from collectors.models import EntityVersion
from incidents import lifecycle
from incidents.diagnosis.capacity import Room, room, shut
from incidents.grouping.related import Attached

FAULT_SLACK = timedelta(minutes=10)  # a fault's inventory state counts this long before or after the alert

NOMINAL_LOOKBACK = timedelta(hours=24)  # a node's GPUs are the most it reported over this long before t


def node_room(entities: set[int], faulty: set[int], at: datetime) -> dict[int, Room]:
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


def waiting_asks(attachments: dict[int, Attached], at: datetime) -> dict[int, float]:
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


def unusable_at(entities: set[int], at: datetime) -> set[int]:
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
