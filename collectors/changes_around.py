"""The changes an entity page shows: its objects' changes near t, and the nearest change on each side, in one
query whatever the length of history."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from collectors.models import Cluster
from collectors.queries import Ref, Related
from collectors.storage import raw_sql

CHANGES_PER_SIDE = 100  # changes of "changes around t" read on each side of t


class ChangeLine(NamedTuple):
    """One row of "changes around t": a :class:`Change`'s fields, and the object it changed as a :class:`Ref`.

    Read with ``values_list`` (no model instances: a page reads up to 200 of them and shows 50).
    """

    id: int
    time: datetime
    entity_id: int | None
    entity: Ref | None
    field: str
    old: Any
    new: Any
    source: str
    actor: str
    summary: str
    link: str


class ChangesAround(NamedTuple):
    """What an entity page shows of its objects' changes: the ones near t, and the nearest on each side."""

    lines: list[ChangeLine]  # within [t - w, t + w], oldest first: the ``shown`` nearest t of those read
    prev: datetime | None  # the last change before t, however old (cursor bar ⇤)
    next: datetime | None  # the first change after t, however far (cursor bar ⇥)
    limited: bool  # a side had more than ``limit`` changes in the window
    total: int  # changes read in the window (at most ``limit`` each side): ``lines`` are the nearest of them


def changes_around(
    cluster: Cluster,
    related: Related,
    t: datetime,
    window: timedelta,
    limit: int = CHANGES_PER_SIDE,
    shown: int | None = None,
) -> ChangesAround:
    """Changes of the related entities near t, and the change times just before and after t, in one query.

    Each side of t reads its ``limit`` changes nearest t in the window, so a busy window still shows the
    changes around t (not the oldest of the window); of those, the ``shown`` nearest t (all when None)
    become lines, and only their values are decoded. The previous and next change come from those rows;
    only when a side of the window is empty are they looked up further, one index probe per entity
    (COALESCE stops at its first value). So the cost follows the window and the number of entities, never
    the length of history. ``related`` are entities of this cluster, so the lookups filter on them alone:
    both backends then read the (entity, time) index.
    """
    if not related:
        return ChangesAround([], None, None, False, 0)
    at = raw_sql.db_time(t)
    ids = list(related)
    id_rows, id_params, id_col = raw_sql.id_rows(ids)
    side = f"""
    SELECT ch.id, ch.time, ch.entity_id, ch.field, ch.old, ch.new, ch.source, ch.actor, ch.summary, ch.link
    FROM {raw_sql.CHANGE} ch
    WHERE ch.cluster_id = %s AND ch.entity_id IN ({raw_sql.in_list(ids)}) AND WHEN_
    ORDER BY ORDER_
    LIMIT %s"""
    sql = f"""
WITH side_before AS ({side.replace("WHEN_", "ch.time >= %s AND ch.time <= %s").replace("ORDER_", "ch.time DESC, ch.id DESC")}),
     side_after AS ({side.replace("WHEN_", "ch.time > %s AND ch.time <= %s").replace("ORDER_", "ch.time, ch.id")})
SELECT n.prev, n.next, w.*
FROM (SELECT COALESCE(
          (SELECT MAX(time) FROM side_before WHERE time < %s),
          (SELECT MAX((SELECT c.time FROM {raw_sql.CHANGE} c WHERE c.entity_id = {id_col} AND c.time < %s
                       ORDER BY c.time DESC LIMIT 1)) FROM {id_rows})) AS prev,
        COALESCE(
          (SELECT MIN(time) FROM side_after),
          (SELECT MIN((SELECT c.time FROM {raw_sql.CHANGE} c WHERE c.entity_id = {id_col} AND c.time > %s
                       ORDER BY c.time LIMIT 1)) FROM {id_rows})) AS next) n
LEFT JOIN (SELECT * FROM side_before UNION ALL SELECT * FROM side_after) w ON 1 = 1
ORDER BY w.time, w.id"""
    start, end = raw_sql.db_time(t - window), raw_sql.db_time(t + window)
    params = [
        cluster.pk, *ids, start, at, limit,
        cluster.pk, *ids, at, end, limit,
        at, at, *id_params,
        at, *id_params,
    ]  # fmt: skip
    rows = raw_sql.fetch(sql, params)
    time_value, load = raw_sql.time_value, raw_sql.load_json
    # not the lone aggregate row (its change columns are NULL); a change always has a time
    found = [(when, row) for row in rows if row[2] is not None and (when := time_value(row[3])) is not None]
    at_or_before = sum(1 for when, _ in found if when <= t)
    limited = at_or_before >= limit or len(found) - at_or_before >= limit
    keep = found
    if shown is not None and len(found) > shown:  # the nearest t, back in time order (they are sorted)
        nearest = sorted(range(len(found)), key=lambda i: abs(found[i][0] - t))[:shown]
        keep = [found[i] for i in sorted(nearest)]
    lines = [
        ChangeLine(
            pk,
            when,
            entity_id,
            related.get(entity_id),
            field,
            load(old),
            load(new),
            source,
            actor,
            summary,
            link,
        )
        for when, (_, _, pk, _, entity_id, field, old, new, source, actor, summary, link) in keep
    ]
    return ChangesAround(lines, time_value(rows[0][0]), time_value(rows[0][1]), limited, len(found))
