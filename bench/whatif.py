"""Prediction benchmark: does the product's scheduling model say which waiting jobs start, and where?

Not a test: prints figures (issue 44). Each source (bundled scenarios, the demo, a slice of Alibaba's GPU trace)
is run through the whole pipeline (``harness.scenario_run``: simulator, sweeps, intake, diagnosis) into the
configured database. At a sample of inventory sweeps t, with waiting jobs, the product answers from what it
stored: ``load_cluster_input(cluster, t)``, ``scheduling_pass.cluster_pass`` (what the free room starts now) and
the replay forward from there (``eta.forecast``: what the running jobs' expected ends start next) — the jobs
that start within the hour, on which nodes. The same scenario is replayed in the simulator to t (it is deterministic: the same world the
sweeps read), its world is forked there (``copy.deepcopy``) and run one hour on:

- without arrivals after t (the question the prediction answers: what does the state at t do),
- with the arrivals (what a user lives).

For each: start-set precision and recall over the jobs waiting at t (predicted "starts" within the hour against
"started within the hour"; a job whose pods are all bound already is left out: the scheduler has placed it); the
pass at t alone against the jobs the simulator started in its first tick after t (its own claim) and within the
hour (what it misses: the sweeps follow the scheduler's own pass); node agreement (the started job's nodes are
the predicted ones); the same start sets as the ETA (``incidents.diagnosis.eta``: its likely start within the
hour); the ETA's error against the simulator's start (its likely start; median and p90, in minutes and relative
to the wait; the fork without arrivals runs three hours, or to the scenario's end, so that later starts are
judged too); the time per answer (load + pass + replay; the ETA per job from the replay); and the misses by
cause.
Targets: precision and recall ≥ 0.9; ETA median error ≤ 20 % of the wait; every answer ≤ 1 s at 1,213 nodes.

``--ends`` says where the ETA's error comes from. It sets each running job's expected end
(``durations.expected_end``: lower quartile, likely, upper quartile) against the moment the fork without arrivals
stopped it (completed, failed, evicted, or still running at its end), per basis (runtime limit, its project and
shape, its project, its age): the error of the likely end, median and p90, and how often the actual end falls
within the range. Then, for each started job with an ETA, it replays the queue twice more: with every running
job ending when the fork stopped it and every job the replay starts running its own runtime (the ends known: what
is left is order, placement and evictions), and with the model's ends read from every runtime of the scenario's
jobs of each kind (the kinds' spread known, each job's draw not: what is left is the spread itself). A job whose
ETA is off by more than 0.2 of its wait is put down to the durations where the ends known set it right, else to
evictions (the simulator started it by evicting), a node that came back, or order and placement.

The bench imports the simulator (it is the harness); the product's model never does.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rcaweb_whatif .venv/bin/python bench/whatif.py \\
        [--scenarios busy-*.yaml demo.yaml] [--trace DIR --trace-fraction 0.1 --trace-hours 3] [--moments 3] \\
        [--reuse] [--list] [--ends]

``--trace DIR`` holds Alibaba's ``openb_node_list_gpu_node.csv`` and ``openb_pod_list_default.csv``
(bench/trace.py says where to get them); the slice is ``--trace-fraction`` of every node shape and of the pods.
Its pods stay once placed (``simulator.openb``, as the ATC '23 replay): nothing ends, so without arrivals nothing
waiting starts and the slice scores no start; what it measures is the time per answer on its nodes and the
forecast's restraint (no start predicted where none comes: the oracle's ends are the fork's, none either).
The database (default postgres://postgres@127.0.0.1:5432/rcaweb_whatif) is created if missing and flushed
before each source.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import fnmatch
import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
SCENARIOS = ROOT / "simulator" / "scenarios"
DEFAULT_SCENARIOS = ("busy-*.yaml", "living-*.yaml", "department-*.yaml", "queue-priority.yaml", "demo.yaml")
HORIZON = timedelta(hours=1)
# the fork without arrivals runs this long, so an ETA past the hour is judged
ETA_HORIZON = timedelta(hours=3)
TARGET = 0.9
REUSE_NOW = datetime(
    2026, 12, 5, 19, 36, tzinfo=UTC
)  # --reuse: the end of a scenario whose file sets no start
TARGET_ANSWER_S = 1.0

Key = tuple[str, str]  # (namespace, job)


@dataclasses.dataclass
class Moment:
    """One prediction at t and what the simulator did from there."""

    source: str
    t: datetime
    nodes: int
    waiting: int
    answer_s: float  # load the state at t + one pass + the replay forward
    predicted: dict[Key, set[str]]  # the model starts it within the hour (the pass at t, then the replay)
    bare: dict[Key, set[str]]  # the pass at t alone starts it, on these nodes
    # waiting in the product's input, not waiting in the simulator at t (the stored state lags)
    not_in_sim: int
    placed: int  # waiting with every pod bound already: the scheduler has decided, the containers start
    started: dict[str, dict[Key, tuple[float, set[str]]]]  # mode -> job -> (minutes after t, nodes)
    first_pass: dict[Key, set[str]]  # started in the simulator's first tick after t (no arrivals)
    why_not: dict[
        Key, str
    ]  # the simulator's reason for a job still waiting an hour on (its state at the end)
    model: dict[Key, str]  # the pass's outcome for each waiting job ("no room", "quota (…)")
    # mode -> jobs the simulator started by evicting others (reclaim, preempt)
    reclaimers: dict[str, set[Key]]
    # mode -> node -> minutes after t it gave back GPUs (a repair, an uncordon: no state at t foresees it)
    came_back: dict[str, dict[str, float]]
    # the ETA model: job -> (earliest, latest, likely) minutes after t (latest/likely None: open), or None when
    # unknown
    eta: dict[Key, tuple[float, float | None, float | None] | None]
    eta_s: float  # the ETA answers' time, per waiting job
    # --ends: each running job's expected end against the fork's (``EndCheck``), and the ETA from a replay with the
    # running jobs' actual ends (job -> minutes after t, None: unknown)
    end_checks: list[EndCheck] = dataclasses.field(default_factory=list)
    oracle_eta: dict[Key, float | None] = dataclasses.field(default_factory=dict)
    # --ends: the ETA with the model's ends read from every runtime of the scenario's jobs of each kind (the
    # kinds' spread known, not each job's draw)
    spread_eta: dict[Key, float | None] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EndCheck:
    """One job running at t: its expected end (minutes after t; None: none) and when the fork without arrivals
    stopped it (None: still running at the fork's end, ``horizon`` minutes on) and how."""

    label: str
    kind: str  # "limit", the durations' kind (durations.SAME_SHAPE …), or "none"
    elapsed: float  # minutes it had run by t
    lo: float | None
    likely: float | None
    hi: float | None
    actual: float | None
    how: str  # completed | failed | evicted | stopped (lost its node, resubmitted) | running
    horizon: float
    samples: int = 0


def setup(database: str) -> None:
    os.environ["DATABASE_URL"] = database
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "rcaweb.settings",
            "RCAWEB_SECRET_KEY": os.environ.get("RCAWEB_SECRET_KEY", "bench-only-secret"),
            "RCAWEB_LOG_LEVEL": "WARNING",
        }
    )
    os.environ.pop("REDIS_URL", None)
    from stages import ensure_database

    ensure_database(database)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def sources(args: argparse.Namespace) -> list[tuple[str, Any]]:
    from simulator.scenario import load_scenario

    out: list[tuple[str, Any]] = []
    files = sorted(
        p for p in SCENARIOS.glob("*.yaml") if any(fnmatch.fnmatch(p.name, g) for g in args.scenarios)
    )
    for path in files:
        # a file without a start ends now; a kept run (--reuse) is of a fixed day, so that it can be found again
        out.append((path.stem, load_scenario(path, now=REUSE_NOW if args.reuse else None)))
    if args.trace:
        from simulator.openb import trace_scenario

        d = Path(args.trace)
        text = trace_scenario(
            d / "openb_node_list_gpu_node.csv",
            d / "openb_pod_list_default.csv",
            fraction=args.trace_fraction,
            hours=args.trace_hours,
        )
        # The trace's arrivals fill the slice's hours; its jobs run long, so contention comes at the end: the run
        # goes on for the horizon after the last arrival, so that the moments with jobs waiting can be judged.
        sc = load_scenario(text)
        sc = dataclasses.replace(sc, duration_s=sc.duration_s + int(HORIZON.total_seconds()))
        out.append((f"alibaba-trace×{args.trace_fraction:g}", sc))
    return out


def sweep_moments(cluster: Any, scenario: Any) -> list[datetime]:
    """The inventory sweeps of the run at least an hour before its end (the horizon), in time order."""
    from collectors.models import SourceRun

    last = scenario.end - HORIZON
    times = SourceRun.objects.filter(
        cluster=cluster, source="k8s", call="list pods", ok=True, time__gt=scenario.start, time__lte=last
    ).values_list("time", flat=True)
    return sorted(set(times))


def spread(times: list[datetime], n: int) -> list[datetime]:
    """``times`` reordered so that any first ``n`` are spread over the run: the middle of each of n slices
    first, then the rest in order (the bench keeps the first n moments with jobs waiting)."""
    if len(times) <= n:
        return times
    step = len(times) / n
    first = [times[int(i * step + step / 2)] for i in range(n)]
    return first + [x for x in times if x not in first]


def predict(cluster: Any, t: datetime) -> tuple[Any, Any, float]:
    """The product's answer at t from the stored inventory: (input, pass, seconds)."""
    from incidents.diagnosis.scheduling_pass import cluster_pass
    from incidents.diagnosis_input import load_cluster_input

    t0 = time.perf_counter()
    di = load_cluster_input(cluster, t)
    with di.indexed():
        cp = cluster_pass(di)
    return di, cp, time.perf_counter() - t0


def sim_job(world: Any, key: Key) -> Any:
    j = world.jobs.get(key[1])
    return j if j is not None and j.namespace == key[0] else None


def run_on(
    world: Any,
    keys: list[Key],
    t: datetime,
    *,
    arrivals: bool,
    until: timedelta = HORIZON,
    watch: list[Key] | None = None,
) -> tuple[dict[Key, tuple[float, set[str]]], dict[Key, set[str]], Any, set[Key]]:
    """Fork ``world`` at t and step it ``until`` on: when and where each of ``keys`` first runs, what the first
    tick started, the fork at the end, and the jobs it started by evicting others. ``watch``: running jobs whose
    first stop after t the fork records (``fork.stops``: job -> (minutes after t, how))."""
    fork = copy.deepcopy(world)
    if not arrivals:
        fork._arrivals = []  # noqa: SLF001  # the harness forks the simulator: no job submitted after t
    started: dict[Key, tuple[float, set[str]]] = {}
    first: dict[Key, set[str]] = {}
    end = min(t + until, fork.end)  # the simulator never runs past its scenario's end
    ticks = 0
    room = {name: _usable_gpus(n) for name, n in fork.nodes.items()}
    back: dict[str, float] = {}  # node -> minutes after t it first gave back GPUs (repaired, uncordoned)
    going = {
        k: j.started_at for k in watch or () if (j := sim_job(fork, k)) is not None and j.state == "Running"
    }
    stops: dict[Key, tuple[float, str]] = {}
    while fork.now < end:
        fork.step()
        ticks += 1
        for k, since in list(going.items()):
            j = sim_job(fork, k)
            if j is not None and j.state == "Running" and j.started_at == since:
                continue
            del going[k]
            at = j.finished_at if j is not None and j.finished_at and j.finished_at > t else fork.now
            stops[k] = ((at - t).total_seconds() / 60, _how_stopped(fork, k, j, t))
        for name, n in fork.nodes.items():
            now = _usable_gpus(n)
            if now > room.get(name, 0) and name not in back:
                back[name] = (fork.now - t).total_seconds() / 60
            room[name] = now
        for key in keys:
            if key in started:
                continue
            j = sim_job(fork, key)
            if j is None or j.started_at is None or j.started_at <= t:
                continue
            nodes = {p.node for p in fork.pods_of(j) if p.node}
            started[key] = ((j.started_at - t).total_seconds() / 60, nodes)
            if ticks == 1:
                first[key] = nodes
    evictors = {
        tuple(p["preemptor"].split("/", 1))
        for p in fork.preemptions
        if p["time"] > t and "/" in p["preemptor"]
    }
    fork.came_back = back  # read by ``misses``
    fork.stops = stops
    return started, first, fork, {k for k in evictors if len(k) == 2}


def _how_stopped(fork: Any, k: Key, j: Any, t: datetime) -> str:
    label = f"{k[0]}/{k[1]}"
    if any(p["time"] > t and p.get("victim") == label for p in fork.preemptions):
        return "evicted"
    if j is not None and j.state in ("Succeeded", "Failed"):
        return "completed" if j.state == "Succeeded" else "failed"
    return "stopped"


def _usable_gpus(node: Any) -> int:
    """A simulated node's GPUs the scheduler may use: none while NotReady or cordoned."""
    return 0 if not node.ready or node.unschedulable else node.allocatable_gpus


def forecast_at(cluster: Any, di: Any, cp: Any) -> tuple[Any, Any, dict[Key, set[str]], float]:
    """The replay forward from t over every waiting job (``eta.forecast``): (basis, forecast, the jobs it starts
    within the hour with their nodes, seconds: the finished jobs' durations loaded once, and the replays)."""
    from incidents.diagnosis.eta import forecast
    from incidents.eta_input import load_basis

    t0 = time.perf_counter()
    basis = load_basis(cluster, di.t)
    fc = forecast(di, cp, basis, until=di.t + ETA_HORIZON)
    starts = {tuple(k.split("/", 1)): set(s.nodes) for k, s in fc.starts_within(HORIZON).items()}
    return basis, fc, starts, time.perf_counter() - t0  # type: ignore[return-value]


def etas_at(
    di: Any, cp: Any, basis: Any, fc: Any, keys: list[Key]
) -> tuple[dict[Key, tuple[float, float | None, float | None] | None], float]:
    """The ETA model's answer for each of ``keys``: (earliest, latest, likely) minutes after t, or None when
    unknown; and the seconds per job, the forecast given."""
    from incidents.diagnosis.eta import eta

    t0 = time.perf_counter()
    out: dict[Key, tuple[float, float | None, float | None] | None] = {}
    for j in di.jobs:
        k = (j.namespace, j.name)
        if k in keys:
            e = eta(di, j, cp, basis, fc)
            out[k] = (
                None
                if e.unknown or e.lo is None
                else (
                    _minutes(e.lo - di.t),
                    None if e.hi is None else _minutes(e.hi - di.t),
                    None if e.likely is None else _minutes(e.likely - di.t),
                )
            )
    return out, (time.perf_counter() - t0) / max(len(keys), 1)


def use_database_of(name: str, scenario: Any) -> bool:
    """Switch to the source's own database (the configured one's name + the source's); whether it holds the
    pipeline's run of the scenario already (its cluster swept to the scenario's end)."""
    import re

    from django.core.management import call_command
    from django.db import connections
    from stages import ensure_database

    from collectors.models import SourceRun

    base = os.environ["DATABASE_URL"]
    db = f"{base.rsplit('/', 1)[1]}_{re.sub(r'[^a-z0-9]+', '_', name.lower())}"[:63]
    connections.close_all()
    ensure_database(f"{base.rsplit('/', 1)[0]}/{db}")
    connections["default"].settings_dict["NAME"] = db
    call_command("migrate", verbosity=0, interactive=False)
    runs = SourceRun.objects.filter(source="k8s", cluster__name=scenario.cluster.name)
    last = runs.order_by("-time").first()
    return (
        last is not None
        and scenario.end - HORIZON <= last.time <= scenario.end
        and not runs.filter(time__lt=scenario.start).exists()
    )


def measure(
    name: str, scenario: Any, moments_wanted: int, log: Any, reuse: bool = False, ends: bool = False
) -> list[Moment]:
    from django.core.management import call_command

    from collectors.models import Cluster
    from harness.scenario_run import run_scenario_file
    from incidents.diagnosis.pending import is_pending
    from incidents.diagnosis.scheduling_pass import PLACED, STARTS
    from simulator.engine.world import World

    if not (reuse and use_database_of(name, scenario)):
        call_command("flush", verbosity=0, interactive=False)
        t0 = time.perf_counter()
        run_scenario_file(scenario)
        log(f"{name}: pipeline {time.perf_counter() - t0:.0f} s")
    else:
        log(f"{name}: the pipeline's run kept from before (--reuse)")
    cluster = Cluster.objects.get(name=scenario.cluster.name)
    world = World.from_scenario(scenario)
    out = []
    # forward only: the world advances to each moment in turn
    chosen: list[datetime] = []
    for t in spread(sweep_moments(cluster, scenario), moments_wanted):
        if len(chosen) >= moments_wanted:
            break
        _di, cp, _secs = predict(cluster, t)
        if any(c.outcome != PLACED for c in cp.considered):
            chosen.append(t)
    for t in sorted(chosen):
        world.advance_to(t)
        di, cp, secs = predict(cluster, t)
        placed = {(c.job.namespace, c.job.name) for c in cp.considered if c.outcome == PLACED}
        waiting = [
            (j.namespace, j.name) for j in di.jobs if is_pending(j) and (j.namespace, j.name) not in placed
        ]
        in_sim = [k for k in waiting if (j := sim_job(world, k)) is not None and j.state == "Pending"]
        if not in_sim:
            continue
        bare = {(c.job.namespace, c.job.name): set(c.nodes) for c in cp.considered if c.outcome == STARTS}
        bare = {k: v for k, v in bare.items() if k in in_sim}
        basis, fc, later, fc_s = forecast_at(cluster, di, cp)
        predicted = {**{k: v for k, v in later.items() if k in in_sim}, **bare}
        started: dict[str, dict[Key, tuple[float, set[str]]]] = {}
        first: dict[Key, set[str]] = {}
        why: dict[Key, str] = {}
        evictors: dict[str, set[Key]] = {}
        back: dict[str, dict[str, float]] = {}
        etas, eta_s = etas_at(di, cp, basis, fc, in_sim)
        running_keys = [
            (j.namespace, j.name) for j in di.jobs if j.state.get("phase") == "Running" and not is_pending(j)
        ]
        checks: list[EndCheck] = []
        oracle: dict[Key, float | None] = {}
        spread_known: dict[Key, float | None] = {}
        for mode, arrivals in (("no arrivals", False), ("arrivals", True)):
            until = HORIZON if arrivals else ETA_HORIZON
            started[mode], f, fork, evictors[mode] = run_on(
                world,
                in_sim,
                t,
                arrivals=arrivals,
                until=until,
                watch=None if arrivals or not ends else running_keys,
            )
            back[mode] = fork.came_back
            if not arrivals:
                first = f
                if ends:
                    checks = end_checks(di, basis, fork, t)
                    oracle = oracle_etas(di, cp, world, fork, t, in_sim)
                    spread_known = spread_etas(di, cp, basis, world, in_sim)
                for k in in_sim:
                    if k in within(started[mode]):
                        continue
                    j = sim_job(fork, k)
                    if k in started[mode]:
                        why[k] = "it started after the hour"
                    else:
                        why[k] = (j.condition_reason or j.state) if j is not None else "gone"
        out.append(
            Moment(
                source=name,
                t=t,
                nodes=len(di.nodes),
                waiting=len(in_sim),
                answer_s=secs + fc_s,
                predicted=predicted,
                bare=bare,
                not_in_sim=len(waiting) - len(in_sim),
                placed=len(placed),
                started=started,
                first_pass=first,
                why_not=why,
                model={
                    (c.job.namespace, c.job.name): c.outcome + (f" ({c.why})" if c.why else "")
                    for c in cp.considered
                },
                reclaimers=evictors,
                came_back=back,
                eta=etas,
                eta_s=eta_s,
                end_checks=checks,
                oracle_eta=oracle,
                spread_eta=spread_known,
            )
        )
        log(
            f"  t={t:%H:%M} nodes={len(di.nodes)} waiting={len(in_sim)} pass={len(bare)} within the hour="
            f"{len(predicted)} started(no arrivals)={len(within(started['no arrivals']))} first tick={len(first)} "
            f"answer={secs * 1000:.0f} + {fc_s * 1000:.0f} ms"
        )
    return out


def end_checks(di: Any, basis: Any, fork: Any, t: datetime) -> list[EndCheck]:
    """Each job running at t (in the product's input and in the simulator): its expected end
    (``durations.expected_end``, the basis ``forecast`` observed) against the fork's first stop of it."""
    from incidents.diagnosis.durations import expected_end
    from incidents.diagnosis.pending import is_pending
    from incidents.diagnosis.types import parse_ts

    horizon = (fork.now - t).total_seconds() / 60
    out = []
    for j in di.jobs:
        k = (j.namespace, j.name)
        if j.state.get("phase") != "Running" or is_pending(j):
            continue
        sim = sim_job(fork, k)
        if sim is None:
            continue
        stop = fork.stops.get(k)
        if stop is None and not (sim.state == "Running" and sim.started_at and sim.started_at <= t):
            continue  # not running at t in the simulator (the stored state lags): nothing to compare
        e = expected_end(j, t, basis)
        started = parse_ts(j.get("started")) or t
        out.append(
            EndCheck(
                label=j.ref.label,
                kind="none" if e is None else "limit" if e.by_limit else e.kind,
                elapsed=_minutes(t - started),
                lo=None if e is None else _minutes(e.lo - t),
                likely=None if e is None else _minutes(e.likely - t),
                hi=None if e is None else _minutes(e.hi - t),
                actual=None if stop is None else round(stop[0], 1),
                how="running" if stop is None else stop[1],
                horizon=round(horizon, 1),
                samples=0 if e is None else e.samples,
            )
        )
    return out


def oracle_etas(
    di: Any, cp: Any, world: Any, fork: Any, t: datetime, keys: list[Key]
) -> dict[Key, float | None]:
    """The likely replay's start for each of ``keys`` (minutes after t; None: it does not start it), with every
    running job ending when the fork stopped it and every job the replay starts running the simulator's own
    runtime: what the ETA would say were the durations known. What it still misses is order, placement and
    evictions."""
    from incidents.diagnosis import replay, replay_room
    from incidents.diagnosis.durations import End
    from incidents.diagnosis.scheduling_pass import PLACED, STARTS

    def at_(when: datetime, label: str) -> End:
        return End(label, when, when, False, 1, mid=when)

    # an eviction is no end: the evicted job waits again or runs elsewhere, and the replay weighs evictions and
    # moves itself (taken for ends, the fork's victims vanished and left their new nodes' room to others)
    ends = [
        at_(t + timedelta(minutes=minutes), f"{k[0]}/{k[1]}")
        for k, (minutes, how) in fork.stops.items()
        if how != "evicted"
    ]

    def end_of(job: Any, when: datetime) -> End | None:
        sim = sim_job(world, (job.namespace, job.name))
        if sim is None or sim.runtime_s is None:
            return None
        return at_(when + timedelta(seconds=sim.runtime_s), job.ref.label)

    for c in cp.considered:
        if c.outcome == PLACED and (e := end_of(c.job, t)) is not None:
            ends.append(e)  # bound at t: it runs from t (``eta.running_ends``)

    with di.indexed():
        room = replay_room.build(di, cp)
        run = replay.replay(room, ends, end_of, lambda e: e.likely, t + ETA_HORIZON)
    out: dict[Key, float | None] = {}
    outcome = {(c.job.namespace, c.job.name): c.outcome for c in cp.considered}
    for k in keys:
        s = run.starts.get(f"{k[0]}/{k[1]}")
        out[k] = 0.0 if outcome.get(k) == STARTS else None if s is None else _minutes(s.at - t)
    return out


def spread_etas(di: Any, cp: Any, basis: Any, world: Any, keys: list[Key]) -> dict[Key, float | None]:
    """The ETA's likely start for each of ``keys`` (minutes after t; None: unknown) with the finished jobs' durations
    replaced by the runtimes of all the scenario's whole-GPU jobs of each project and shape (those yet to come
    too): what the model's ends would be with the kinds' spread known exactly, each job's own draw not. What the
    ETA still misses with it is the spread itself (a job's end within its kind's), not the sample."""
    from incidents.diagnosis.durations import Basis
    from incidents.diagnosis.eta import forecast

    runs: dict[Any, list[float]] = {}
    for j in world.jobs.values():
        if j.runtime_s is None or j.shared or j.mig_profile:
            continue
        runs.setdefault((j.project, int(j.pods), str(int(j.gpus_per_pod))), []).append(float(j.runtime_s))
    full = Basis(window=basis.window, durations=runs, limits=basis.limits)
    fc = forecast(di, cp, full, until=di.t + ETA_HORIZON)
    etas, _s = etas_at(di, cp, full, fc, keys)
    return {k: None if e is None else (e[2] if e[2] is not None else e[0]) for k, e in etas.items()}


def _minutes(d: timedelta) -> float:
    return round(d.total_seconds() / 60, 1)


def within(started: dict[Key, tuple[float, set[str]]]) -> dict[Key, set[str]]:
    """The jobs started within the hour (the fork without arrivals runs longer, for the ETAs)."""
    hour = HORIZON.total_seconds() / 60
    return {k: nodes for k, (minutes, nodes) in started.items() if minutes <= hour}


def eta_errors(moments: list[Moment], mode: str) -> dict[str, Any]:
    """The ETA's error against the simulator's start, for the jobs that started and had an ETA: minutes, and
    relative to the actual wait (the ETA's point is the middle of its range, its start when open-ended)."""
    errors, relative, signed = [], [], []
    known = started = 0
    for m in moments:
        for k, (actual, _nodes) in m.started[mode].items():
            started += 1
            e = m.eta.get(k)
            if e is None:
                continue
            known += 1
            point = e[2] if e[2] is not None else e[0] if e[1] is None else (e[0] + e[1]) / 2
            errors.append(abs(point - actual))
            relative.append(abs(point - actual) / max(actual, 1.0))
            signed.append((point - actual) / max(actual, 1.0))
    return {
        "started": started,
        "with_eta": known,
        "median_min": _q(errors, 0.5),
        "p90_min": _q(errors, 0.9),
        "median_rel": _q(relative, 0.5),
        "p90_rel": _q(relative, 0.9),
        "median_signed_rel": _q(signed, 0.5),  # below 0: the ETA comes early, on the whole
    }


def _q(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if q == 0.5:
        return round(statistics.median(values), 2)
    v = sorted(values)
    return round(v[min(len(v) - 1, int(q * len(v)))], 2)


def scores(moments: list[Moment], truth: Any) -> dict[str, Any]:
    """Precision, recall and node agreement of the predicted start set against ``truth(moment)``."""
    tp = fp = fn = same_nodes = waiting = 0
    for m in moments:
        actual = truth(m)
        waiting += m.waiting
        for k, nodes in m.predicted.items():
            if k in actual:
                tp += 1
                same_nodes += nodes == actual[k]
            else:
                fp += 1
        fn += sum(1 for k in actual if k not in m.predicted)
    return {
        "predicted": tp + fp,
        "started": tp + fn,
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / (tp + fn), 3) if tp + fn else None,
        "node_agreement": round(same_nodes / tp, 3) if tp else None,
        "both_wait": waiting - tp - fp - fn,  # neither predicted to start nor started: agreement on the rest
    }


def misses(moments: list[Moment], mode: str) -> dict[str, Counter[str]]:
    """Why the model missed: a predicted start the simulator did not make (its reason), a start it did not predict
    (when: the first tick is the pass at t's own claim; later, room freed by jobs that ended, which the replay
    foresees by their expected ends), and the ETA's point against the hour."""
    fps: Counter[str] = Counter()
    fns: Counter[str] = Counter()
    etas: Counter[str] = Counter()
    hour = HORIZON.total_seconds() / 60
    for m in moments:
        actual = within(m.started[mode])
        for k in m.predicted:
            if k not in actual:
                how = "the pass at t" if k in m.bare else "the replay"
                why = m.why_not.get(k, "still waiting") if mode == "no arrivals" else "still waiting"
                fps[f"{how} starts it; the simulator: {why}"] += 1
        for k in actual:
            if k in m.predicted:
                continue
            when = "first tick" if k in m.first_pass else "later in the hour"
            if _on_node_back(m, mode, k):
                fns[f"{when}, on a node that came back after t (repaired, uncordoned)"] += 1
                continue
            if k in m.reclaimers[mode]:
                fns[f"{when}, by evicting or moving others (reclaim, preempt, consolidate)"] += 1
                continue
            eta = m.eta.get(k)
            said = (
                f"the pass said {_reason(m.model.get(k, 'not reached'))}, no ETA"
                if eta is None
                else f"its likely start {_late(eta, hour)}"
            )
            fns[f"{when}; {said}"] += 1
        for k, e in m.eta.items():
            point = None if e is None else (e[2] if e[2] is not None else e[0])
            if point is not None and point <= hour and k not in actual:
                etas[
                    "ETA within the hour, did not start" + (f": {m.why_not[k]}" if k in m.why_not else "")
                ] += 1
            elif k in actual and (point is None or point > hour):
                etas["started, ETA " + ("unknown" if point is None else "past the hour")] += 1
    return {"false starts": fps, "missed starts": fns, "ETA misses": etas}


def miss_list(moments: list[Moment]) -> list[str]:
    """One line per waiting job the model got wrong (no arrivals): a start it did not predict within the hour, a
    start it predicted that did not come, or an ETA off by more than 20 % of the wait (and 5 min)."""
    out = []
    hour = HORIZON.total_seconds() / 60
    for m in moments:
        actual = m.started["no arrivals"]
        hit = within(actual)
        for k in sorted({*m.predicted, *hit, *m.eta}):
            e = m.eta.get(k)
            point = None if e is None else (e[2] if e[2] is not None else e[0])
            real = actual.get(k)
            wrong_set = (k in m.predicted) != (k in hit)
            wrong_eta = real is not None and (
                point is None or abs(point - real[0]) > max(0.2 * max(real[0], 1.0), 5.0)
            )
            if not (wrong_set or wrong_eta):
                continue
            said = "start" if k in m.predicted else "wait"
            did = f"start +{real[0]:.0f} min" if real is not None else m.why_not.get(k, "still waiting")
            if real is not None and real[0] > hour:
                did += " (after the hour)"
            evict = " by evicting" if k in m.reclaimers["no arrivals"] else ""
            if real is not None and _on_node_back(m, "no arrivals", k):
                evict += " on a node that came back"
            eta = "none" if e is None else "/".join("—" if x is None else f"{x:.0f}" for x in e)
            out.append(
                f"{m.source[:26]:26} {m.t:%H:%M} {k[0]}/{k[1]}: model {said} ({_reason(m.model.get(k, '?'))}), "
                f"sim {did}{evict}; ETA lo/hi/likely {eta}"
                + (
                    f"; nodes {sorted(m.predicted[k])} vs {sorted(real[1])}"
                    if k in m.predicted and real
                    else ""
                )
            )
    return out


def _on_node_back(m: Moment, mode: str, k: Key) -> bool:
    """Whether the job started on a node that gave back GPUs after t, before it started."""
    minutes, nodes = m.started[mode][k]
    return any(m.came_back[mode].get(n, math.inf) <= minutes for n in nodes)


def _late(eta: tuple[float, float | None, float | None], hour: float) -> str:
    point = eta[2] if eta[2] is not None else eta[0]
    if point <= hour:
        return "within the hour"
    return "past the hour" + (", its early one within" if eta[0] <= hour else "")


def _reason(outcome: str) -> str:
    """An outcome's kind without its numbers ("quota (over-quota: 24 of …)" -> "quota")."""
    return outcome.split(" (", 1)[0]


def _eta_starts(m: Moment) -> dict[Key, set[str]]:
    """The jobs whose likely ETA is within the hour, as a start set (nodes unknown: never agreeing)."""
    hour = HORIZON.total_seconds() / 60
    return {
        k: {"?"} for k, e in m.eta.items() if e is not None and (e[2] if e[2] is not None else e[0]) <= hour
    }


def report(moments: list[Moment], as_json: bool, list_misses: bool = False) -> None:
    modes = ("no arrivals", "arrivals")
    per_source = sorted({m.source for m in moments})
    result: dict[str, Any] = {"bench": "whatif", "moments": len(moments), "sources": {}}
    for src in [*per_source, "all"]:
        ms = [m for m in moments if src in ("all", m.source)]
        row: dict[str, Any] = {
            "moments": len(ms),
            "nodes": max((m.nodes for m in ms), default=0),
            "waiting": sum(m.waiting for m in ms),
            "lagging": sum(m.not_in_sim for m in ms),
            "placed": sum(m.placed for m in ms),
            "first_pass": scores(
                [dataclasses.replace(m, predicted=m.bare) for m in ms],
                lambda m: {k: m.started["no arrivals"][k][1] for k in m.first_pass},
            ),
            "bare": scores(
                [dataclasses.replace(m, predicted=m.bare) for m in ms],
                lambda m: within(m.started["no arrivals"]),
            ),
        }
        for mode in modes:
            row[mode] = scores(ms, lambda m, mode=mode: within(m.started[mode]))
            row[f"eta ≤ 1 h, {mode}"] = scores(
                [dataclasses.replace(m, predicted=_eta_starts(m)) for m in ms],
                lambda m, mode=mode: within(m.started[mode]),
            )
            row[f"eta ≤ 1 h, {mode}"]["node_agreement"] = None  # an ETA names no nodes
            row[mode]["eta_error"] = eta_errors(ms, mode)
        times = [m.answer_s for m in ms]
        row["answer_ms"] = {
            "median": round(statistics.median(times) * 1000, 1) if times else None,
            "max": round(max(times) * 1000, 1) if times else None,
            "eta_per_job_median": round(statistics.median(m.eta_s for m in ms) * 1000, 1) if ms else None,
        }
        result["sources"][src] = row
    result["misses"] = {mode: {k: dict(v) for k, v in misses(moments, mode).items()} for mode in modes}
    if as_json:
        print(json.dumps(result, default=str))
    else:
        print_report(result, moments, list_misses)


def print_report(result: dict[str, Any], moments: list[Moment], list_misses: bool = False) -> None:
    modes = ("no arrivals", "arrivals")
    answers = [m.answer_s for m in moments]

    def f(x: Any) -> str:
        return "—" if x is None else f"{x:.2f}"

    every = result["sources"].get("all", {})
    print(
        f"\n{len(moments)} moments; horizon {HORIZON}; left out of the scores: "
        f"{every.get('placed', 0)} waiting jobs with every pod bound already (the scheduler has placed them), "
        f"{every.get('lagging', 0)} the stored state shows waiting and the simulator does not"
    )
    print(
        f"{'source':30} {'mom':>3} {'nodes':>5} {'wait':>5} | {'prediction, truth':27} {'pred':>4} {'start':>5} "
        f"{'prec':>5} {'rec':>5} {'nodes=':>6} {'both wait':>9} | {'ans ms':>7} {'max':>6} {'eta/job':>7}"
    )
    rows = [
        ("first_pass", "pass at t, first tick"),
        ("bare", "pass at t, no arrivals"),
        ("no arrivals", "replay, no arrivals"),
        ("eta ≤ 1 h, no arrivals", "ETA ≤ 1 h, no arrivals"),
        ("arrivals", "replay, arrivals"),
        ("eta ≤ 1 h, arrivals", "ETA ≤ 1 h, arrivals"),
    ]
    for src, row in result["sources"].items():
        for i, (key, label) in enumerate(rows):
            s = row[key]
            head = (
                f"{src[:30]:30} {row['moments']:3} {row['nodes']:5} {row['waiting']:5}"
                if i == 0
                else f"{'':30} {'':3} {'':5} {'':5}"
            )
            a = row["answer_ms"]
            tail = f" | {a['median']!s:>7} {a['max']!s:>6} {a['eta_per_job_median']!s:>7}" if i == 0 else ""
            print(
                f"{head} | {label:27} {s['predicted']:4} {s['started']:5} {f(s['precision']):>5} "
                f"{f(s['recall']):>5} {f(s['node_agreement']):>6} {s['both_wait']:9}{tail}"
            )
    for mode in modes:
        e = every.get(mode, {}).get("eta_error", {})
        print(
            f"ETA error, {mode} (started within {ETA_HORIZON if mode == 'no arrivals' else HORIZON}): "
            f"{e.get('with_eta')} of {e.get('started')} started jobs had an ETA; |error| median "
            f"{e.get('median_min')} min, p90 {e.get('p90_min')} min; relative to the wait median "
            f"{e.get('median_rel')}, p90 {e.get('p90_rel')} (target median ≤ 0.2); signed median "
            f"{e.get('median_signed_rel')}"
        )
    print("ETA error per source, no arrivals (started / with an ETA / median min / median relative):")
    for src, row in result["sources"].items():
        e = row["no arrivals"]["eta_error"]
        if e["started"]:
            print(
                f"  {src[:30]:30} {e['started']:4} {e['with_eta']:4} {e['median_min']!s:>7} {e['median_rel']!s:>6}"
            )
    for mode in modes:
        print(f"\nmisses, {mode}:")
        for kind, counter in misses(moments, mode).items():
            for reason, n in counter.most_common(6):
                print(f"  {kind:13} {n:4}  {reason}")
    if list_misses:
        print("\nper job (no arrivals): " + str(len(lines := miss_list(moments))))
        for line in lines:
            print("  " + line)
    if answers:
        slow = max(answers)
        print(
            f"\ntime per answer (load the state at t + one pass): median {statistics.median(answers) * 1000:.0f} ms, "
            f"max {slow * 1000:.0f} ms at {max(moments, key=lambda m: m.answer_s).nodes} nodes "
            f"(target ≤ {TARGET_ANSWER_S:g} s at 1,213 nodes)"
        )
    total = result["sources"].get("all", {})
    for key in (*modes, *(f"eta ≤ 1 h, {mode}" for mode in modes)):
        s = total.get(key, {})
        label = key if key in modes else key.replace("eta", "ETA")
        if not s.get("predicted") and not s.get("started"):
            print(f"target precision and recall ≥ {TARGET} ({label}): nothing started or predicted to judge")
            continue
        ok = all(s.get(k) is not None and s[k] >= TARGET for k in ("precision", "recall"))
        print(
            f"target precision and recall ≥ {TARGET} ({'pass at t and replay, ' if key in modes else ''}{label}): "
            f"{'met' if ok else 'missed'}"
        )
    e = total.get("no arrivals", {}).get("eta_error", {})
    if e.get("median_rel") is not None:
        print(f"target ETA median error ≤ 0.2 of the wait: {'met' if e['median_rel'] <= 0.2 else 'missed'}")


def ends_report(moments: list[Moment], list_jobs: bool = False) -> None:
    """``--ends``: the running jobs' expected ends against the fork's, per basis; and the ETA's error with the
    model's ends against a replay with the actual ends, job by job, to say what the error comes from."""
    checks = [c for m in moments for c in m.end_checks]
    print(
        f"\nexpected ends against the fork without arrivals: {len(checks)} running jobs at {len(moments)} moments"
    )
    print(
        "  how the fork stopped them: "
        + ", ".join(f"{k} {n}" for k, n in Counter(c.how for c in checks).most_common())
    )
    print(
        f"  {'basis':32} {'jobs':>4} {'ended':>5} {'|err| p50':>9} {'p90':>6} {'rel p50':>7} {'signed':>6} "
        f"{'in lo-hi':>8} {'ran on':>6}"
    )
    kinds = sorted({c.kind for c in checks}) + ["all"]
    for kind in kinds:
        cs = [c for c in checks if kind in ("all", c.kind)]
        # (lo, likely, hi, actual) minutes after t, for the jobs with an expected end the fork ended
        known = [
            (
                c.lo if c.lo is not None else c.likely,
                c.likely,
                c.hi if c.hi is not None else math.inf,
                c.actual,
            )
            for c in cs
            if c.likely is not None and c.actual is not None
        ]
        err = [abs(lik - act) for _lo, lik, _hi, act in known]
        rel = [abs(lik - act) / max(act, 1.0) for _lo, lik, _hi, act in known]
        signed = [(lik - act) / max(act, 1.0) for _lo, lik, _hi, act in known]
        inside = sum(1 for lo, _lik, hi, act in known if lo <= act <= hi)
        # still running at the fork's end although the model ended it before: an error of at least the gap
        ran_on = [c for c in cs if c.actual is None and c.likely is not None and c.likely < c.horizon]
        print(
            f"  {kind[:32]:32} {len(cs):4} {len(known):5} {_q(err, 0.5)!s:>9} {_q(err, 0.9)!s:>6} "
            f"{_q(rel, 0.5)!s:>7} {_q(signed, 0.5)!s:>6} "
            f"{(f'{inside / len(known):.2f}' if known else '—'):>8} {len(ran_on):6}"
        )
    # attribution, job by job: the ETA's relative error with the model's ends, and with the actual ends
    rows: list[tuple[str, float, float | None, str]] = []
    spread_rel: list[float | None] = []
    lines = []
    for m in moments:
        for k, (actual, _nodes) in m.started["no arrivals"].items():
            e = m.eta.get(k)
            if e is None:
                continue
            point = e[2] if e[2] is not None else e[0] if e[1] is None else (e[0] + e[1]) / 2
            o = m.oracle_eta.get(k)
            model = abs(point - actual) / max(actual, 1.0)
            oracle = None if o is None else abs(o - actual) / max(actual, 1.0)
            sp = m.spread_eta.get(k)
            spread_rel.append(None if sp is None else abs(sp - actual) / max(actual, 1.0))
            if model <= 0.2:
                cause = "right"
            elif oracle is not None and oracle <= 0.2:
                cause = "durations (right with the actual ends)"
            elif k in m.reclaimers["no arrivals"]:
                cause = "evictions (the simulator started it by evicting)"
            elif _on_node_back(m, "no arrivals", k):
                cause = "a node came back after t"
            elif oracle is None:
                cause = "order/placement (the replay with actual ends does not start it)"
            else:
                cause = "order/placement (wrong with the actual ends too)"
            rows.append((m.source, model, oracle, cause))
            lines.append(
                f"  {m.source[:26]:26} {m.t:%H:%M} {k[0]}/{k[1]}: sim start +{actual:.0f} min; ETA (likely) "
                f"{point:.0f}, with the actual ends {'none' if o is None else f'{o:.0f}'}, with the spread known "
                f"{'none' if sp is None else f'{sp:.0f}'}: {cause}"
            )
    _start_set_scores(moments)
    if not rows:
        return
    model_rel = [r[1] for r in rows]
    oracle_rel = [r[2] for r in rows if r[2] is not None]
    print(
        f"\nETA relative error over the {len(rows)} started jobs with an ETA: model's ends median "
        f"{_q(model_rel, 0.5)} p90 {_q(model_rel, 0.9)}; the actual ends ({len(oracle_rel)} with a start) median "
        f"{_q(oracle_rel, 0.5)} p90 {_q(oracle_rel, 0.9)}"
    )
    known_spread = [x for x in spread_rel if x is not None]
    print(
        f"  with every runtime of each kind known (the spread, not the draw; {len(known_spread)} with an ETA): "
        f"median {_q(known_spread, 0.5)} p90 {_q(known_spread, 0.9)}"
    )
    for src in sorted({r[0] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r[0] == src]
        print(
            f"  {src[:28]:28} {len(idx):3} model {_q([rows[i][1] for i in idx], 0.5)!s:>5}  actual ends "
            f"{_q([x for i in idx if (x := rows[i][2]) is not None], 0.5)!s:>5}  spread known "
            f"{_q([x for i in idx if (x := spread_rel[i]) is not None], 0.5)!s:>5}"
        )
    print("  ETA off by more than 0.2 of the wait, by cause (jobs, summed relative error):")
    for cause, n in Counter(r[3] for r in rows).most_common():
        print(f"    {n:4} {sum(r[1] for r in rows if r[3] == cause):7.1f}  {cause}")
    if list_jobs:
        print("\nper started job with an ETA (no arrivals): " + str(len(lines)))
        for line in lines:
            print(line)


def _start_set_scores(moments: list[Moment]) -> None:
    """Precision and recall of "starts within the hour" (no arrivals) by the model's ETA, with the actual ends and
    with the spread known: what of the start set's misses the durations explain."""
    hour = HORIZON.total_seconds() / 60
    for label, read in (
        ("the model's ends", lambda m, k: None if m.eta.get(k) is None else m.eta[k][2]),
        ("the actual ends", lambda m, k: m.oracle_eta.get(k)),
        ("the spread known", lambda m, k: m.spread_eta.get(k)),
    ):
        tp = fp = fn = 0
        for m in moments:
            truth = within(m.started["no arrivals"])
            said = {k for k in m.oracle_eta if (x := read(m, k)) is not None and x <= hour}
            tp += len(said & set(truth))
            fp += len(said - set(truth))
            fn += len(set(truth) - said)
        p = f"{tp / (tp + fp):.2f}" if tp + fp else "—"
        r = f"{tp / (tp + fn):.2f}" if tp + fn else "—"
        print(
            f"starts within the hour by the ETA with {label}: precision {p}, recall {r} ({tp + fp} predicted)"
        )


def dump(moments: list[Moment], path: Path) -> None:
    """One JSON line per job waiting at a moment: its ETA (earliest, latest, likely minutes; null: unknown), the
    simulator's start without arrivals (minutes; null: none within the fork) and whether the model starts it
    within the hour."""
    with path.open("w") as f:
        for m in moments:
            for k in sorted(set(m.eta) | set(m.started["no arrivals"]) | set(m.predicted)):
                actual = m.started["no arrivals"].get(k)
                row = {
                    "source": m.source,
                    "t": m.t.isoformat(),
                    "job": "/".join(k),
                    "eta": m.eta.get(k),
                    "actual": None if actual is None else actual[0],
                    "predicted": k in m.predicted,
                }
                f.write(json.dumps(row) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--scenarios",
        nargs="*",
        default=list(DEFAULT_SCENARIOS),
        metavar="GLOB",
        help="bundled scenario files (names or globs in simulator/scenarios; '*.yaml': all)",
    )
    ap.add_argument("--trace", metavar="DIR", help="directory of Alibaba's openb CSVs (bench/trace.py)")
    ap.add_argument("--trace-fraction", type=float, default=0.1)
    ap.add_argument("--trace-hours", type=int, default=3)
    ap.add_argument("--moments", type=int, default=3, help="sample moments per source")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--dump",
        metavar="FILE",
        help="write each waiting job's ETA and the simulator's start (no arrivals) as JSON lines, to compare runs",
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="one database per source, its pipeline run kept and reused by the next run (to weigh a change of "
        "the model alone; run without it after a change of the pipeline or of a scenario)",
    )
    ap.add_argument("--list", action="store_true", help="one line per waiting job the model got wrong")
    ap.add_argument(
        "--ends",
        action="store_true",
        help="the running jobs' expected ends against the simulator's, and the ETA with the actual ends",
    )
    args = ap.parse_args()
    setup(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/rcaweb_whatif")

    def log(line: str) -> None:
        print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

    moments: list[Moment] = []
    for name, scenario in sources(args):
        moments += measure(name, scenario, args.moments, log, args.reuse, args.ends)
    report(moments, args.json, args.list)
    if args.dump:
        dump(moments, Path(args.dump))
    if args.ends and not args.json:
        ends_report(moments, args.list)
    return 0


if __name__ == "__main__":
    sys.exit(main())
