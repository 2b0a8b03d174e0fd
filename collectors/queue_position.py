"""A pending job's position in its queue, and waiting jobs in the order the pages list them
(``collectors.queue_order``: priority, then submission, then the job recorded first)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import connection

from collectors.models import Cluster, EntityVersion
from collectors.queue_order import NEVER_SUBMITTED, order_key
from collectors.storage import raw_sql

_PENDING_AT = raw_sql.valid_at(f"""
      SELECT v.entity_id, v.priority, COALESCE(v.submitted, %s) AS submitted
      FROM {raw_sql.EV} v INDEXED_BY
      WHERE v.kind = 'job' AND v.phase = 'Pending' AND NOT v.deleted AND v.cluster_id = %s AND v.queue = %s
        AND VALID_TO AND v.valid_from <= %s""")
_QUEUE_POSITION = f"""
SELECT COUNT(*),
       COALESCE(SUM(CASE WHEN p.priority > %s
                           OR (p.priority = %s AND (p.submitted < %s OR (p.submitted = %s AND p.entity_id < %s)))
                         THEN 1 ELSE 0 END), 0)
FROM ({_PENDING_AT}) p"""


def queue_position(cluster: Cluster, version: EntityVersion, t: datetime) -> tuple[int, int] | None:
    """(position, waiting) of a pending job in its queue at t, in :func:`queue_order` order.

    One aggregate query that reads only the pending-jobs index (``ev_pending_job``: the typed priority and
    submission time are index columns), so a queue with thousands of waiting jobs costs little more than a
    short one. ``kind``, ``phase`` and ``deleted`` are literals: the partial index applies only then.
    """
    neg_priority, mine_sub, mine_id = queue_order_key(version)
    mine_p = -neg_priority
    # SQLite ranks the general queue index as high, and would read the queue's running jobs too
    indexed_by = "" if connection.vendor == "postgresql" else "INDEXED BY ev_pending_job"
    at, never, sub = raw_sql.db_time(t), raw_sql.db_time(NEVER_SUBMITTED), raw_sql.db_time(mine_sub)
    arm = [never, cluster.pk, version.queue]
    total, ahead = raw_sql.fetch(
        _QUEUE_POSITION.replace("INDEXED_BY", indexed_by),
        [mine_p, mine_p, sub, sub, mine_id, *arm, at, *arm, at, at],
    )[0]
    if not total:
        return None
    return (int(ahead) + 1, int(total))


def queue_order_key(version: EntityVersion) -> tuple[int, datetime, int]:
    """:func:`collectors.queue_order.order_key` of a job version."""
    return order_key(version.state or {}, version.entity_id)


def queue_order(jobs: Iterable[EntityVersion]) -> list[EntityVersion]:
    """Waiting jobs in the order the scheduler considers them: higher priority first, then earlier submission.

    Ties go to the job recorded first (entity id), the same rule :func:`queue_position` counts in SQL.
    """
    return sorted(jobs, key=queue_order_key)
