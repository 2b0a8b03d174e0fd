"""Sweeps: plain functions the Celery tasks, the management commands and the simulator drivers call.

``sweep_cluster`` (inventory), ``sweep_telemetry`` (5-minute GPU samples), ``sweep_events`` (Kubernetes
events past their TTL). Each returns a :class:`SweepSummary`; none raises for a source failure.
``ask_inventory`` and ``ask_telemetry`` send a sweep's reads ahead of it, for a driver that waits on other work
first (the simulation harness).
"""

from __future__ import annotations

from collectors.sweep.cluster_lock import cluster_lock
from collectors.sweep.events import store_events, sweep_events
from collectors.sweep.inventory import ask_inventory, sweep_cluster
from collectors.sweep.summary import SweepSummary
from collectors.sweep.telemetry import ask_telemetry, sweep_telemetry

__all__ = [
    "SweepSummary",
    "ask_inventory",
    "ask_telemetry",
    "cluster_lock",
    "store_events",
    "sweep_cluster",
    "sweep_events",
    "sweep_telemetry",
]
