"""What a watch session did: events received, applies, relists, GPU polls and the summaries of what they wrote."""

from __future__ import annotations

from dataclasses import dataclass, field

from collectors.sweep.summary import SweepSummary


@dataclass
class WatchStats:
    events: int = 0  # object events received
    kube_events: int = 0  # Kubernetes Events received by the events watch (stored, not applied)
    kube_events_new: int = 0  # of those, (uid, count) pairs stored for the first time
    bookmarks: int = 0
    gone: int = 0  # 410s (each relisted one listing)
    errors: list[str] = field(default_factory=list)
    applies: int = 0  # times events were recorded
    relists: int = 0
    gpu_polls: int = 0
    gpu_polls_unchanged: int = 0  # polls whose answers equalled the previous poll's: nothing mapped
    gpu_poll_cpu_s: float = 0.0  # CPU the polls took on the session's thread (asking, decoding, mapping)
    summaries: list[SweepSummary] = field(default_factory=list)  # what each apply, relist and poll wrote

    @property
    def rows_written(self) -> int:
        return sum(s.rows_written for s in self.summaries)
