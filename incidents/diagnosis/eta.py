"""When will a waiting job start, and which start within the hour: the queue replayed forward from t with the
running jobs' expected ends (issue 44, item 4).

The pass at t (``scheduling_pass.cluster_pass``) starts what the free room holds; the scheduler has usually
taken that room by the time the inventory is read, so what starts next is what the running jobs' ends give
back. Each running job is expected to end by its own runtime limit where it has one (``activeDeadlineSeconds``,
``active_deadline_seconds`` in its state: started + limit at the latest), otherwise within the spread of the
durations of the finished jobs of the same project and shape over the window (``Basis``, loaded by
``incidents.eta_input``) that ran longer than it has so far (else of the same project, any shape); train work of
a project with no finished job over the window, by how long it and its project's running jobs have run
(``durations.by_age``). ``incidents.diagnosis.replay`` frees the GPUs of the jobs that end, in the order they
end, and serves every waiting job in the pass's order after each group of ends; the jobs it starts run from then
on (their own expected end joins the list). One replay answers every waiting job (``forecast``).

The ends are drawn, not set at their medians: each replay draws every running job's end from its spread, ``DRAWS``
times (``Draw``: each job once in each ninth of its spread, in an order of its own), and a job's answer is the
median of its starts over the draws and their middle half: "likely 14:10–15:30, most likely 14:40: 3 running
jobs end by then". A job that waits for the first of four ends starts when the earliest of them comes, sooner
than any one's median; a gang that waits for all four, after the latest: with every end at its median, both
would be dated at the median of one. Where no expected end frees what a job waits for, its answer is
"unknown", and why.

Bounded: ``replay.MAX_STEPS`` groups of ends per replay, ends within ``replay.HORIZON``; fewer draws on a large
cluster (``DRAW_NODES``). Pure: no database, no simulator.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from incidents.diagnosis import replay, replay_room
from incidents.diagnosis.durations import (
    BY_AGE,
    SAME_PROJECT,
    SAME_SHAPE,
    Basis,
    End,
    expected_end,
)
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.scheduling_pass import PLACED, STARTS, ClusterPass
from incidents.diagnosis.types import DiagnosisInput, EntityState, hhmm

# replays per forecast, each with every running job's end drawn afresh (odd: the median is one draw)
DRAWS = 9
MIN_DRAWS = 3
DRAW_NODES = 4000  # node-replays per forecast: fewer draws on a large cluster (the answer's time)


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
    passes: int = 0  # replay steps, over every draw
    draws: int = 0  # replays, each with every running job's end drawn afresh
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
        aged = sum(1 for e in self.ended if not e.by_limit and e.kind == BY_AGE)
        median = len(self.ended) - limit - aged
        how = []
        if limit:
            how.append(f"{limit} by its runtime limit" if limit == 1 else f"{limit} by their runtime limits")
        if median:
            how.append(f"{median} by the durations of finished jobs" + _kind_words(self.ended))
        if aged:
            how.append(f"{aged} by how long their projects' jobs have run, none of which finished")
        out = f"{len(self.ended)} running job(s) end by then ({'; '.join(how)})"
        if self.started_first:
            out += f", and {len(self.started_first)} job(s) ahead start first"
        return out


@dataclass
class Drawn:
    """A waiting job's start over a forecast's draws: the middle half of its starts (``lo``, ``hi``), their
    median (``likely``; None: it does not start in half the draws or more), and the draw that starts it at the
    median (what the answer names as its basis: the ends it waits for, the jobs that start first, its nodes)."""

    lo: datetime | None
    likely: datetime | None
    hi: datetime | None
    run: replay_room.Run
    started: replay_room.Started | None


@dataclass
class Forecast:
    """The queue replayed forward from t for every waiting job at once, ``len(runs)`` times, each running job's
    end drawn afresh each time from its spread (``draws``)."""

    t: datetime
    runs: list[replay_room.Run]
    no_end: int  # running jobs with no expected end
    ends: int  # running jobs with one
    window: timedelta

    @property
    def steps(self) -> int:
        return sum(r.steps for r in self.runs)

    def start(self, label: str) -> Drawn:
        """The job's start over the draws (a draw that does not start it counts as later than any that does)."""
        never = datetime.max.replace(tzinfo=self.t.tzinfo)
        at = sorted(
            ((s.at if (s := r.starts.get(label)) is not None else never), i) for i, r in enumerate(self.runs)
        )
        n = len(at) - 1
        lo, mid, hi = (at[round(q * n)] for q in (0.25, 0.5, 0.75))
        run = self.runs[mid[1] if mid[0] != never else lo[1]]
        lo_at, mid_at, hi_at = (x[0] if x[0] != never else None for x in (lo, mid, hi))
        return Drawn(lo_at, mid_at, hi_at, run=run, started=run.starts.get(label))

    def likely_starts(self) -> dict[str, replay_room.Started]:
        """The waiting jobs that start in half the draws or more, each at its median start (the draw that starts
        it then), by label."""
        out = {}
        for k in sorted({k for r in self.runs for k in r.starts}):
            d = self.start(k)
            if d.likely is not None and d.started is not None:
                out[k] = d.started
        return out

    def starts_within(self, horizon: timedelta) -> dict[str, replay_room.Started]:
        """The waiting jobs whose median start is within ``horizon`` of t, by label."""
        return {k: s for k, s in self.likely_starts().items() if s.at <= self.t + horizon}


def running_ends(
    di: DiagnosisInput, basis: Basis, placed: frozenset[str] = frozenset()
) -> tuple[list[End], int]:
    """Every running job's expected end, and how many running jobs have none. ``placed``: waiting jobs whose
    pods are all bound (the pass's ``PLACED``): their containers start, they run from t and end like any other."""
    ends: list[End] = []
    no_end = 0
    basis.observe(di)
    for j in di.jobs:
        if j.ref.label in placed:
            j = replay_room.running(j, di.t)
        elif j.state.get("phase") != "Running" or is_pending(j):
            continue
        e = expected_end(j, di.t, basis)
        if e is None:
            no_end += 1
        else:
            ends.append(e)
    return ends, no_end


def draws(di: DiagnosisInput, ends: list[End]) -> int:
    """How many times a forecast replays the queue: once where no end has a spread (runtime limits alone), else
    ``DRAWS``, fewer on a large cluster (``DRAW_NODES``: node-replays per forecast)."""
    if all(e.spread is None for e in ends):
        return 1
    k = min(DRAWS, DRAW_NODES // max(len(di.nodes), 1))
    return max(MIN_DRAWS, k - 1 if k % 2 == 0 else k)  # odd: the median is one draw


class Draw:
    """The ``k``-th of ``n`` draws of every running job's end: quantile (stratum + ½)/n of its spread, each job's
    strata in an order of its own (a Latin hypercube: over the ``n`` draws each job ends once in each stratum,
    independently of the others). The order comes from the job's name, so the same state gives the same answer."""

    def __init__(self, k: int, n: int, orders: dict[str, list[int]]) -> None:
        self.k, self.n, self.orders = k, n, orders
        self.memo: dict[int, tuple[End, datetime]] = {}  # by id: the end is kept, so the id is not reused

    def __call__(self, e: End) -> datetime:
        got = self.memo.get(id(e))
        if got is None:
            if self.n == 1:
                return e.likely
            order = self.orders.get(e.label)
            if order is None:
                seed = int.from_bytes(hashlib.blake2b(e.label.encode(), digest_size=8).digest(), "big")
                order = self.orders[e.label] = random.Random(seed).sample(range(self.n), self.n)
            got = self.memo[id(e)] = (e, e.drawn((order[self.k] + 0.5) / self.n))
        return got[1]


def forecast(
    di: DiagnosisInput,
    base: ClusterPass,
    basis: Basis,
    until: datetime | None = None,
    stop: str | None = None,
) -> Forecast:
    """The replays over the state at t (``base``: the pass at t), up to ``until`` (default: the replay's own
    bounds): each running job ends at a draw from its spread (``Draw``), as many times as ``draws`` says. With
    ``stop`` (a waiting job's label), each draw stops once that job has started: the forecast answers for it
    alone, the later steps change nothing of its start."""
    ends, no_end = running_ends(di, basis, frozenset(c.label for c in base.considered if c.outcome == PLACED))
    if not ends or not any(c.whole and c.outcome in replay_room.WAITING for c in base.considered):
        none = replay_room.Run(exhausted=True)  # nothing ends, or nobody waits for room: nothing to replay
        return Forecast(di.t, [none], no_end=no_end, ends=len(ends), window=basis.window)
    end_of = lambda j, when: expected_end(j, when, basis)  # noqa: E731
    n = draws(di, ends)
    orders: dict[str, list[int]] = {}
    with di.indexed():
        room = replay_room.build(di, base)
        runs = [replay.replay(room, ends, end_of, Draw(k, n, orders), until, stop) for k in range(n)]
    return Forecast(di.t, runs, no_end=no_end, ends=len(ends), window=basis.window)


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
    if me.outcome not in replay_room.WAITING:
        out.unknown = f"the pass at t leaves it {me.outcome}"
        return out
    fc = fc or forecast(di, base, basis, stop=me.label)
    out.no_end = fc.no_end
    out.passes = fc.steps
    out.draws = len(fc.runs)
    if not fc.ends:
        out.unknown = (
            f"none of the {out.no_end} running job(s) has a runtime limit, nor finished jobs of its project and "
            f"shape over the {_span(basis.window)} before t"
        )
        return out
    d = fc.start(me.label)
    if d.lo is None or d.started is None:
        out.unknown = _why_not(d.run) + _no_end_words(out.no_end)
        return out
    out.lo, out.likely, out.hi = d.lo, d.likely, d.hi
    out.ended = d.started.ended
    out.started_first = d.started.before
    return out


def _why_not(run: replay_room.Run) -> str:
    if run.exhausted:
        return "once every running job with an expected end has ended, the replay still does not place it"
    if run.steps >= replay.MAX_STEPS:
        return f"it does not start within the next {replay.MAX_STEPS} foreseeable groups of ends"
    return f"it does not start within the next {_span(replay.HORIZON)}"


def _kind_words(ended: list[End]) -> str:
    """Whose finished jobs the ends' durations come from: " of the same project and shape" when all are read
    from their own kind, else the mix (": 2 of the same project and shape, 1 of the same project, any shape")."""
    kinds = [e.kind for e in ended if not e.by_limit and e.kind != BY_AGE]
    if all(k == SAME_SHAPE for k in kinds):
        return " of the same project and shape"
    words = {SAME_SHAPE: "of the same project and shape", SAME_PROJECT: "of the same project, any shape"}
    return ": " + ", ".join(f"{kinds.count(k)} {w}" for k, w in words.items() if k in kinds)


def _span(d: timedelta) -> str:
    hours = d.total_seconds() / 3600
    return f"{hours:g} h" if hours < 48 else f"{hours / 24:g} days"


def _no_end_words(n: int) -> str:
    return f"; {n} running job(s) have no expected end" if n else ""


__all__ = ["Eta", "Forecast", "eta", "forecast", "running_ends"]
