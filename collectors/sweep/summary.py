"""What one sweep did: the :class:`SweepSummary` every sweep returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from collectors.observed import RecordResult

Progress = Callable[[str, int], None]  # (what, items so far)


@dataclass
class SweepSummary:
    """What one sweep did. ``errors`` holds "source: call: message" for every failed call."""

    cluster: str
    at: datetime
    kind: str = "inventory"  # inventory | telemetry | events
    seen: int = 0  # entities seen
    created: int = 0  # new entities
    opened: int = 0  # versions opened
    closed: int = 0  # versions closed by deletion
    changes: int = 0
    events_new: int = 0
    samples_written: int = 0
    errors: list[str] = field(default_factory=list)
    no_data: list[str] = field(default_factory=list)  # metrics Prometheus has no series for
    skipped_kinds: list[str] = field(
        default_factory=list
    )  # kinds not recorded because a source they need failed
    skipped: bool = False  # another sweep of this cluster held the lock
    duration_s: float = 0.0

    def add(self, result: RecordResult) -> None:
        self.seen += result.seen
        self.created += result.created
        self.opened += result.opened
        self.closed += result.closed
        self.changes += result.changes

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def rows_written(self) -> int:
        return self.created + self.opened + self.changes + self.events_new + self.samples_written

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["at"] = self.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        d["rows_written"] = self.rows_written
        return d

    def line(self) -> str:
        if self.skipped:
            return f"{self.cluster}: {self.kind} sweep skipped (another sweep of this cluster is running)"
        parts = [f"{self.cluster} {self.kind} at {self.at:%Y-%m-%dT%H:%M:%SZ}:"]
        if self.kind == "inventory":
            parts.append(
                f"{self.seen} entities seen, {self.created} new, {self.opened} versions opened, "
                f"{self.closed} closed, {self.changes} changes"
            )
        elif self.kind == "events":
            parts.append(f"{self.events_new} new events")
        else:
            parts.append(f"{self.samples_written} samples")
        parts.append(f"{len(self.errors)} errors in {self.duration_s:.1f} s")
        return " ".join(parts)
