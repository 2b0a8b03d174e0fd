"""Sweeps: plain functions the Celery tasks, the management commands and the simulator drivers call.

``sweep_cluster`` (inventory), ``sweep_telemetry`` (5-minute GPU samples), ``sweep_events`` (Kubernetes
events past their TTL). Each returns a :class:`SweepSummary`; none raises for a source failure.
"""

from __future__ import annotations

from collectors.sweep.common import SweepSummary, cluster_lock
from collectors.sweep.events import store_events, sweep_events
from collectors.sweep.inventory import sweep_cluster
from collectors.sweep.telemetry import ask_telemetry, sweep_telemetry

__all__ = [
    "SweepSummary",
    "ask_telemetry",
    "cluster_lock",
    "store_events",
    "sweep_cluster",
    "sweep_events",
    "sweep_telemetry",
]
