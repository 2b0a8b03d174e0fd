"""The simulated cluster in a process of its own: its servers on another core than the pipeline reading them.

In one process the simulator's servers (Prometheus evaluating DCGM series for every GPU, the API server
rendering listings, the engine and its store) share one interpreter lock with the collectors, the intake and
the diagnosis that read them: on a busy 200-node scenario they were about 30 % of a run's CPU
(``bench/sim.py --pipeline``). Real Kubernetes and Prometheus are other processes; with :class:`SimProcess`
so is the simulator. The child builds the world from the scenario and serves it with :class:`SimServer`
(real HTTP, as in one process); the parent moves its clock through a pipe. ``advance_to`` answers once the
world moved, its state was published and the notifications due were posted (as ``SimServer.advance_to``
does), with the alerts of that moment, which the driver reads through :attr:`SimProcess.world`.

The child is started with ``spawn`` (a fresh interpreter: the parent has threads and database connections
that must not be forked) and imports nothing of Django. What it costs is reported by :meth:`SimProcess.stop`
(its CPU seconds and peak memory).
"""

from __future__ import annotations

import multiprocessing
import resource
import time
from datetime import datetime
from typing import Any

READY_TIMEOUT_S = 600.0  # building a 1,213-node world from an 8,000-job scenario takes a while on a busy core
CALL_TIMEOUT_S = 600.0


class SimProcessError(RuntimeError):
    """The simulator's process failed or ended (its traceback, when it could send one, is in the message)."""


class RemoteWorld:
    """What the driver reads of the world in the other process: its clock, tick and alerts, as of the last
    answer (the world moves only when the driver advances it, so these are current)."""

    def __init__(
        self, now: datetime, tick_seconds: int, cluster_name: str, alerts: list[dict[str, Any]]
    ) -> None:
        self.now = now
        self.tick_seconds = tick_seconds
        self.cluster_name = cluster_name
        self.last_alerts = alerts

    def alerts(self, include_pending: bool = False) -> list[dict[str, Any]]:
        return [a for a in self.last_alerts if include_pending or a.get("status") != "pending"]


class SimProcess:
    """A ``SimServer`` over ``World.from_scenario(scenario)`` in a child process, with the same interface to the
    driver: ``start``/``stop``, ``advance_to``, ``kubeconfig_path``, ``kube_url``, ``prometheus_url``,
    ``runai_url``."""

    def __init__(
        self,
        scenario: Any,
        alert_url: str | None = None,
        alert_token: str | None = None,
        gc_thresholds: tuple[int, int, int] | None = None,
    ) -> None:
        """``gc_thresholds``: the child's ``gc.set_threshold`` once its world is built (and that world frozen
        out of the collector's passes); None leaves the child's collector as Python sets it."""
        self.scenario = scenario
        self.gc_thresholds = gc_thresholds
        self.alert_url = alert_url
        self.alert_token = alert_token
        self.world: RemoteWorld | None = None
        self.kubeconfig_path = self.kube_url = self.prometheus_url = self.runai_url = ""
        self.child_cpu_s = 0.0
        self.child_peak_mib = 0.0
        self._conn: Any = None
        self._proc: Any = None

    def start(self) -> SimProcess:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve,
            args=(child, self.scenario, self.alert_url, self.alert_token, self.gc_thresholds),
            name="rcaweb-sim",
            daemon=True,
        )
        self._proc.start()
        child.close()
        try:
            ready = self._call(None, timeout=READY_TIMEOUT_S)
        except BaseException:
            self.stop()  # a child that failed to build or serve the world is not left behind
            raise
        self.kubeconfig_path = ready["kubeconfig_path"]
        self.kube_url = ready["kube_url"]
        self.prometheus_url = ready["prometheus_url"]
        self.runai_url = ready["runai_url"]
        self.world = RemoteWorld(ready["now"], ready["tick_seconds"], ready["cluster_name"], ready["alerts"])
        return self

    @property
    def pid(self) -> int | None:
        """The operating-system id of the simulator's process while it runs (for CPU accounting), else None."""
        return None if self._proc is None else self._proc.pid

    def advance_to(self, t: datetime) -> list[dict[str, Any]]:
        """Move the world to t, publish it, send the notifications due; returns them (as SimServer does)."""
        assert self.world is not None
        answer = self._call(("advance", t))
        self.world.now = answer["now"]
        self.world.last_alerts = answer["alerts"]
        return answer["sent"]

    def stop(self) -> None:
        if self._proc is None:
            return
        try:
            if self._proc.is_alive():
                usage = self._call(("stop",), timeout=60.0)
                self.child_cpu_s, self.child_peak_mib = usage["cpu_s"], usage["peak_mib"]
        except (SimProcessError, OSError, EOFError):  # it ended or is ending: joined below
            pass
        finally:
            self._proc.join(timeout=30)
            if self._proc.is_alive():
                self._proc.terminate()
                self._proc.join(timeout=10)
            self._conn.close()
            self._proc = None

    def __enter__(self) -> SimProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, message: Any, timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        if message is not None:
            self._conn.send(message)
        deadline = time.monotonic() + timeout
        while not self._conn.poll(0.5):
            if not self._proc.is_alive():
                raise SimProcessError(f"the simulator's process ended (exit code {self._proc.exitcode})")
            if time.monotonic() > deadline:
                raise SimProcessError(f"the simulator's process did not answer in {timeout:.0f} s")
        try:
            kind, body = self._conn.recv()
        except EOFError:
            raise SimProcessError("the simulator's process ended before it answered")
        if kind == "error":
            raise SimProcessError(f"the simulator failed:\n{body}")
        return body


def _serve(
    conn: Any,
    scenario: Any,
    alert_url: str | None,
    alert_token: str | None,
    gc_thresholds: tuple[int, int, int] | None,
) -> None:
    """The child: build and serve the world, then answer the parent until it says stop."""
    import gc
    import traceback

    from simulator.engine.world import World
    from simulator.server import SimServer

    try:
        world = World.from_scenario(scenario)
        server = SimServer(world, alert_url=alert_url, alert_token=alert_token).start()
        if gc_thresholds is not None:  # the built world frozen out of the collector's passes
            gc.set_threshold(*gc_thresholds)
            gc.freeze()
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    try:
        conn.send(
            (
                "ready",
                {
                    "kubeconfig_path": server.kubeconfig_path,
                    "kube_url": server.kube_url,
                    "prometheus_url": server.prometheus_url,
                    "runai_url": server.runai_url,
                    "now": world.now,
                    "tick_seconds": getattr(world, "tick_seconds", 60),
                    "cluster_name": getattr(world, "cluster_name", "sim"),
                    "alerts": world.alerts(include_pending=True),
                },
            )
        )
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return  # the parent is gone
            if message[0] == "stop":
                usage = resource.getrusage(resource.RUSAGE_SELF)
                conn.send(
                    (
                        "stopped",
                        {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024},
                    )
                )
                return
            try:
                sent = server.advance_to(message[1])
                with server.lock:
                    answer = {"now": world.now, "alerts": world.alerts(include_pending=True), "sent": sent}
                conn.send(("advanced", answer))
            except Exception:
                conn.send(("error", traceback.format_exc()))
    finally:
        server.stop()
