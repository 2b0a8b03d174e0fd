"""When will a waiting job start, and which start within the hour: the queue replayed forward from t with the
running jobs' expected ends (issue 44, item 4).

The pass at t (``scheduling_pass.cluster_pass``) starts what the free room holds; the scheduler has usually
taken that room by the time the inventory is read, so what starts next is what the running jobs' ends give
back. Each running job is expected to end by its own runtime limit where it has one (``activeDeadlineSeconds``,
``active_deadline_seconds`` in its state: started + limit at the latest), otherwise within the spread of the
durations of the finished jobs of the same project and shape over the window (``Basis``, loaded by
``incidents.eta_input``) that ran longer than it has so far (else of the same project, any shape): its lower
quartile, median and upper quartile. ``incidents.diagnosis.replay`` frees the GPUs of the jobs that end, in the
order they end, and serves every waiting job in the pass's order after each group of ends; the jobs it starts run
from then on (their own expected end joins the list). One replay answers every waiting job (``forecast``); done
three times (every job ending early, likely and late) it gives a range and a likely start: "likely 14:10–15:30:
3 running jobs end by then". Where no expected end frees what a job waits for, its answer is "unknown", and why.

Bounded: ``replay.MAX_STEPS`` groups of ends per replay, ends within ``replay.HORIZON``. Pure: no database, no
simulator.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from incidents.diagnosis import replay
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.scheduling_pass import PLACED, STARTS, ClusterPass
from incidents.diagnosis.types import DiagnosisInput, EntityState, hhmm, parse_ts

MIN_FINISHED = 1  # finished jobs that ran longer than a running one needed to expect its end
# Below this many, the finished jobs of its project and shape that ran longer than it has are too few to say how
# much longer it runs (the longest of three is short of the tail): its project's, of any shape, are read instead.
ENOUGH_LONGER = 4
SAME_SHAPE = "of its project and shape"
SAME_PROJECT = "of its project (any shape)"


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
    ``window`` before t, and the running jobs' runtime limits (seconds) by (namespace, name). ``running`` holds
    how long the jobs running at t have run so far, per project and shape (``observe``): each is a duration not
    yet over, which the spread must weigh too (``survival``)."""

    window: timedelta
    durations: dict[Shape, list[float]] = field(default_factory=dict)
    limits: dict[tuple[str, str], float] = field(default_factory=dict)
    truncated: bool = False  # the finished jobs read stopped at the loader's bound
    running: dict[Shape, list[float]] = field(default_factory=dict)
    _curves: dict[tuple[str, object], Curve] = field(default_factory=dict, repr=False, compare=False)

    def observe(self, di: DiagnosisInput) -> None:
        """Record how long each job running at t has run (its shape's durations not yet over)."""
        self.running = {}
        self._curves = {}
        for j in di.jobs:
            if j.state.get("phase") != "Running":
                continue
            started = parse_ts(j.get("started"))
            if started is not None and started <= di.t:
                self.running.setdefault(shape_of(j.state), []).append((di.t - started).total_seconds())

    def kinds(self, shape: Shape) -> list[tuple[str, Curve]]:
        """The durations a running job of ``shape`` is read from, nearest first: its project and shape, then its
        project (any shape); each as (words, survival curve). Never another project's: a service that runs
        until stopped is not expected to end because other projects' batch jobs do."""
        out = []
        for words, key in ((SAME_SHAPE, ("shape", shape)), (SAME_PROJECT, ("project", shape[0]))):
            if key not in self._curves:
                match = (lambda k: k == shape) if words == SAME_SHAPE else (lambda k: k[0] == shape[0])
                ended = [d for k, runs in self.durations.items() if match(k) for d in runs]
                going = [d for k, runs in self.running.items() if match(k) for d in runs]
                self._curves[key] = Curve(ended, going)
            out.append((words, self._curves[key]))
        return out


class Curve:
    """How long jobs of a kind run (Kaplan–Meier): the finished jobs' durations, and the running jobs' time so
    far, a duration at least that long. Read from the finished jobs alone, the long jobs still running are left
    out and every end comes too early."""

    def __init__(self, ended: list[float], going: list[float]) -> None:
        self.ended = sorted(ended)
        observed = sorted([*ended, *going])
        self.points: list[tuple[float, float]] = []  # (duration, share of jobs running longer)
        alive = 1.0
        i = 0
        while i < len(self.ended):
            x = self.ended[i]
            n = i
            while n < len(self.ended) and self.ended[n] == x:
                n += 1
            at_risk = len(observed) - bisect.bisect_left(observed, x)
            alive *= 1 - (n - i) / at_risk
            self.points.append((x, alive))
            i = n

    def longer(self, elapsed: float) -> int:
        """Finished jobs that ran longer than ``elapsed``."""
        return len(self.ended) - bisect.bisect_right(self.ended, elapsed)

    def quantile(self, elapsed: float, q: float) -> float | None:
        """The duration by which a job that has run ``elapsed`` has ended with probability ``q`` (None: past the
        longest finished job)."""
        before = [a for x, a in self.points if x <= elapsed]
        target = (before[-1] if before else 1.0) * (1 - q)
        for x, a in self.points:
            if x > elapsed and a <= target + 1e-9:
                return x
        return None


@dataclass
class End:
    """A running job's expected end: between ``lo`` and ``hi``, and on what basis."""

    label: str
    lo: datetime
    hi: datetime
    by_limit: bool
    samples: int = 0  # finished jobs the spread comes from
    mid: datetime | None = None  # the likely end (the median of the spread); None: ``lo``
    kind: str = SAME_SHAPE  # whose finished jobs the spread comes from (words)

    @property
    def likely(self) -> datetime:
        return self.mid or self.lo

    @property
    def namespace(self) -> str:
        return self.label.partition("/")[0]

    @property
    def name(self) -> str:
        return self.label.partition("/")[2]


def expected_end(job: EntityState, t: datetime, basis: Basis) -> End | None:
    """The job's expected end (None: neither a runtime limit nor a finished job that ran at least as long as it
    has).

    The durations it is read from are those of finished jobs that ran longer than it has run by t: a job 50
    minutes in is one of those, and ends within their spread (lower quartile, median, upper quartile), not within
    the spread of jobs that ended long before 50 minutes. They are the finished jobs of its project and shape,
    else (none ran that long) of its project."""
    started = parse_ts(job.get("started")) or parse_ts(job.get("submitted"))
    if started is None:
        return None
    limit = basis.limits.get((job.namespace, job.name))
    if limit is None and job.get("active_deadline_seconds") is not None:
        limit = float(job.get("active_deadline_seconds"))
    elapsed = max((t - started).total_seconds(), 0.0)
    words, curve, longer = SAME_SHAPE, None, 0
    for kind, c in basis.kinds(shape_of(job.state)):
        if c.longer(elapsed) > longer:
            words, curve, longer = kind, c, c.longer(elapsed)
        if longer >= ENOUGH_LONGER:
            break

    def at(q: float) -> datetime:
        assert curve is not None
        x = curve.quantile(elapsed, q)
        x = curve.ended[-1] if x is None else x  # past the curve's end: the longest finished job
        return max(started + timedelta(seconds=min(x, limit or math.inf)), t)

    if limit is not None:
        hi = max(started + timedelta(seconds=limit), t)
        if curve is None or longer < MIN_FINISHED:
            return End(job.ref.label, hi, hi, True, 0, mid=hi)
        return End(job.ref.label, at(0.25), hi, True, longer, mid=at(0.5), kind=words)
    if curve is None or longer < MIN_FINISHED:
        return None  # it has run longer than every finished job: its end is anyone's guess
    return End(job.ref.label, at(0.25), at(0.75), False, longer, mid=at(0.5), kind=words)


def median_minutes(basis: Basis, shape: Shape) -> float | None:
    runs = basis.durations.get(shape)
    return round(statistics.median(runs) / 60, 1) if runs else None


@dataclass
class Eta:
    """When the job is likely to start, or why that is unknown."""

    t: datetime
    lo: datetime | None = None
    hi: datetime | None = None
    likely: datetime | None = None  # the start with every running job ending at its likely end
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
            if self.likely is not None and hhmm(self.likely) not in (hhmm(self.lo), hhmm(self.hi)):
                span += f", most likely {hhmm(self.likely)}"
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
            how.append(f"{median} by the durations of finished jobs" + _kind_words(self.ended))
        out = f"{len(self.ended)} running job(s) end by then ({'; '.join(how)})"
        if self.started_first:
            out += f", and {len(self.started_first)} job(s) ahead start first"
        return out


@dataclass
class Forecast:
    """The queue replayed forward from t for every waiting job at once: with every running job ending early (its
    spread's lower quartile), likely (its median) and late (its upper quartile)."""

    t: datetime
    early: replay.Run
    likely: replay.Run
    late: replay.Run
    no_end: int  # running jobs with no expected end
    ends: int  # running jobs with one
    window: timedelta

    def starts_within(self, horizon: timedelta) -> dict[str, replay.Started]:
        """The waiting jobs the likely replay starts within ``horizon`` of t, by label."""
        return {k: s for k, s in self.likely.starts.items() if s.at <= self.t + horizon}


def running_ends(di: DiagnosisInput, basis: Basis) -> tuple[list[End], int]:
    """Every running job's expected end, and how many running jobs have none."""
    ends: list[End] = []
    no_end = 0
    history = bool(basis.durations or basis.limits)
    if history:
        basis.observe(di)
    for j in di.jobs:
        if j.state.get("phase") != "Running" or is_pending(j):
            continue
        if not history and j.state.get("active_deadline_seconds") is None:
            no_end += 1  # nothing to read an end from (a trace of jobs that never end: thousands of them)
            continue
        e = expected_end(j, di.t, basis)
        if e is None:
            no_end += 1
        else:
            ends.append(e)
    return ends, no_end


def forecast(di: DiagnosisInput, base: ClusterPass, basis: Basis, until: datetime | None = None) -> Forecast:
    """The three replays over the state at t (``base``: the pass at t), up to ``until`` (default: the replay's
    own bounds)."""
    ends, no_end = running_ends(di, basis)
    if not ends or not any(c.whole and c.outcome in replay.WAITING for c in base.considered):
        none = replay.Run(exhausted=True)  # nothing ends, or nobody waits for room: nothing to replay
        return Forecast(di.t, none, none, none, no_end=no_end, ends=len(ends), window=basis.window)
    end_of = lambda j, when: expected_end(j, when, basis)  # noqa: E731
    with di.indexed():
        room = replay.build(di, base)
        runs = [
            replay.replay(room, ends, end_of, at, until)
            for at in ((lambda e: e.lo), (lambda e: e.likely), (lambda e: e.hi))
        ]
    early, likely, late = runs
    return Forecast(di.t, early, likely, late, no_end=no_end, ends=len(ends), window=basis.window)


def eta(
    di: DiagnosisInput, job: EntityState, base: ClusterPass, basis: Basis, fc: Forecast | None = None
) -> Eta:
    """The job's ETA (module doc). ``base`` is the pass over the state at t; ``fc`` the forecast over it, when the
    caller asks for many jobs (computed here otherwise)."""
    out = Eta(t=di.t, window=basis.window)
    me = base.find(job.namespace, job.name)
    if not is_pending(job):
        out.unknown = "it is not waiting"
        return out
    if me is None:
        out.unknown = f"it is beyond the first {len(base.considered)} waiting jobs one pass considers"
        return out
    if me.outcome == STARTS:
        out.now, out.lo, out.hi, out.likely = True, di.t, di.t, di.t
        return out
    if me.outcome == PLACED:
        out.unknown = "its pods are bound: it waits on its containers, not on the scheduler"
        return out
    if not me.whole:
        out.unknown = "the replay weighs whole GPUs: a share's or a MIG instance's start is not replayed"
        return out
    if me.outcome not in replay.WAITING:
        out.unknown = f"the pass at t leaves it {me.outcome}"
        return out
    fc = fc or forecast(di, base, basis)
    out.no_end = fc.no_end
    out.passes = fc.early.steps + fc.likely.steps + fc.late.steps
    if not fc.ends:
        out.unknown = (
            f"none of the {out.no_end} running job(s) has a runtime limit, nor finished jobs of its project and "
            f"shape over the {_span(basis.window)} before t"
        )
        return out
    early, likely, late = (r.starts.get(me.label) for r in (fc.early, fc.likely, fc.late))
    if early is None:
        out.unknown = _why_not(fc.early) + _no_end_words(out.no_end)
        return out
    out.lo = early.at
    out.hi = late.at if late is not None else None
    out.likely = likely.at if likely is not None else None
    basis_run = late or likely or early
    out.ended = basis_run.ended
    out.started_first = basis_run.before
    return out


def _why_not(run: replay.Run) -> str:
    if run.exhausted:
        return "once every running job with an expected end has ended, the replay still does not place it"
    if run.steps >= replay.MAX_STEPS:
        return f"it does not start within the next {replay.MAX_STEPS} foreseeable groups of ends"
    return f"it does not start within the next {_span(replay.HORIZON)}"


def _kind_words(ended: list[End]) -> str:
    """Whose finished jobs the ends' durations come from: " of the same project and shape" when all are read
    from their own kind, else the mix (" (2 its project and shape, 1 its project (any shape))")."""
    kinds = [e.kind for e in ended if not e.by_limit]
    if all(k == SAME_SHAPE for k in kinds):
        return " of the same project and shape"
    counts = {k: kinds.count(k) for k in (SAME_SHAPE, SAME_PROJECT) if k in kinds}
    return " (" + ", ".join(f"{n} {k.removeprefix('of ')}" for k, n in counts.items()) + ")"


def _span(d: timedelta) -> str:
    hours = d.total_seconds() / 3600
    return f"{hours:g} h" if hours < 48 else f"{hours / 24:g} days"


def _no_end_words(n: int) -> str:
    return f"; {n} running job(s) have no expected end" if n else ""


__all__ = ["Basis", "End", "Eta", "Forecast", "eta", "expected_end", "forecast", "running_ends", "shape_of"]
