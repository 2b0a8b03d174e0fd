"""Where a pipeline run's time goes: exclusive wall time per stage, per thread (used by bench/trace.py, bench/sim.py).

``Stages.wrap(owner, attr, name)`` replaces a function or method with one that times each call (those for
which ``when``, given the call's arguments, is true, if it is given). Times are
*exclusive*: a stage called inside another (the diagnosis inside the evidence collection, the rediagnosis
inside a sweep's signal) is taken out of its caller's figure, so the stages add up to the time the threads
spent in them. The inline worker thread runs grouping, evidence and diagnosis while the driver thread
advances the simulator, so stages of different threads overlap in wall time; ``drain wait`` is the time the
driver spent waiting for that thread to finish.

Nothing here changes what runs: the wrappers call the original and only read the clock.
"""

from __future__ import annotations

import functools
import os
import resource
import threading
import time
from collections.abc import Callable
from typing import Any


class Stages:
    def __init__(self) -> None:
        self.total: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._local = threading.local()
        self._lock = threading.Lock()
        self._undo: list[tuple[Any, str, Any]] = []
        self.last_args: dict[str, tuple[Any, ...]] = {}  # the latest call's arguments, per stage

    def wrap(
        self, owner: Any, attr: str, name: str, when: Callable[..., bool] | None = None
    ) -> None:
        original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        func: Callable[..., Any] = original

        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if when is not None and not when(*args, **kwargs):
                return func(*args, **kwargs)
            self.last_args[name] = args
            stack = self._stack()
            stack.append(0.0)  # time spent in nested stages
            t0 = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                inner = stack.pop()
                if stack:
                    stack[-1] += elapsed
                with self._lock:
                    self.total[name] = self.total.get(name, 0.0) + elapsed - inner
                    self.calls[name] = self.calls.get(name, 0) + 1

        self._undo.append((owner, attr, original))
        setattr(owner, attr, timed)

    def _stack(self) -> list[float]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def restore(self) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        self._undo.clear()

    def table(self) -> list[tuple[str, float, int]]:
        return sorted(((k, v, self.calls[k]) for k, v in self.total.items()), key=lambda r: -r[1])

    def report_every(self, seconds: float, out: Callable[[str], None] = print) -> threading.Event:
        """Print the simulated time and the stage table every ``seconds`` until the returned event is set."""
        stop = threading.Event()
        started = time.perf_counter()

        def run() -> None:
            while not stop.wait(seconds):
                args = self.last_args.get("engine ticks") or self.last_args.get(
                    "engine ticks (simulator process)"
                )
                at = f"{args[1]:%H:%M}" if args and len(args) > 1 else "?"
                rows = ", ".join(f"{n} {v:.0f} s/{c}" for n, v, c in self.table()[:8])
                out(
                    f"  [{time.perf_counter() - started:.0f} s wall, simulated {at}, load {load()}, "
                    f"memory {rss_mib():.0f} MiB (peak {peak_mib():.0f})] {rows}"
                )

        threading.Thread(target=run, daemon=True).start()
        return stop


def rss_mib() -> float:
    """The process' resident memory now (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def peak_mib() -> float:
    """The process' peak resident memory so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def children_usage() -> tuple[float, float]:
    """CPU seconds and peak resident MiB of this process' ended children (run_scenario --sim-process: the
    simulator's process, once it ended)."""
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return child.ru_utime + child.ru_stime, child.ru_maxrss / 1024


def pipeline_stages() -> Stages:
    """Wrap the stages of a ``run_scenario`` run (call before it starts; Django must be set up)."""
    import collectors.sweep as sweep
    import incidents.diagnosis_run as diagnose
    import incidents.evidence as evidence
    import incidents.inline_worker as inline_worker
    import incidents.lifecycle as lifecycle
    import incidents.outbox as outbox
    import simulator.scenario as scenario
    from harness.driver import Harness
    from simulator.alertmanager import AlertSender
    from simulator.apiserver import Store
    from simulator.engine.world import World

    s = Stages()
    s.wrap(scenario, "load_scenario", "scenario load")
    s.wrap(World, "_build", "world build")
    s.wrap(World, "advance_to", "engine ticks")
    # run_scenario --sim-process: the world moves in the other process; this is the driver waiting for it
    # (in one process the engine's ticks, the store's sync and the alerts are timed as themselves, above)
    s.wrap(
        Harness,
        "advance_to",
        "engine ticks (simulator process)",
        when=lambda harness, t: harness.process is not None,
    )
    s.wrap(Store, "sync", "API store sync")
    s.wrap(AlertSender, "tick", "alert sending (incl. webhook answers)")
    s.wrap(sweep, "sweep_cluster", "inventory sweep")
    s.wrap(sweep, "sweep_events", "event sweep")
    s.wrap(sweep, "sweep_telemetry", "telemetry sweep")
    s.wrap(sweep, "ask_inventory", "inventory asked ahead")
    s.wrap(lifecycle, "settle", "settle")
    s.wrap(inline_worker, "drain", "drain wait (driver)")
    s.wrap(outbox, "process_alerts", "grouping")
    s.wrap(evidence, "collect_evidence", "evidence")
    s.wrap(diagnose, "diagnose_incident", "diagnosis")
    s.wrap(diagnose, "rediagnose_changed", "rediagnosis after sweeps")
    return s


def ensure_database(url: str) -> None:
    if not url.startswith(("postgres://", "postgresql://")):
        return
    from urllib.parse import urlparse

    import psycopg

    name = urlparse(url).path.lstrip("/")
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())
