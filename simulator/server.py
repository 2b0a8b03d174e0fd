"""SimServer: the simulated cluster's Kubernetes API, Prometheus and Run:ai API on loopback, plus its Alertmanager.

One lock guards the world: ``advance_to`` moves the world and re-syncs the
API server's store under it, HTTP handlers that read the world directly
(Prometheus, logs, Run:ai) take it too. The alert sender runs after each
advance, on the simulated clock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from simulator.alertmanager import AlertSender, Sink
from simulator.apiserver import KubeAPIServer, Store
from simulator.apiserver.tls import generate as generate_tls
from simulator.prometheus import (
    DcgmSource,
    PrometheusServer,
    exporter_targets,
    kubelet_targets,
    scrape_config,
)
from simulator.runai import RunaiServer

logger = logging.getLogger(__name__)


class SimServer:
    def __init__(
        self,
        world: Any,
        alert_url: str | None = None,
        alert_token: str | None = None,
        host: str = "127.0.0.1",
        *,
        alert_sink: Sink | None = None,
        port_base: int = 0,
        kube_token: str = "sim-kube-token",
        runai_token: str = "sim-runai-token",
        disabled_metrics: tuple[str, ...] | set[str] | frozenset[str] = (),
        scrape_interval_s: int = 30,
        retention_s: int | None = None,
    ) -> None:
        self.world = world
        self.host = host
        self.lock = threading.RLock()
        self.kube_token = kube_token
        self.runai_token = runai_token
        self.store = Store()
        variant = getattr(world, "dcgm_labels", "") or getattr(
            getattr(getattr(world, "scenario", None), "cluster", None), "dcgm_labels", "classic"
        )
        if retention_s is None:  # what the world's telemetry keeps, else Prometheus' default 15 d
            retention_s = getattr(getattr(world, "telemetry", None), "retention_s", 15 * 86400)
        self.source = DcgmSource(world, variant, disabled_metrics, scrape_interval_s, retention_s)
        with self.lock:
            self.store.sync(world)
        cluster = getattr(world, "cluster_name", None) or "sim"
        self._dir = Path(tempfile.mkdtemp(prefix="rcaweb-sim-"))
        # HTTPS with a CA of its own, as kubectl/client-go send a bearer token only over TLS.
        self.kube_tls = generate_tls(self._dir / "pki", host, cluster)
        self.kube = KubeAPIServer(world, self.store, self.lock, kube_token, host, port_base, self.kube_tls)
        self.prometheus = PrometheusServer(
            world, self.lock, self.source, host, port_base + 1 if port_base else 0, store=self.store
        )
        self.runai = RunaiServer(world, self.lock, runai_token, host, port_base + 2 if port_base else 0)
        # Like Prometheus' --web.external-url: a stable name, so payloads do not depend on the free port chosen.
        self.alert_sender = AlertSender(
            alert_url,
            alert_token,
            alert_sink,
            generator_url=f"http://prometheus.{cluster}.sim:9090",
            external_url=f"http://alertmanager.{cluster}.sim:9093",
        )
        self.kubeconfig_path = str(self._dir / "kubeconfig")
        self._write_kubeconfig()
        self._targets_files: list[str] = []
        self._targets_written = 0
        self.scrape_config_path = str(self._dir / "prometheus.yml")
        self.write_scrape_config(self.scrape_config_path)
        self._started = False

    @property
    def kube_url(self) -> str:
        return self.kube.url

    @property
    def kube_ca_path(self) -> str:
        """PEM of the CA that signed the API server's certificate (also inline in the kubeconfig)."""
        return self.kube_tls.ca_path

    @property
    def prometheus_url(self) -> str:
        return self.prometheus.url

    @property
    def runai_url(self) -> str:
        return self.runai.url

    def _write_kubeconfig(self) -> None:
        cluster = getattr(self.world, "cluster_name", None) or "sim"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": cluster,
                    "cluster": {
                        "server": self.kube_url,
                        "certificate-authority-data": self.kube_tls.ca_data,
                    },
                }
            ],
            "users": [{"name": "sim-reader", "user": {"token": self.kube_token}}],
            "contexts": [{"name": "sim", "context": {"cluster": cluster, "user": "sim-reader"}}],
            "current-context": "sim",
            "preferences": {},
        }
        Path(self.kubeconfig_path).write_text(yaml.safe_dump(config, sort_keys=False))

    def write_scrape_config(self, path: str, scrape_interval_s: int | None = None) -> str:
        """Write a prometheus.yml scraping every node's dcgm-exporter as a ServiceMonitor would, and
        kube-state-metrics (simulator/API.md), with its targets file beside it; returns the path."""
        targets = str(Path(path).with_name(Path(path).stem + "-dcgm-targets.json"))
        self._targets_files.append(targets)
        self._write_targets(targets)
        config = scrape_config(
            self.prometheus_url,
            targets,
            scrape_interval_s=scrape_interval_s or self.source.interval,
            kubelet_targets_file=self._kubelet_file(targets),
        )
        Path(path).write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    @staticmethod
    def _kubelet_file(targets: str) -> str:
        """The kubelets' targets file beside the exporters' (``…-dcgm-targets.json`` → ``…-kubelet-targets.json``)."""
        return targets.replace("-dcgm-targets.json", "-kubelet-targets.json")

    def _write_targets(self, path: str) -> None:
        nodes = list(self.world.nodes.values() if isinstance(self.world.nodes, dict) else self.world.nodes)
        for where, groups in (
            (path, exporter_targets(self.prometheus_url, nodes, self.source)),
            (self._kubelet_file(path), kubelet_targets(self.prometheus_url, nodes)),
        ):
            tmp = Path(where + ".tmp")  # renamed into place: Prometheus never reads half a file
            tmp.write_text(json.dumps(groups, indent=1))
            tmp.replace(where)
        self._targets_written = len(nodes)

    def _sync_targets(self) -> None:
        """Nodes added by the scenario (add_nodes) become scrape targets, as a DaemonSet pod would."""
        if len(self.world.nodes) != self._targets_written:
            for path in self._targets_files:
                self._write_targets(path)

    #
    # Lifecycle
    #

    def start(self) -> SimServer:
        if not self._started:
            self.kube.start()
            self.prometheus.start()
            self.runai.start()
            self._started = True
            logger.info(
                "sim serving kube %s prometheus %s runai %s",
                self.kube_url,
                self.prometheus_url,
                self.runai_url,
            )
        return self

    def stop(self) -> None:
        if self._started:
            self.kube.stop()
            self.prometheus.stop()
            self.runai.stop()
            self._started = False
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    #
    # Time
    #

    def advance_to(self, t: datetime) -> list[dict[str, Any]]:
        """Move the world to t, publish its state, then send the alert notifications due; returns them."""
        with self.lock:
            self.world.advance_to(t)
            self.store.publish(self.world)  # rendered for the API when next read (or now, for a watch)
            alerts = list(self.world.alerts())
            now = self.world.now
            self._sync_targets()
        return self.alert_sender.tick(now, alerts)

    def step(self) -> list[dict[str, Any]]:
        tick = getattr(self.world, "tick_seconds", 60)
        return self.advance_to(self.world.now + timedelta(seconds=tick))

    def run_realtime(
        self,
        speed: float = 1.0,
        until: datetime | None = None,
        stop: threading.Event | None = None,
        anchor: datetime | None = None,
    ) -> None:
        """Advance with the wall clock (speed 60 = one simulated minute per second) until ``until`` or ``stop``.

        ``anchor``: the wall-clock instant at which the world's time was ``world.now`` (default: now). The world's
        time is then ``world.now + (wall - anchor) * speed``; with a world started at the wall clock and speed 1
        it *is* the wall clock, so what kubectl computes from it (AGE, event times) is right.
        """
        end = until or getattr(self.world, "end", None)
        tick = getattr(self.world, "tick_seconds", 60)
        started_sim = self.world.now
        started_wall = (anchor or datetime.now(UTC)).timestamp()
        while stop is None or not stop.is_set():
            target = started_sim + timedelta(seconds=(time.time() - started_wall) * speed)
            target = target.replace(microsecond=0)
            if end is not None and target >= end:
                self.advance_to(end)
                break
            if target > self.world.now:
                self.advance_to(target)
            wait = max(0.05, min(1.0, tick / speed / 4))
            if stop is not None:
                stop.wait(wait)
            else:
                time.sleep(wait)


def serve_scenario(
    path: str,
    *,
    speed: float = 1.0,
    alert_url: str | None = None,
    alert_token: str | None = None,
    port_base: int = 0,
    out: Any = None,
    stop: threading.Event | None = None,
    keep_start: bool = False,
) -> None:
    """Load a scenario and serve it live until its end, ``stop`` or Ctrl-C (``manage.py simulate``).

    Live means on the wall clock: the scenario starts now (its offsets unchanged), so timestamps, kubectl's
    AGE and event times are real ones; ``keep_start`` keeps the file's own ``start`` instead (a replay).
    """
    import dataclasses

    from simulator.engine.world import World
    from simulator.scenario import load_scenario

    wall = datetime.now(UTC).replace(microsecond=0)
    scenario = load_scenario(path)
    if not keep_start:
        scenario = dataclasses.replace(scenario, start=wall)
    world = World.from_scenario(scenario)
    with SimServer(world, alert_url, alert_token, port_base=port_base) as server:
        if out is not None:
            out.write(f"kubeconfig: {server.kubeconfig_path}\n")
            out.write(f"kube CA:    {server.kube_ca_path}\n")
            out.write(f"kubernetes: {server.kube_url} (token {server.kube_token})\n")
            out.write(f"prometheus: {server.prometheus_url}\n")
            out.write(f"prometheus scrape config: {server.scrape_config_path}\n")
            out.write(f"runai:      {server.runai_url} (token {server.runai_token})\n")
            out.write(
                f"simulating {world.scenario.name} from {world.now:%Y-%m-%dT%H:%M:%SZ} at {speed}x; Ctrl-C stops\n"
            )
            out.flush()
        with contextlib.suppress(KeyboardInterrupt):
            server.run_realtime(speed=speed, stop=stop, anchor=None if keep_start else wall)
