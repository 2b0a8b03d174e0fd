"""The fleet-wide part of the inventory as of t, read once per sweep and shared by the diagnoses that follow.

A diagnosis reads every node, GPU, job, queue and project of the cluster, and every unfinished pod's hot
columns, as of t (the last sweep): on a 1,000-node / 20,000-pod cluster that is most of its time, and
alerts come in bursts about the same moment. The rows depend only on (cluster, t) and on what the
inventory holds; sweeps are the only writers, and every sweep records a SourceRun and opens or closes
versions, so the newest SourceRun and EntityVersion ids tell whether the inventory moved. Small
inventories are not kept (reading them is cheap, and a test database reuses ids across rollbacks).

Rows are plain tuples and dicts; callers build their own EntityState objects (observation ids are per
incident) and must not mutate the shared state dicts.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

from django.db.models import Max
from django.db.models.fields.json import KeyTextTransform

from collectors.models import Cluster, EntityVersion, SourceRun

logger = logging.getLogger(__name__)

KINDS = ("node", "gpu", "job", "queue", "project")
MIN_CACHED_ROWS = 5000  # below this, read every time
ROW_LIMIT = 20000  # per kind, as the loader's bound
SLIM_POD_LIMIT = ROW_LIMIT + 1000  # the loader drops the subject pods from these, then keeps ROW_LIMIT

# (kind, name, namespace, state, valid_from, valid_to) per version, by kind; pods as (pk, name, ns, state,
# valid_from) with a state of hot columns only.
Rows = dict[str, list[tuple[Any, ...]]]

_lock = threading.Lock()
_cached: tuple[tuple[Any, ...], Rows] | None = None


def fleet_rows(cluster: Cluster, t: datetime) -> Rows:
    """The cluster's objects as of t (cached while the inventory does not move)."""
    global _cached
    key = _key(cluster, t)
    with _lock:
        if _cached is not None and _cached[0] == key:
            return _cached[1]
    rows = _read(cluster, t)
    if sum(len(v) for v in rows.values()) >= MIN_CACHED_ROWS:
        with _lock:
            _cached = (key, rows)
    return rows


def forget() -> None:
    global _cached
    with _lock:
        _cached = None


def _key(cluster: Cluster, t: datetime) -> tuple[Any, ...]:
    return (
        cluster.pk,
        t,
        EntityVersion.objects.aggregate(m=Max("id"))["m"],
        SourceRun.objects.aggregate(m=Max("id"))["m"],
    )


def _read(cluster: Cluster, t: datetime) -> Rows:
    base = EntityVersion.objects.as_of(t).filter(cluster=cluster, deleted=False)
    out: Rows = {}
    for kind in KINDS:  # one bounded query per kind, no model objects
        out[kind] = list(
            base.filter(kind=kind)
            .order_by("entity__namespace", "entity__name")
            .values_list("pk", "entity__name", "entity__namespace", "state", "valid_from", "valid_to")[
                :ROW_LIMIT
            ]
        )
    slim = (
        base.filter(kind="pod")
        .exclude(phase__in=("Succeeded", "Failed"))
        .annotate(
            s_started=KeyTextTransform("started", "state"),
            s_created=KeyTextTransform("created", "state"),
            s_class=KeyTextTransform("priority_class", "state"),
        )
        .values_list(
            "pk",
            "entity__name",
            "entity__namespace",
            "phase",
            "node",
            "job",
            "queue",
            "project",
            "gpus",
            "valid_from",
            "s_started",
            "s_created",
            "s_class",
        )
    )
    pods = []
    for pk, name, ns, phase, node, job, queue, project, gpus, since, started, created, klass in slim[
        :SLIM_POD_LIMIT
    ]:
        state = {
            "phase": phase,
            "node": node or None,
            "job": job,
            "queue": queue,
            "project": project,
            "gpus": gpus or 0,
            "started": started,
            "created": created,
            "priority_class": klass or "",
        }
        pods.append((pk, name, ns, state, since))
    out["pod"] = pods
    return out
