"""Kubernetes Events outlive their 1 h TTL here: each (uid, count) is stored once, message redacted."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from collectors.models import Cluster, KubeEvent
from collectors.sources.kubernetes import KubeSource
from collectors.sources.redact import redact_text
from collectors.sweep.cluster_lock import cluster_lock
from collectors.sweep.runner import Runner
from collectors.sweep.summary import SweepSummary
from collectors.sweep.target import resolve
from rcaweb.timestamps import timestamp_or_none

logger = logging.getLogger(__name__)


def event_key(obj: dict[str, Any]) -> tuple[str, int] | None:
    """What an Event is stored once by: (uid, count); None without a uid."""
    m = obj.get("metadata") or {}
    uid = m.get("uid")
    if not uid:
        return None
    series = obj.get("series") or {}
    return str(uid)[:64], int(obj.get("count") or series.get("count") or 1)


def map_event(cluster: Cluster, obj: dict[str, Any], fallback: datetime) -> KubeEvent | None:
    """core/v1 Event → KubeEvent; events.k8s.io-style fields (eventTime, series) are understood too."""
    key = event_key(obj)
    if key is None:
        return None
    m = obj.get("metadata") or {}
    inv = obj.get("involvedObject") or obj.get("regarding") or {}
    series = obj.get("series") or {}
    first = (
        timestamp_or_none(obj.get("firstTimestamp"))
        or timestamp_or_none(obj.get("eventTime"))
        or timestamp_or_none(m.get("creationTimestamp"))
        or fallback
    )
    last = (
        timestamp_or_none(obj.get("lastTimestamp"))
        or timestamp_or_none(series.get("lastObservedTime"))
        or timestamp_or_none(obj.get("eventTime"))
        or first
    )
    source = obj.get("source") or {}
    return KubeEvent(
        cluster=cluster,
        uid=key[0],
        count=key[1],
        namespace=m.get("namespace", "") or "",
        involved_kind=(inv.get("kind") or "")[:64],
        involved_name=(inv.get("name") or "")[:253],
        involved_namespace=(inv.get("namespace") or "")[:253],
        reason=(obj.get("reason") or "")[:128],
        message=redact_text(obj.get("message") or obj.get("note") or ""),
        type=(obj.get("type") or "Normal")[:16],
        component=(
            source.get("component") or obj.get("reportingComponent") or obj.get("reportingController") or ""
        )[:128],
        first_time=first,
        last_time=last,
    )


# Per cluster (row, name, kubeconfig): the (uid, count) pairs of its last complete Event listing, all stored by
# then. An Event listed again with the same pair is neither decoded nor looked up (a listing repeats every
# Event of the last hour); pairs no longer listed are forgotten with the next listing. Sweeps of one cluster
# never run at once (cluster_lock).
_listed: dict[tuple[Any, ...], set[tuple[str, int]]] = {}
_STORED = object()  # what the listing yields in place of an Event stored already


def sweep_events(cluster_name: str, at: datetime | None = None) -> SweepSummary:
    """List events (paginated) and store the ones not seen yet, deduplicated on (uid, count)."""
    cluster, at = resolve(cluster_name, at)
    summary = SweepSummary(cluster=cluster.name, at=at, kind="events")
    started = time.monotonic()
    memo_key = (cluster.pk, cluster.name, cluster.kubeconfig)
    known = _listed.get(memo_key, set())
    again: set[tuple[str, int]] = set()

    def reuse(obj: Any) -> object | None:
        """``_STORED`` for an Event the last listing had (read undecoded), else None: decode it."""
        key = _key_or_none(obj)
        if key is None or key not in known:
            return None
        again.add(key)
        return _STORED

    def listing(kube: KubeSource) -> list[dict[str, Any]]:
        fn = kube.core.list_event_for_all_namespaces
        return [obj for obj in kube.iter_reusing("list events", fn, reuse) if obj is not _STORED]

    with cluster_lock(cluster.name, "events") as got:
        if not got:
            summary.skipped = True
            return summary
        runner = Runner(cluster, at, summary)
        try:
            kube = runner.call("k8s", "connect", lambda: KubeSource(cluster))
            if kube is not None:
                try:
                    raw = runner.call("k8s", "list events", lambda: listing(kube))
                finally:
                    kube.close()
                if raw is not None:
                    summary.events_new = store_events(cluster, raw, at)
                    summary.seen = len(raw) + len(again)
                    runner.set_rows("list events", summary.events_new)
                    stored = {key for obj in raw if (key := _key_or_none(obj)) is not None}
                    for stale in [k for k in _listed if k[0] == memo_key[0] or k[1] == memo_key[1]]:
                        del _listed[stale]
                    _listed[memo_key] = again | stored
        finally:
            runner.save()
    summary.duration_s = time.monotonic() - started
    return summary


def _key_or_none(obj: Any) -> tuple[str, int] | None:
    """``event_key``, None when the count is malformed (store_events then says what it makes of it)."""
    try:
        return event_key(obj)
    except (TypeError, ValueError):
        return None


def store_events(cluster: Cluster, raw: list[dict[str, Any]], at: datetime) -> int:
    """Insert the (uid, count) pairs not stored yet; returns how many were new. Only those are mapped (and
    their messages redacted): a listing repeats every Event of the last hour, most of them stored already."""
    objs: dict[tuple[str, int], dict[str, Any]] = {}
    for obj in raw:
        key = event_key(obj)
        if key is not None:
            objs[key] = obj
    if not objs:
        return 0
    uids = list({uid for uid, _ in objs})
    existing: set[tuple[str, int]] = set()
    for i in range(0, len(uids), 900):
        existing.update(
            KubeEvent.objects.filter(cluster=cluster, uid__in=uids[i : i + 900]).values_list("uid", "count")
        )
    new = [ev for key, obj in objs.items() if key not in existing and (ev := map_event(cluster, obj, at))]
    KubeEvent.objects.bulk_create(new, batch_size=2000, ignore_conflicts=True)
    return len(new)
