"""DCGM series for an incident's GPUs: live from Prometheus, else the inventory's 5-minute samples.

Each (metric, GPU) becomes one ``dcgm_series`` observation whose points are
merged across reruns (retention may have dropped the oldest ones since the
first collection: what we had is kept). A failed query is a ``dcgm_series``
observation with ``error``. Points that matter on a timeline (an Xid, a
temperature crossing, new double-bit ECC errors, a GPU that stopped
reporting) are also written as ``telemetry_anomaly`` observations.

By module: the metrics and their selector (``metrics``), the live path (``live``, with the range queries
shared between collections in ``shared_range``), the inventory's samples when Prometheus is not there
(``samples``) and the observations written (``series``).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from collectors.models import Cluster, EntityVersion
from incidents.models import IncidentSubject
from incidents.telemetry.live import from_prometheus
from incidents.telemetry.metrics import METRICS, promql
from incidents.telemetry.samples import from_samples
from incidents.telemetry.series import anomalies, merge_points
from incidents.telemetry.shared_range import SHARE_S, shared, shared_range

if TYPE_CHECKING:
    from incidents.observation_batch import Batch

MAX_GPUS = 32
MAX_POINTS = 240


def pick_gpus(links: list[IncidentSubject]) -> list[tuple[str, Any]]:
    """The GPUs worth series, most relevant first: subject GPUs, GPUs of subject nodes, then those the pods used.

    GPUs linked only because their node is a candidate for a pending job are left out: a pending job has
    no GPU telemetry of its own (the node fit table says why it waits; the inventory's GPU states and
    samples stay available to the diagnosis), and on a fleet those candidates are hundreds of GPUs, an
    arbitrary 32 of which would cost the collection seconds and tell the on-call nothing.
    """
    subject_nodes = {s.entity.name for s in links if s.entity.kind == "node" and s.role == "subject"}
    gpus = [s for s in links if s.entity.kind == "gpu"]
    if not gpus:
        return []
    # A GPU's node is its newest version's (a GPU never leaves the inventory: a missing one stays open as
    # "missing"). Its open version alone is read: a busy GPU has a version per pod that held it, and a
    # pending job links hundreds of candidate GPUs. Only a GPU without one (deleted) is read in full.
    ids = [s.entity.pk for s in gpus]
    nodes = dict(
        EntityVersion.objects.filter(entity_id__in=ids, valid_to__isnull=True).values_list(
            "entity_id", "node"
        )
    )
    closed = [pk for pk in ids if pk not in nodes]
    if closed:
        nodes.update(
            EntityVersion.objects.filter(entity_id__in=closed)
            .order_by("entity_id", "valid_from")
            .values_list("entity_id", "node")
        )
    pods = [s.entity for s in links if s.entity.kind == "pod"]
    pod_nodes = (
        set(EntityVersion.objects.filter(entity__in=pods).exclude(node="").values_list("node", flat=True))
        if pods
        else set()
    )

    def rank(s: IncidentSubject) -> tuple[int, str]:
        if s.role == "subject":
            return (0, s.entity.name)
        return (1 if nodes.get(s.entity.pk) in subject_nodes else 2, s.entity.name)

    wanted = [
        s
        for s in gpus
        if s.role == "subject"
        or nodes.get(s.entity.pk) in subject_nodes
        or nodes.get(s.entity.pk) in pod_nodes
    ]
    return [(s.entity.name, s.entity) for s in sorted(wanted, key=rank)[:MAX_GPUS]]


def collect_dcgm(
    batch: Batch,
    cluster: Cluster | None,
    links: list[IncidentSubject],
    start: datetime,
    end: datetime,
    *,
    gpus: list[tuple[str, Any]],
) -> None:
    """Series of ``gpus``, what ``pick_gpus(links)`` picked (the collection picks them once)."""
    if cluster is None or not gpus:
        return
    node_of = dict(
        EntityVersion.objects.filter(entity__in=[e for _, e in gpus]).values_list("entity__name", "node")
    )
    span = max((end - start).total_seconds(), 60.0)
    step = max(30, int(span // MAX_POINTS // 30 * 30) or 30)
    live_failed = True
    if cluster.prometheus_url:
        live_failed = not from_prometheus(batch, cluster.prometheus_url, gpus, node_of, start, end, step)
    if live_failed:
        from_samples(batch, gpus, node_of, start, end)


__all__ = [
    "MAX_GPUS",
    "MAX_POINTS",
    "METRICS",
    "SHARE_S",
    "anomalies",
    "collect_dcgm",
    "merge_points",
    "pick_gpus",
    "promql",
    "shared",
    "shared_range",
]
