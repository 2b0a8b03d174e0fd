"""Waiting jobs in the scheduling model's order, read from the inventory at t: a job page's position in its
queue, the queue and project pages' waiting lists, the job list of waiting jobs.

There is one order: the model's (``incidents.diagnosis.queue_order``). Within one queue it serves jobs by
``in_queue_key`` (priority class, then submission); across queues by ``QueueOrder`` (KAI departments, queue
priority, fair share and over-quota weight; Kueue queue priority, borrowing, strategies), as the cluster's
scheduling pass walks it (``scheduling_pass.cluster_pass``, then ``ahead.cluster_order`` beyond it), the order
the why-pending panel, the queues page and the incidents' jobs ahead (``ahead.jobs_ahead``) read. So a job page,
a list and an incident never give one job two positions.

A job waits as the model says (``pending.is_pending``: Pending, or Suspended waiting for admission).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.db.models.fields.json import KeyTransform

from collectors.models import Cluster, EntityVersion
from incidents.diagnosis.ahead import cluster_order
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.queue_order import in_queue_key, job_queue, order_words
from incidents.diagnosis.types import EntityState
from incidents.diagnosis_input import load_cluster_input

# The phases a waiting job's version may carry (``is_pending`` decides; "" is a job with no phase recorded).
WAITING_PHASES = ("Pending", "Suspended", "")
IN_QUEUE_WORDS = "their queue's order (priority class, then submission)"

Key = tuple[str, str]  # (namespace, name)


def job_state(version: EntityVersion) -> EntityState:
    """A job version as the model reads it."""
    return EntityState(
        "job",
        version.entity.name,
        version.entity.namespace,
        version.state or {},
        version.valid_from,
        version.valid_to,
    )


def waits(version: EntityVersion) -> bool:
    return is_pending(job_state(version))


def queue_of(version: EntityVersion) -> str:
    """The queue the model charges the job to (its queue, else its project)."""
    return job_queue(job_state(version))


# What the model's order within a queue reads of a waiting job's state (``is_pending``, ``job_queue``,
# ``in_queue_key``): read as JSON keys, not whole states (a queue may hold thousands of waiting jobs).
ORDER_KEYS = ("phase", "active", "queue", "project", "priority_class", "priority_value", "submitted")


def queue_position(cluster: Cluster, version: EntityVersion, t: datetime) -> tuple[int, int] | None:
    """(position, waiting) of a waiting job in its own queue at t, in the model's order; None when it does not
    wait. One query: the keys ``in_queue_key`` reads of the queue's waiting jobs at t."""
    me = job_state(version)
    if not is_pending(me):
        return None
    queue = job_queue(me)
    rows = (
        EntityVersion.objects.as_of(t)
        .filter(cluster=cluster, kind="job", deleted=False, phase__in=WAITING_PHASES)
        .filter(Q(queue=queue) | Q(queue="", project=queue))
        .values_list("entity__namespace", "entity__name", *(KeyTransform(k, "state") for k in ORDER_KEYS))
    )
    others = [
        s
        for s in (
            EntityState("job", name, ns, dict(zip(ORDER_KEYS, values, strict=True)))
            for ns, name, *values in rows
        )
        if is_pending(s) and job_queue(s) == queue and (s.namespace, s.name) != (me.namespace, me.name)
    ]
    mine = in_queue_key(me)
    return (1 + sum(1 for s in others if in_queue_key(s) < mine), len(others) + 1)


def cluster_ranks(cluster: Cluster, t: datetime) -> dict[Key, int]:
    """Each waiting job's 1-based place in the cluster's order at t: the scheduling pass' order for the jobs it
    weighs (``cluster_pass``: starts charged to their queue before the next choice), then the jobs beyond it in
    the model's order, each charged to its queue as it is served."""
    di = load_cluster_input(cluster, t)
    with di.indexed():
        # the order an incident counts the jobs ahead of a job by (ahead.jobs_ahead)
        return {(j.namespace, j.name): i for i, j in enumerate(cluster_order(di), start=1)}


def in_model_order(cluster: Cluster, t: datetime, versions: Iterable[Any]) -> tuple[list[Any], str]:
    """Waiting jobs (EntityVersions, or rows with a ``version``) in the model's order, and the order in words.

    One queue: its own order (``in_queue_key``), read from the versions alone. Several: the cluster's order at
    t (:func:`cluster_ranks`, which reads the cluster)."""
    items = list(versions)

    def version(item: Any) -> EntityVersion:
        return item if isinstance(item, EntityVersion) else item.version

    states = {id(item): job_state(version(item)) for item in items}
    if len({job_queue(s) for s in states.values()}) <= 1:
        return sorted(items, key=lambda i: in_queue_key(states[id(i)])), IN_QUEUE_WORDS
    ranks = cluster_ranks(cluster, t)
    beyond = len(ranks) + 1

    def key(item: Any) -> tuple[int, tuple[Any, ...]]:
        s = states[id(item)]
        return (ranks.get((s.namespace, s.name), beyond), in_queue_key(s))

    return sorted(items, key=key), f"the cluster's scheduling order ({order_words(cluster.scheduler)})"


__all__ = [
    "IN_QUEUE_WORDS",
    "WAITING_PHASES",
    "cluster_ranks",
    "in_model_order",
    "job_state",
    "queue_of",
    "queue_position",
    "waits",
]
