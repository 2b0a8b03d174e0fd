"""How long a running job has left: its expected end (``expected_end``), read from its own runtime limit
(``activeDeadlineSeconds``) or from the durations of finished jobs of its project and shape over a window
before t (``Basis``, loaded by ``incidents.eta_input``), weighed with the jobs of that kind still running
(``Curve``: Kaplan–Meier). The ETA's replay (``incidents.diagnosis.eta``, ``replay``) frees each running job's
GPUs at its expected end.

Pure: no database, no simulator.
"""

from __future__ import annotations

import bisect
import math
import statistics
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
SAME_CLUSTER = "of the cluster (any project)"


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

    def kinds(self, shape: Shape, preemptible: bool = False) -> list[tuple[str, Curve]]:
        """The durations a running job of ``shape`` is read from, nearest first: its project and shape, then its
        project (any shape), then, for preemptible (train) work, the cluster's (any project); each as (words,
        survival curve). A service (not preemptible) is never read from another project's: it runs until
        stopped, and is not expected to end because other projects' batch jobs do."""
        out = []
        kinds = [(SAME_SHAPE, ("shape", shape)), (SAME_PROJECT, ("project", shape[0]))]
        if preemptible:
            kinds.append((SAME_CLUSTER, ("cluster", "")))
        for words, key in kinds:
            if key not in self._curves:
                match = {
                    SAME_SHAPE: lambda k: k == shape,
                    SAME_PROJECT: lambda k: k[0] == shape[0],
                    SAME_CLUSTER: lambda k: True,
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
    """The job's expected end (None: neither a runtime limit nor a finished job of its kind to read it from).

    The durations it is read from are those of finished jobs that ran longer than it has run by t: a job 50
    minutes in is one of those, and ends within their spread (lower quartile, median, upper quartile), not within
    the spread of jobs that ended long before 50 minutes. They are the finished jobs of its project and shape,
    else (none ran that long) of its project, else, for train work, of the cluster (``Basis.kinds``)."""
    started = parse_ts(job.get("started")) or parse_ts(job.get("submitted"))
    if started is None:
        return None
    limit = basis.limits.get((job.namespace, job.name))
    if limit is None and job.get("active_deadline_seconds") is not None:
        limit = float(job.get("active_deadline_seconds"))
    elapsed = max((t - started).total_seconds(), 0.0)
    words, curve, longer = SAME_SHAPE, None, 0
    for kind, c in basis.kinds(shape_of(job.state), preemptible_state(job.state)):
        if kind == SAME_CLUSTER and longer:
            break  # its own project's finished jobs, however few, before other projects'
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
        return None  # it has run longer than every finished job of its kind: its end is anyone's guess
    return End(job.ref.label, at(0.25), at(0.75), False, longer, mid=at(0.5), kind=words)


def preemptible_state(state: dict[str, Any]) -> bool:
    """Whether the job is preemptible train work, as its state says (``request.job_request``'s rule)."""
    flag = state.get("preemptible")
    return bool(flag) if flag is not None else (state.get("priority_class") or "train") != "inference"


def median_minutes(basis: Basis, shape: Shape) -> float | None:
    runs = basis.durations.get(shape)
    return round(statistics.median(runs) / 60, 1) if runs else None


__all__ = [
    "Basis",
    "Curve",
    "End",
    "Shape",
    "expected_end",
    "median_minutes",
    "shape_of",
    "shape_words",
]
