"""Citations: how a check cites an inventory object, a change, an event or a DCGM series.

A citation is the incident Observation showing the fact when one was collected, else a :class:`Derived`
fact computed from the inventory, which ``incidents.diagnosis_run`` stores before citing it.
"""

from __future__ import annotations

from datetime import datetime

from collectors.changefmt import describe_change
from incidents.diagnosis.types import ChangeRec, Cite, Derived, EntityState, EventRec, Ref, Series, hhmm, iso


def cite_state(es: EntityState, t: datetime) -> Cite:
    """Cite an object's state at t: its incident observation when collected, else the inventory fact."""
    if es.obs_id is not None:
        return es.obs_id
    return Derived(
        kind=f"{es.kind}_state",
        locator=f"inventory {es.kind} {es.ref.label} as of {iso(t)}",
        content={"state": es.state, "valid_from": iso(es.valid_from), "valid_to": iso(es.valid_to)},
        summary=f"{es.kind} {es.ref.label} as of {hhmm(t)}",
        observed_at=es.valid_from or t,
        entity=es.ref,
    )


def cite_change(ch: ChangeRec) -> Cite:
    if ch.obs_id is not None:
        return ch.obs_id
    who = f" by {ch.actor}" if ch.actor else ""
    target = ch.entity.label if ch.entity else "external"
    return Derived(
        kind="change",
        locator=f"inventory change {ch.entity.kind if ch.entity else 'external'} {target} {ch.field} at {iso(ch.time)}",
        content={
            "field": ch.field,
            "old": ch.old,
            "new": ch.new,
            "actor": ch.actor,
            "source": ch.source,
            "summary": ch.summary,
            "link": ch.link,
            "entity": {"kind": ch.entity.kind, "namespace": ch.entity.namespace, "name": ch.entity.name}
            if ch.entity
            else None,
        },
        summary=f"{target} {describe_change(ch.field, ch.old, ch.new)}{who}",
        observed_at=ch.time,
        entity=ch.entity,
        source="change",
    )


def cite_event(ev: EventRec) -> Cite:
    if ev.obs_id is not None:
        return ev.obs_id
    target = ev.involved.label if ev.involved else "?"
    return Derived(
        kind="event",
        locator=f"inventory event {ev.involved.kind if ev.involved else ''} {target} {ev.reason} at {iso(ev.time)}",
        content={
            "reason": ev.reason,
            "message": ev.message,
            "type": ev.type,
            "count": ev.count,
            "component": ev.component,
            "last_time": iso(ev.time),
            "first_time": iso(ev.first_time),
            "involved": {
                "kind": ev.involved.kind,
                "namespace": ev.involved.namespace,
                "name": ev.involved.name,
            }
            if ev.involved
            else None,
        },
        summary=f"{ev.reason} on {target}: {ev.message[:200]}",
        observed_at=ev.time,
        entity=ev.involved,
        source="k8s",
    )


def cite_series(s: Series) -> Cite:
    if s.obs_id is not None:
        return s.obs_id
    return Derived(
        kind="dcgm_series",
        locator=s.locator or f'{s.metric}{{UUID="{s.uuid}"}}',
        content={
            "metric": s.metric,
            "uuid": s.uuid,
            "node": s.node,
            "points": [[iso(ts), v] for ts, v in s.points],
        },
        summary=f"{s.metric} of {s.uuid} on {s.node}",
        observed_at=s.points[-1][0] if s.points else datetime.min,
        entity=Ref("gpu", s.uuid),
        source="prometheus",
    )
