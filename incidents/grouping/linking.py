"""Rule 7: open incidents sharing a faulty node or GPU are linked, when the fault can matter to the other."""

from __future__ import annotations

import math
from datetime import datetime

from django.db.models import Q

from incidents.diagnosis.capacity import UNKNOWN_ROOM, Room
from incidents.grouping.related import Attached, attached, attached_to
from incidents.grouping.room import node_room, unusable_at, waiting_asks
from incidents.models import Incident, IncidentSubject

MAX_RELATED_CANDIDATES = 50  # open incidents weighed for rule 7 per grouping


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
    unusable = unusable_at(entities, when)
    room = node_room(entities, unusable, when)
    unusable |= {e for e, r in room.items() if r.short}
    asks = waiting_asks({incident.pk: have, **{pk: theirs[pk] for pk in sharing}}, when)
    linked = [
        pk
        for pk in sharing
        if _matters(have, mine_fault, theirs[pk], unusable, room, asks.get(pk))
        or _matters(theirs[pk], faults[pk], have, unusable, room, asks.get(incident.pk))
    ]
    if linked:
        incident.related.add(*linked)
    return linked


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
