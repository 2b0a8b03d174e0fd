"""``Ledger``: what the engine keeps between ticks that no API object shows.

The world owns one and hands it to the engine's modules as ``world.ledger``: each module reads and writes
these fields by name, never a private field of the world.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..state import SimPod


@dataclass
class Ledger:
    # seconds of work done by each running job
    progress: dict[str, float] = field(default_factory=dict)
    # the last ten-minute step of progress a job logged
    logged: dict[str, float] = field(default_factory=dict)
    # every pod a job created, in creation order (including ones being deleted)
    pods_by_job: dict[str, list[SimPod]] = field(default_factory=dict)
    # node -> MIG layout the GPU Operator's mig-manager is applying
    mig_pending: dict[str, dict[str, int]] = field(default_factory=dict)
    # image pulls tried per "pod/container", for the kubelet's back-off
    pull_attempts: dict[str, int] = field(default_factory=dict)
    # jobs whose image an event changed
    image_changed: set[str] = field(default_factory=set)
    # jobs whose failure starts with their first image event (the bump broke them)
    failure_from_image_event: set[str] = field(default_factory=set)
    # the scheduler's last message per job, and when it was recorded
    last_sched_event: dict[str, tuple[str, datetime]] = field(default_factory=dict)
    # scheduling attempts per job
    attempts: dict[str, int] = field(default_factory=dict)
