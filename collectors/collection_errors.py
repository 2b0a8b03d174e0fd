"""The source calls that failed for a cluster in a window, one line per source: what a page may be missing."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from collectors.models import Cluster, SourceRun
from collectors.storage import raw_sql

SOURCE_LABELS = {
    "prometheus": ("Prometheus", "GPU telemetry missing for this window"),
    "k8s": ("The Kubernetes API", "objects and events may be stale for this window"),
    "kai": ("KAI Scheduler", "queue and quota state may be stale for this window"),
    "kueue": ("Kueue", "queue and quota state may be stale for this window"),
    "runai": ("The Run:ai API", "project policy may be stale for this window"),
}


@dataclass
class SourceTrouble:
    source: str
    label: str
    consequence: str
    first: datetime
    last: datetime
    count: int
    call: str
    error: str


_COLLECTION_ERRORS = (
    f"SELECT {raw_sql.SOURCE_RUN_SELECT} FROM {raw_sql.SOURCE_RUN} sr "
    "WHERE sr.cluster_id = %s AND NOT sr.ok AND sr.time >= %s AND sr.time <= %s ORDER BY sr.time LIMIT 200"
)


def collection_errors(cluster: Cluster, start: datetime, end: datetime) -> list[SourceTrouble]:
    """Failed source calls of this cluster in the window, one line per source (one query)."""
    found = raw_sql.fetch(_COLLECTION_ERRORS, [cluster.pk, raw_sql.db_time(start), raw_sql.db_time(end)])
    return troubles(raw_sql.source_run(r) for r in found)


def troubles(runs: Iterable[SourceRun]) -> list[SourceTrouble]:
    """Failed source calls (oldest first), one line per source."""
    out: dict[str, SourceTrouble] = {}
    for r in runs:
        label, consequence = SOURCE_LABELS.get(
            r.source, (r.source, "its data may be missing for this window")
        )
        tr = out.get(r.source)
        if tr is None:
            out[r.source] = SourceTrouble(r.source, label, consequence, r.time, r.time, 1, r.call, r.error)
        else:
            tr.last, tr.count, tr.call, tr.error = r.time, tr.count + 1, r.call, r.error
    return list(out.values())
