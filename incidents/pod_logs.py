"""Previous-container logs of the incident's failing pods: why it crashed, in its own words (redacted by the source).

A pod whose containers restarted, or wait in CrashLoopBackOff, or last terminated in error gets its
previous log (200 lines) through ``collectors.sources.kubernetes.KubeSource.pod_log``; a log that could not
be read is a ``log`` observation with ``error`` (an absence is evidence too).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings

from collectors.models import Cluster, Entity, EntityVersion
from collectors.sources import kubernetes
from incidents.models import IncidentSubject
from rcaweb.ttlcache import TtlCache

if TYPE_CHECKING:
    from incidents.observation_batch import Batch

logger = logging.getLogger(__name__)

MAX_LOG_PODS = 5


def failing_containers(state: dict) -> list[str]:
    """Containers that restarted or are waiting/terminated in error: their previous log says why."""
    out = []
    for c in state.get("containers") or []:
        waiting = (c.get("state") or {}).get("waiting") or {}
        last = (c.get("last_state") or {}).get("terminated") or {}
        if c.get("restart_count") or waiting.get("reason") in ("CrashLoopBackOff", "Error") or last:
            out.append(c.get("name") or "")
    return out


def collect_logs(
    batch: Batch, cluster: Cluster | None, links: list[IncidentSubject], start: datetime, end: datetime
) -> None:
    pods = [s.entity for s in links if s.entity.kind == "pod"]
    if cluster is None or not pods:
        return
    versions = (
        EntityVersion.objects.overlapping(start, end)
        .filter(entity__in=pods)
        .order_by("entity_id", "-valid_from")
    )
    latest: dict[int, EntityVersion] = {}
    for v in versions:
        latest.setdefault(v.entity_id, v)
    targets = [
        (next(p for p in pods if p.pk == eid), c, v)
        for eid, v in latest.items()
        for c in failing_containers(v.state)
    ]
    if not targets:
        return
    targets = targets[:MAX_LOG_PODS]
    texts: dict[tuple[int, str], str] = {}  # (pod id, container) -> log, from a recent identical read
    for pod, container, v in targets:
        hit = shared.get(_share_key(cluster, pod, container, v), _ttl())
        if hit is not None:
            texts[(pod.pk, container)] = hit
    missing = [(pod, container, v) for pod, container, v in targets if (pod.pk, container) not in texts]
    source: Any = None  # a KubeSource, made only when some log is not in the shared cache
    if missing:
        try:
            source = kubernetes.KubeSource(cluster)
        except Exception as exc:  # credentials that do not load: an absence, recorded
            for pod, container, _ in missing:
                _log_error(batch, pod, container, end, exc)
            missing = []
    try:
        for pod, container, v in missing:
            try:
                text = source.pod_log(
                    pod.namespace, pod.name, container=container or None, previous=True, tail_lines=200
                )
            except Exception as exc:
                _log_error(batch, pod, container, end, exc)
                continue
            texts[(pod.pk, container)] = text
            shared.put(_share_key(cluster, pod, container, v), text, _ttl())
    finally:
        close = getattr(source, "close", None)
        if close:
            close()
    for pod, container, _ in targets:
        text = texts.get((pod.pk, container))
        if text is None:
            continue
        lines = text.splitlines()[-200:]
        batch.add(
            kind="log",
            source="log",
            locator=_log_path(pod, container),
            observed_at=end,
            content={"container": container, "previous": True, "lines": lines},
            key=f"log:{pod.pk}:{container}:previous",
            entity=pod,
            summary=f"log of {pod.namespace}/{pod.name} [{container}] (previous): {lines[-1] if lines else '(empty)'}",
        )


# Incidents about one pod (its own alert, its job's, its node's) collected within a short time read its previous
# log once: the answer is shared for RCAWEB_EVIDENCE_SHARE_S, keyed by the container's restart count, so a new
# crash is read anew. Failures are not shared. 0 turns it off (tests: every test its own).
shared: TtlCache[str] = TtlCache(max_entries=256)


def _share_key(cluster: Cluster, pod: Entity, container: str, version: EntityVersion) -> tuple[Any, ...]:
    restarts = next(
        (
            c.get("restart_count")
            for c in (version.state or {}).get("containers") or []
            if (c.get("name") or "") == container
        ),
        None,
    )
    return (cluster.pk, pod.namespace, pod.name, container, restarts)


def _ttl() -> float:
    return float(getattr(settings, "RCAWEB_EVIDENCE_SHARE_S", 60))




def _log_path(pod: Entity, container: str) -> str:
    return f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/log?container={container}&previous=true&tailLines=200"


def _log_error(batch: Batch, pod: Entity, container: str, at: datetime, exc: Exception) -> None:
    call = f"log {pod.namespace}/{pod.name} previous"
    batch.add(
        kind="log",
        source="log",
        locator=_log_path(pod, container),
        observed_at=at,
        content={"source": "k8s", "call": call},
        key=f"log-error:{pod.pk}:{container}",
        entity=pod,
        summary=f"Kubernetes did not return the log of {pod.namespace}/{pod.name}",
        error=f"Kubernetes: {exc}",
    )
