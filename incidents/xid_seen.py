"""A GPU's last Xid and when it was first seen, from the inventory and the alerts: one answer for every page.

DCGM reports the last Xid as ``DCGM_FI_DEV_XID_ERRORS`` and the inventory records when that value changed
(``Change`` of ``xid_last``). A GPU that falls off the bus (Xid 79) stops reporting before DCGM can say so;
its Xid is then known from the alerts about it (a GPUXidError rule carries the code as a label) and from
the node's events (the driver's ``NVRM: Xid (PCI:…): 79`` relayed by node-problem-detector). The GPU page,
the node page's GPU rows and the incident's diagnosis (incidents.diagnosis.health.xid_codes, which reads the
same three sources plus the raw series) all date an Xid by when it was first seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from collectors.models import Change, EntityVersion, KubeEvent
from incidents.diagnosis.xid import XID_TEXT  # pure: the same reading of driver messages as the diagnosis
from incidents.models import Alert  # the alerts about a GPU are facts about it, whoever stored them

XID_LABELS = ("xid", "Xid", "err_code")


@dataclass(frozen=True)
class XidSeen:
    code: int
    at: datetime
    source: str  # "dcgm" (the inventory's record of the DCGM field), "alert <name>", "event <reason>"


def last_xids(gpus: list[EntityVersion], t: datetime) -> dict[int, XidSeen]:
    """{gpu entity id: its latest Xid up to t}, for GPU versions at t; at most three queries for any number
    of GPUs (none for GPUs that report no Xid; alerts and events only for a faulty or vanished GPU)."""
    if not gpus:
        return {}
    out: dict[int, XidSeen] = {}

    def keep(eid: int, seen: XidSeen) -> None:
        if eid not in out or seen.at > out[eid].at:
            out[eid] = seen

    # Only GPUs that report an Xid, or stopped reporting, have one to date: a healthy node costs no query.
    ids = [g.entity_id for g in gpus if _code((g.state or {}).get("xid_last"))]
    for ch in (
        Change.objects.filter(entity_id__in=ids, field="xid_last", time__lte=t).order_by("time", "id")
        if ids
        else ()
    ):
        code = _code(ch.new)
        if code and ch.entity_id is not None:  # always set: the filter is on these GPUs' ids
            keep(ch.entity_id, XidSeen(code, ch.time, "dcgm"))
    for g in gpus:  # seen at the first sweep already: no change recorded, the version says since when
        code = _code((g.state or {}).get("xid_last"))
        if code and g.entity_id not in out:
            keep(g.entity_id, XidSeen(code, g.valid_from, "dcgm"))
    quiet = [g for g in gpus if (g.state or {}).get("present") is False or g.phase in ("faulty", "missing")]
    if not quiet:
        return out
    by_uuid = {g.entity.name: g.entity_id for g in quiet}
    by_slot = {(g.node, str((g.state or {}).get("index", ""))): g.entity_id for g in quiet if g.node}
    cluster = quiet[0].entity.cluster
    alerts = Alert.objects.filter(starts_at__lte=t, cluster_name__in=[cluster.name, ""]).filter(
        name__icontains="xid"
    )
    for a in alerts.order_by("starts_at", "id")[:500]:
        labels: dict[str, Any] = a.labels or {}
        code = next((_code(labels.get(k)) for k in XID_LABELS if _code(labels.get(k))), 0)
        node = labels.get("node") or labels.get("Hostname") or labels.get("hostname") or ""
        eid = by_uuid.get(labels.get("UUID", "")) or by_slot.get((node, str(labels.get("gpu", ""))))
        if code and eid:
            keep(eid, XidSeen(code, a.starts_at, f"alert {a.name}"))
    missing = {g.node for g in gpus if g.node and (g.state or {}).get("present") is False}
    if missing:
        events = KubeEvent.objects.filter(
            cluster=cluster, involved_kind="Node", involved_name__in=missing, first_time__lte=t
        ).filter(message__icontains="xid")
        vanished = {g.node: g.entity_id for g in gpus if (g.state or {}).get("present") is False}
        for ev in events.order_by("first_time")[:200]:
            m = XID_TEXT.search(ev.message or "")
            if m and ev.involved_name in vanished:
                keep(
                    vanished[ev.involved_name], XidSeen(int(m.group(1)), ev.first_time, f"event {ev.reason}")
                )
    return out


def _code(value: Any) -> int:
    try:
        return max(int(float(value)), 0)
    except (TypeError, ValueError):
        return 0
