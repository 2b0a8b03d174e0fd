"""How long a running job has left: its expected end (``expected_end``), read from its own runtime limit
(``activeDeadlineSeconds``) or from the durations of finished jobs of its project and shape over a window
before t (``Basis``, loaded by ``incidents.eta_input``), weighed with the jobs of that kind still running
(``Curve``: Kaplan–Meier). Train work of a project with no finished job over the window is read from how long
it and its project's running jobs have run (``by_age``), never from other projects' jobs: read from the
cluster's, a project's first 25-minute jobs were dated by another project's 1-hour gang. The ETA's replay
(``incidents.diagnosis.eta``, ``replay``) frees each running job's GPUs at its expected end.

Pure: no database, no simulator.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from incidents.diagnosis.types import DiagnosisInput, EntityState, parse_ts

MIN_FINISHED = 1  # finished jobs that ran longer than a running one needed to expect its end
# Below this many, the finished jobs of its project and shape that ran longer than it has are too few to say how
# much longer it runs (the longest of three is short of the tail): its project's, of any shape, are read instead.
ENOUGH_LONGER = 4
SAME_SHAPE = "of its project and shape"
SAME_PROJECT = "of its project (any shape)"
BY_AGE = "of its project: none over the window, so read from how long its running jobs have run"


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
    _ages: dict[str, list[float]] = field(default_factory=dict, repr=False, compare=False)

    def observe(self, di: DiagnosisInput) -> None:
        """Record how long each job running at t has run (its shape's durations not yet over)."""
        self.running = {}
        self._curves = {}
        self._ages = {}
        for j in di.jobs:
            if j.state.get("phase") != "Running":
                continue
            started = parse_ts(j.get("started"))
            if started is not None and started <= di.t:
                self.running.setdefault(shape_of(j.state), []).append((di.t - started).total_seconds())

    def ages(self, project: str) -> list[float]:
        """How long the project's jobs running at t have run (seconds), any shape."""
        if project not in self._ages:
            self._ages[project] = [a for k, ages in self.running.items() if k[0] == project for a in ages]
        return self._ages[project]

    def kinds(self, shape: Shape) -> list[tuple[str, Curve]]:
        """The durations a running job of ``shape`` is read from, nearest first: its project and shape, then its
        project (any shape); each as (words, survival curve). Never another project's: their jobs are other
        work (a 16-GPU pretraining gang, a 25-minute batch), and read for this one they dated its end by
        theirs, an hour off either way."""
        out = []
        for words, key in ((SAME_SHAPE, ("shape", shape)), (SAME_PROJECT, ("project", shape[0]))):
            if key not in self._curves:
                match = {
                    SAME_SHAPE: lambda k: k == shape,
                    SAME_PROJECT: lambda k: k[0] == shape[0],
                }[words]
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
        for i, (x, a) in enumerate(self.points):
            if x > elapsed and a <= target + 1e-9:
                if a >= target - 1e-9 and i + 1 < len(self.points):
                    return (x + self.points[i + 1][0]) / 2  # the curve rests at q from x to the next end
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
    # the end at a quantile of its spread (``drawn``); None: it has none (a runtime limit alone)
    spread: Callable[[float], datetime] | None = field(default=None, repr=False, compare=False)

    @property
    def likely(self) -> datetime:
        return self.mid or self.lo

    def drawn(self, q: float) -> datetime:
        """Its end at quantile ``q`` (0 < q < 1) of its spread: what a replay that draws each running job's end
        reads (``eta.forecast``). An end with no spread is its likely end whatever ``q``."""
        return self.spread(q) if self.spread is not None else self.likely

    @property
    def basis_words(self) -> str:
        """What the end is read from, in the pages' words: "its runtime limit", "12 finished jobs of its
        project and shape", or its age where its project has no finished job."""
        if self.by_limit:
            return "its runtime limit"
        if self.kind == BY_AGE:
            return "how long it and its project's running jobs have run: none of its project finished over the window"
        return f"{self.samples} finished job{'s' if self.samples != 1 else ''} {self.kind}"

    @property
    def namespace(self) -> str:
        return self.label.partition("/")[0]

    @property
    def name(self) -> str:
        return self.label.partition("/")[2]


def expected_end(job: EntityState, t: datetime, basis: Basis) -> End | None:
    """The job's expected end (None: neither a runtime limit nor a basis to read it from).

    The durations it is read from are those of finished jobs that ran longer than it has run by t: a job 50
    minutes in is one of those, and ends within their spread (lower quartile, median, upper quartile), not within
    the spread of jobs that ended long before 50 minutes. They are the finished jobs of its project and shape,
    else (none ran that long) of its project (``Basis.kinds``). Train work of a project with no finished job
    over the window is read from how long it and its project's running jobs have run (``by_age``); a job that
    has run past every finished job of its project has no expected end (its end is anyone's guess), nor has a
    service of a project with none."""
    started = parse_ts(job.get("started")) or parse_ts(job.get("submitted"))
    if started is None:
        return None
    limit = basis.limits.get((job.namespace, job.name))
    if limit is None and job.get("active_deadline_seconds") is not None:
        limit = float(job.get("active_deadline_seconds"))
    elapsed = max((t - started).total_seconds(), 0.0)
    words, curve, longer = SAME_SHAPE, None, 0
    shape = shape_of(job.state)
    for kind, c in basis.kinds(shape):
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
        return End(job.ref.label, at(0.25), hi, True, longer, mid=at(0.5), kind=words, spread=at)
    if curve is None or longer < MIN_FINISHED:
        project = basis.kinds(shape)[-1][1]
        if project.ended or not preemptible_state(job.state):
            return None  # it has run longer than every finished job of its kind: its end is anyone's guess
        if not any(basis.durations.values()):
            return None  # no job of the cluster ended over the window: no age is a measure (``by_age``)
        left = by_age(elapsed, basis.ages(shape[0]))
        if left is None:
            return None
        lo, mid, hi = (t + timedelta(seconds=x) for x in left)
        median = left[1]
        return End(
            job.ref.label,
            lo,
            hi,
            False,
            0,
            mid=mid,
            kind=BY_AGE,
            spread=lambda q: t + timedelta(seconds=median * q / (1 - q)),
        )
    return End(job.ref.label, at(0.25), at(0.75), False, longer, mid=at(0.5), kind=words, spread=at)


def by_age(elapsed: float, ages: list[float]) -> tuple[float, float, float] | None:
    """How long a job of a project with no finished job has left (seconds: lower quartile, median, upper
    quartile), from how long it has run (``elapsed``) and its project's running jobs have (``ages``, it among
    them when it runs at t); None when none has run at all. ``expected_end`` reads it only where other jobs of
    the cluster ended over the window: where none did, the window is shorter than the jobs run (a day of a
    cluster of week-long trainings, a history just begun) and an age, cut short by the window, is no measure.

    Nothing says how long the project's jobs run but their ages, each a duration not yet over. A job picked at a
    random moment of its run is as likely past its middle as not: one that has run ``a`` runs 2·a in all, most
    likely, and between 4/3·a and 4·a one time in two (a/(1 − q) by quantile q; what is left, its median
    times q/(1 − q): ``End.drawn``). Its project's jobs run about as long as its running ones
    do (twice their median age): a job that has just started, by the replay or at t, is read from them; one that
    has run longer than them, from its own age."""
    scale = 2 * max(statistics.median(ages) if ages else 0.0, elapsed)
    if scale <= 0:
        return None
    left = scale - elapsed
    return left / 3, left, 3 * left


def preemptible_state(state: dict[str, Any]) -> bool:
    """Whether the job is preemptible train work, as its state says (``request.job_request``'s rule)."""
    flag = state.get("preemptible")
    return bool(flag) if flag is not None else (state.get("priority_class") or "train") != "inference"


def median_minutes(basis: Basis, shape: Shape) -> float | None:
    runs = basis.durations.get(shape)
    return round(statistics.median(runs) / 60, 1) if runs else None


__all__ = [
    "BY_AGE",
    "Basis",
    "Curve",
    "End",
    "Shape",
    "by_age",
    "expected_end",
    "median_minutes",
    "shape_of",
    "shape_words",
]
