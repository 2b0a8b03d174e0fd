"""When will a waiting job start: the queue replayed forward from t with the running jobs' expected ends (issue 44,
item 4).

Each running job is expected to end by its own runtime limit where it has one (``activeDeadlineSeconds``,
``active_deadline_seconds`` in its state: started + limit at the latest), otherwise within the spread of the
durations of finished jobs of the same project and shape over the window (``Basis``, loaded by
``incidents.eta_input``): between the lower and the upper quartile. ``incidents.diagnosis.replay`` frees the
GPUs of the jobs that end, in the order they end, and places the waiting jobs ahead of it in the pass's order
after each group of ends; the jobs it starts run from then on (their own expected end joins the list) until the
job is placed. Done twice, once with every job ending early and once late, it gives a range: "likely
14:10–15:30: 3 running jobs end by then". Where no expected end frees what it waits for, the answer is
"unknown", and why.

Bounded: ``replay.MAX_STEPS`` groups of ends per replay, ends within ``replay.HORIZON``. Pure: no database, no
simulator.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from incidents.diagnosis import replay
from incidents.diagnosis.quota import is_pending
from incidents.diagnosis.scheduling_pass import PLACED, STARTS, ClusterPass
from incidents.diagnosis.types import DiagnosisInput, EntityState, hhmm, parse_ts

MIN_FINISHED = 1  # finished jobs of a project and shape needed to expect a running one's end


Shape = tuple[str, int, str]  # (project, pods, what each pod asks: "8", "0.5", "mig:1g.10gb")


def shape_of(state: dict[str, Any]) -> Shape:
    """A job's project and shape as its state records them (the same for a running and a finished job)."""
    share = state.get("gpu_share") or {}
    mig = state.get("mig") or {}
    if mig:
        what = "mig:" + "+".join(f"{n}x{p}" for p, n in sorted(mig.items()))
    elif share.get("fraction") is not None:
        what = f"{float(share['fraction']):g}"
    elif share.get("memory_mib") is not None:
        what = f"{int(share['memory_mib'])}MiB"
    else:
        what = str(int(state.get("gpus_per_pod") or 0))
    return (str(state.get("project") or state.get("queue") or ""), int(state.get("pods") or 1), what)


def shape_words(shape: Shape) -> str:
    project, pods, what = shape
    each = f"MIG {what[4:]}" if what.startswith("mig:") else what
    return f"{project} {pods}×{each}"


@dataclass
class Basis:
    """What the replay reads besides the state at t: finished jobs' durations (seconds) per project and shape over
    ``window`` before t, and the running jobs' runtime limits (seconds) by (namespace, name)."""

    window: timedelta
    durations: dict[Shape, list[float]] = field(default_factory=dict)
    limits: dict[tuple[str, str], float] = field(default_factory=dict)
    truncated: bool = False  # the finished jobs read stopped at the loader's bound


@dataclass
class End:
    """A running job's expected end: between ``lo`` and ``hi``, and on what basis."""

    label: str
    lo: datetime
    hi: datetime
    by_limit: bool
    samples: int = 0  # finished jobs the spread comes from

    @property
    def namespace(self) -> str:
        return self.label.partition("/")[0]

    @property
    def name(self) -> str:
        return self.label.partition("/")[2]


def expected_end(job: EntityState, t: datetime, basis: Basis) -> End | None:
    """The job's expected end (None: neither a runtime limit nor finished jobs of its project and shape)."""
    started = parse_ts(job.get("started")) or parse_ts(job.get("submitted"))
    if started is None:
        return None
    limit = basis.limits.get((job.namespace, job.name))
    if limit is None and job.get("active_deadline_seconds") is not None:
        limit = float(job.get("active_deadline_seconds"))
    runs = sorted(basis.durations.get(shape_of(job.state), []))
    if limit is not None:
        hi = started + timedelta(seconds=limit)
        lo = started + timedelta(seconds=min(_quantile(runs, 0.25), limit)) if runs else hi
        return End(job.ref.label, max(lo, t), max(hi, t), True, len(runs))
    if len(runs) < MIN_FINISHED:
        return None
    lo = started + timedelta(seconds=_quantile(runs, 0.25))
    hi = started + timedelta(seconds=_quantile(runs, 0.75))
    if hi < t and started + timedelta(seconds=runs[-1]) < t:
        return None  # it has run longer than every finished job of its kind: its end is anyone's guess
    return End(job.ref.label, max(lo, t), max(hi, t), False, len(runs))


def _quantile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    if q == 0.5:
        return statistics.median(values)
    return statistics.quantiles(values, n=4, method="inclusive")[0 if q < 0.5 else 2]


def median_minutes(basis: Basis, shape: Shape) -> float | None:
    runs = basis.durations.get(shape)
    return round(statistics.median(runs) / 60, 1) if runs else None


@dataclass
class Eta:
    """When the job is likely to start, or why that is unknown."""

    t: datetime
    lo: datetime | None = None
    hi: datetime | None = None
    now: bool = False
    unknown: str = ""
    ended: list[End] = field(default_factory=list)  # the running jobs that end before it starts (late replay)
    started_first: list[str] = field(default_factory=list)  # waiting jobs the replay starts before it
    no_end: int = 0  # running jobs with no expected end
    passes: int = 0  # replay steps, early and late
    window: timedelta = timedelta(0)  # the finished jobs' window (Basis.window)

    @property
    def window_words(self) -> str:
        return _span(self.window)

    @property
    def words(self) -> str:
        if self.now:
            return "now: the next scheduling pass starts it"
        if self.unknown:
            return f"unknown: {self.unknown}"
        assert self.lo is not None
        if self.hi is None:
            span = f"not before {hhmm(self.lo)} (the late end is unknown)"
        elif hhmm(self.hi) == hhmm(self.lo):
            span = hhmm(self.lo)
        else:
            span = f"{hhmm(self.lo)}–{hhmm(self.hi)}"
        if self.lo.date() != self.t.date():
            span += f" (from {self.lo:%Y-%m-%d})"
        return f"likely {span}: {self.basis_words}"

    @property
    def basis_words(self) -> str:
        limit = sum(1 for e in self.ended if e.by_limit)
        median = len(self.ended) - limit
        how = []
        if limit:
            how.append(f"{limit} by its runtime limit" if limit == 1 else f"{limit} by their runtime limits")
        if median:
            how.append(f"{median} by the durations of finished jobs of the same project and shape")
        out = f"{len(self.ended)} running job(s) end by then ({'; '.join(how)})"
        if self.started_first:
            out += f", and {len(self.started_first)} job(s) ahead start first"
        return out


def eta(di: DiagnosisInput, job: EntityState, base: ClusterPass, basis: Basis) -> Eta:
    """The job's ETA (module doc). ``base`` is the pass over the state at t. Call outside ``di.indexed()`` (the
    replay edits copies of ``di``)."""
    out = Eta(t=di.t, window=basis.window)
    me = base.find(job.namespace, job.name)
    if not is_pending(job):
        out.unknown = "it is not waiting"
        return out
    if me is None:
        out.unknown = f"it is beyond the first {len(base.considered)} waiting jobs one pass considers"
        return out
    if me.outcome == STARTS:
        out.now, out.lo, out.hi = True, di.t, di.t
        return out
    if me.outcome == PLACED:
        out.unknown = "its pods are bound: it waits on its containers, not on the scheduler"
        return out
    ends: list[End] = []
    for j in di.jobs:
        if is_pending(j) or j.get("phase") not in ("Running",):
            continue
        e = expected_end(j, di.t, basis)
        if e is None:
            out.no_end += 1
        else:
            ends.append(e)
    if not ends:
        out.unknown = (
            f"none of the {out.no_end} running job(s) has a runtime limit, nor finished jobs of its project and "
            f"shape over the {_span(basis.window)} before t"
        )
        return out
    if not me.whole:
        out.unknown = "the replay weighs whole GPUs: a share's or a MIG instance's start is not replayed"
        return out
    with di.indexed():
        room = replay.build(di, job, base)
    if room is None:
        out.unknown = "the pass at t did not reach it"
        return out
    end_of = lambda j, when: expected_end(j, when, basis)  # noqa: E731
    # each replay takes its own copy of who holds what
    early = replay.replay(replace(room, holders=dict(room.holders)), ends, end_of, late=False)
    late = replay.replay(replace(room, holders=dict(room.holders)), ends, end_of, late=True)
    out.passes = early.steps + late.steps
    if early.at is None:
        out.unknown = early.why + _no_end_words(out.no_end)
        return out
    out.lo, out.hi = early.at, late.at
    out.ended = late.ended if late.at is not None else early.ended
    out.started_first = (late if late.at is not None else early).started
    return out


def _span(d: timedelta) -> str:
    hours = d.total_seconds() / 3600
    return f"{hours:g} h" if hours < 48 else f"{hours / 24:g} days"


def _no_end_words(n: int) -> str:
    return f"; {n} running job(s) have no expected end" if n else ""


__all__ = ["Basis", "End", "Eta", "eta", "expected_end", "shape_of"]
