"""The incident page's timeline: alerts and observations on one time axis, bounded and folded.

Rows that repeat an earlier row (an event every 5 min) fold into their first; many state versions or changes
of one kind at one instant (a first sweep: 16 GPUs "ok") become one row.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from incidents.models import Incident, Observation

TIMELINE_KINDS = (
    "event",
    "change",
    "telemetry_anomaly",
    "job_state",
    "pod_state",
    "node_state",
    "gpu_state",
    "queue_state",
    "project_state",
)
TIMELINE_MAX = 300
TIMELINE_SHOWN = 30  # rows in the first view; the rest are folded under "N more rows"
COLLAPSE_OVER = 3


@dataclass
class Row:
    """One timeline row: an alert or an observation, on the incident's time axis."""

    time: datetime
    kind: str
    source: str
    text: str
    entity: object = None
    url: str = ""
    error: str = ""
    gist: str = ""  # what several simultaneous rows have in common, when they are folded into one
    repeats: int = 1  # the same row seen again later (an event every 5 min): folded into its first
    last: datetime | None = None  # the time of its last repeat


def timeline(incident: Incident) -> tuple[list[Row], bool]:
    """Alerts and observations interleaved on one axis (bounded; states only when they say something new)."""
    rows: list[Row] = []
    for a in incident.alerts.order_by("starts_at", "id"):
        rows.append(
            Row(
                a.starts_at,
                "alert",
                "alert",
                f"{a.name} fired ({a.severity or 'no severity'})",
                url=a.get_absolute_url(),
            )
        )
        if a.ends_at:
            rows.append(Row(a.ends_at, "alert", "alert", f"{a.name} resolved", url=a.get_absolute_url()))
    obs: list[Observation] = list(
        Observation.objects.filter(incident=incident)
        .filter(Q(kind__in=TIMELINE_KINDS) | ~Q(error=""))
        .only("observed_at", "kind", "source", "summary", "error", "entity", "locator")
        .select_related("entity", "entity__cluster")
        .order_by("observed_at", "id")[: TIMELINE_MAX + 1]
    )
    for o in obs[:TIMELINE_MAX]:
        text = o.summary or o.locator
        rows.append(
            Row(o.observed_at, o.kind, o.source, text, entity=o.entity, error=o.error, gist=_gist(o, text))
        )
    rows.sort(key=lambda r: (r.time, r.kind != "alert", r.kind))
    return _fold_repeats(_collapse(rows)), len(obs) > TIMELINE_MAX


def _fold_repeats(rows: list[Row]) -> list[Row]:
    """A row that says again what an earlier row said (the scheduler's Unschedulable event every 5 min, a
    state recorded unchanged) is folded into the first: one row with the count and the last time."""
    out: list[Row] = []
    first: dict[tuple[str, str, int | None, str], Row] = {}
    for r in rows:
        if r.kind == "alert" or r.error:
            out.append(r)
            continue
        key = (r.kind, r.source, getattr(r.entity, "pk", None), r.text)
        seen = first.get(key)
        if seen is None:
            first[key] = r
            out.append(r)
        else:
            seen.repeats += 1
            seen.last = r.time
    return out


def _gist(o: Observation, text: str) -> str:
    """ "gpu created", "gpu pod", "Ready": the part simultaneous rows share (changes: kind + field; states: the tail)."""
    if o.kind == "change" and o.entity is not None:
        field = text[len(str(o.entity)) :].strip().split(":", 1)[0]
        return f"{o.entity.kind} {field}"
    if o.kind.endswith("_state"):
        return text.rsplit(" · ", 1)[-1] if " · " in text else "recorded"
    return ""


def _collapse(rows: list[Row]) -> list[Row]:
    """Many state versions or changes of one kind at the same instant (a first sweep: 16 GPUs "ok") become one row."""
    out: list[Row] = []
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j].kind == rows[i].kind and rows[j].time == rows[i].time:
            j += 1
        group = rows[i:j]
        foldable = rows[i].kind == "change" or rows[i].kind.endswith("_state")
        if len(group) > COLLAPSE_OVER and foldable and not any(r.error for r in group):
            gists = Counter(r.gist or "other" for r in group)
            what = ", ".join(f"{g} ×{n}" for g, n in gists.most_common(4))
            noun = "changes" if rows[i].kind == "change" else rows[i].kind.replace("_state", "") + " versions"
            out.append(Row(rows[i].time, rows[i].kind, rows[i].source, f"{len(group)} {noun}: {what}"))
        else:
            out.extend(group)
        i = j
    return out
