"""The fleet page's funnel: GPUs at t, healthy, allocated, active, used well, each stage a subset of the one before.

Stages from "allocated" on are GPU units: a shared GPU counts its shares' fractions, a MIG GPU the part of
its layout its used instances take (web/console/fleet.py says how).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from web.console.gpu_activity import ACTIVE_SM, WELL_USED_SM

if TYPE_CHECKING:
    from web.console.fleet import Cell

STAGES = ("total", "healthy", "allocated", "active", "well_used")
STAGE_LABELS = {
    "total": "GPUs",
    "healthy": "healthy & allocatable",
    "allocated": "allocated",
    "active": f"active (SM > {ACTIVE_SM:.0%})",
    "well_used": f"used well (SM > {WELL_USED_SM:.0%})",
}


@dataclass
class Funnel:
    """GPUs counted at each stage; ``add`` counts one GPU cell of the grid."""

    total: int = 0
    healthy: int = 0
    allocated: float = (
        0  # GPU units: a whole GPU 1, a shared GPU its shares' fractions, a MIG GPU its used part
    )
    active: float = 0
    well_used: float = 0
    shared_gpus: int = 0  # healthy GPUs KAI shares, with at least one share on them
    shares: int = 0  # the shares on them
    mig_gpus: int = 0  # healthy partitioned GPUs with at least one instance in use
    mig_instances: int = 0  # MIG instances in use (a pod on them)
    mig_instances_free: int = 0  # MIG instances of healthy GPUs no pod holds

    def add(self, cell: Cell) -> None:
        self.total += 1
        self.healthy += cell.healthy
        if cell.healthy and cell.kind == "mig":
            self.mig_instances_free += cell.slices_total - cell.slices
        if not (cell.healthy and cell.allocated):
            return
        units = cell.units
        self.allocated = round(self.allocated + units, 4)
        if cell.active:
            self.active = round(self.active + units, 4)
        if cell.well_used:
            self.well_used = round(self.well_used + units, 4)
        if cell.kind == "shared":
            self.shared_gpus += 1
            self.shares += cell.slices
        elif cell.kind == "mig":
            self.mig_gpus += 1
            self.mig_instances += cell.slices

    def stages(self) -> list[tuple[str, str, float, float]]:
        """(stage, label, count, share of total) for the template's bars; counts from "allocated" on in GPU
        units (a whole number prints as one)."""
        return [
            (
                s,
                STAGE_LABELS[s],
                units(getattr(self, s)),
                (getattr(self, s) / self.total) if self.total else 0.0,
            )
            for s in STAGES
        ]

    @property
    def sliced_words(self) -> str:
        """What the allocated units hold beyond whole GPUs: "38 shared GPUs hold 91 shares; 24 MIG instances"."""
        parts = []
        if self.shared_gpus:
            parts.append(
                f"{self.shared_gpus} shared GPU{'s' if self.shared_gpus != 1 else ''} "
                f"hold{'s' if self.shared_gpus == 1 else ''} {self.shares} share{'s' if self.shares != 1 else ''}"
            )
        if self.mig_gpus or self.mig_instances_free:
            parts.append(
                f"{self.mig_instances} MIG instance{'s' if self.mig_instances != 1 else ''} in use on "
                f"{self.mig_gpus} GPU{'s' if self.mig_gpus != 1 else ''}, {self.mig_instances_free} free"
            )
        return "; ".join(parts)


def units(x: float) -> float | int:
    """GPU units as the page writes them: 412.5, and 412 rather than 412.0."""
    x = round(float(x), 2)
    return int(x) if x.is_integer() else x
