"""Plain data the diagnosis checks read and return.

The checks never touch the database: ``incidents.diagnosis_run`` loads the
incident's observations and the inventory as of t into a
:class:`DiagnosisInput`, the checks turn it into :class:`Finding` objects,
and ``incidents.diagnosis_run`` persists them. Every fact a finding cites is either
an existing Observation (its id) or a :class:`Derived` fact computed from the
inventory (a fit table, the quota usage at t), which the loader stores as an
Observation with source "inventory" before citing it — so "no citation, no
hypothesis" holds for computed facts too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rcaweb.timestamps import format_t_or_none, timestamp_or_none

SUPPORTED = "supported"
REFUTED = "refuted"
UNVERIFIED = "unverified"
STATUSES = (SUPPORTED, REFUTED, UNVERIFIED)

# Confidence lost when a source the finding relies on failed to answer.
FAILED_SOURCE_FACTOR = 0.6


@dataclass(frozen=True)
class Ref:
    """Identity of an inventory object (docs/inventory.md)."""

    kind: str
    name: str
    namespace: str = ""

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return f"{self.kind} {self.label}"


@dataclass(frozen=True)
class Derived:
    """A fact computed from the inventory at t, stored as an Observation (source "inventory") when cited."""

    kind: str
    locator: str
    content: dict[str, Any]
    summary: str
    observed_at: datetime
    entity: Ref | None = None
    source: str = "inventory"

    @property
    def key(self) -> str:
        return f"{self.source}:{self.kind}:{self.locator}"


Cite = int | Derived  # an Observation id, or a computed fact


@dataclass
class EntityState:
    """One inventory object as of t: its normalized state (docs/inventory.md) and where it was observed."""

    kind: str
    name: str
    namespace: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    obs_id: int | None = None  # the incident Observation showing this state, when one exists

    @property
    def ref(self) -> Ref:
        return Ref(self.kind, self.name, self.namespace)

    @property
    def label(self) -> str:
        """``ref.label`` without building the Ref (read per job per step by the replay)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def get(self, key: str, default: Any = None) -> Any:
        return self.state.get(key, default)


@dataclass
class ChangeRec:
    """A field-level change on an inventory object (or an external change)."""

    time: datetime
    entity: Ref | None
    field: str
    old: Any = None
    new: Any = None
    actor: str = ""
    source: str = ""
    summary: str = ""
    link: str = ""
    obs_id: int | None = None


@dataclass
class EventRec:
    """A Kubernetes Event about an object."""

    time: datetime  # last_time
    reason: str
    message: str
    involved: Ref | None
    type: str = "Normal"
    count: int = 1
    component: str = ""
    first_time: datetime | None = None
    obs_id: int | None = None


@dataclass
class Series:
    """One DCGM metric of one GPU over the window."""

    metric: str
    uuid: str
    node: str
    points: list[tuple[datetime, float]]
    locator: str = ""
    obs_id: int | None = None
    pod: str = ""  # "ns/name" holding the GPU, when the labels say

    def values(self, start: datetime | None = None, end: datetime | None = None) -> list[float]:
        return [v for (ts, v) in self.points if (start is None or ts >= start) and (end is None or ts <= end)]


@dataclass
class LogRec:
    """Log lines of one container (``previous``: the last terminated instance)."""

    pod: Ref
    container: str
    lines: list[str]
    previous: bool = False
    obs_id: int | None = None


@dataclass
class SourceFailure:
    """A source that could not answer while evidence was collected (an Observation with ``error``)."""

    source: str
    locator: str
    error: str
    obs_id: int | None = None


@dataclass
class DiagnosisInput:
    """Everything the checks may read: inventory as of ``t``, history around it, and incident evidence."""

    t: datetime
    onset: datetime
    cluster: str
    scheduler: str = "kai"
    subjects: list[Ref] = field(default_factory=list)
    alertnames: list[str] = field(default_factory=list)
    nodes: list[EntityState] = field(default_factory=list)
    gpus: list[EntityState] = field(default_factory=list)
    pods: list[EntityState] = field(default_factory=list)
    jobs: list[EntityState] = field(default_factory=list)
    queues: list[EntityState] = field(default_factory=list)
    projects: list[EntityState] = field(default_factory=list)
    departments: list[EntityState] = field(default_factory=list)  # KAI parent queues / Kueue cohorts
    # Versions over the lookback window for the subjects and what they depend on, oldest first.
    history: dict[Ref, list[EntityState]] = field(default_factory=dict)
    # Nodes whose history is not read (an incident about placed objects reads only its own nodes' history): the
    # most GPUs each reported over the lookback, all the checks read of it (node_resources.node_nominal_gpus).
    peak_gpus: dict[str, int] = field(default_factory=dict)
    changes: list[ChangeRec] = field(default_factory=list)
    events: list[EventRec] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    logs: list[LogRec] = field(default_factory=list)
    failures: list[SourceFailure] = field(default_factory=list)
    alert_obs: list[int] = field(default_factory=list)  # Observation ids of the incident's alerts
    alerts: list[tuple[int, dict[str, Any], datetime | None]] = field(
        default_factory=list
    )  # (obs id, labels, startsAt)
    # Objects read by the keys the checks read of them only (another job than the incident's: its queue,
    # priority, request). Their citations are completed from the inventory when stored (incidents.diagnosis_run).
    partial: set[Ref] = field(default_factory=set)
    _index: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)
    # What the diagnoses of one batch share at this (cluster, t) while the inventory stands
    # (``incidents.batch_reads.shared_values``): set by the loader on the input it reads; a copy (``replace``: an
    # edited state) starts without it.
    batch: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    #
    # Lookups
    #
    def find(self, kind: str, name: str, namespace: str = "") -> EntityState | None:
        by_name = self._indexed(f"find:{kind}", lambda: _group(self._of(kind), lambda es: es.name))
        candidates = by_name.get(name, ()) if by_name is not None else self._of(kind)
        for es in candidates:
            if es.name == name and (not namespace or es.namespace == namespace):
                return es
        return None

    def _of(self, kind: str) -> list[EntityState]:
        return {
            "node": self.nodes,
            "gpu": self.gpus,
            "pod": self.pods,
            "job": self.jobs,
            "queue": self.queues,
            "project": self.projects,
            "department": self.departments,
        }.get(kind, [])

    def pods_of_job(self, job: EntityState) -> list[EntityState]:
        by_job = self._indexed(
            "pods_of_job", lambda: _group(self.pods, lambda p: (p.namespace, p.get("job")))
        )
        if by_job is not None:
            return list(by_job.get((job.namespace, job.name), ()))
        return [p for p in self.pods if p.namespace == job.namespace and p.get("job") == job.name]

    def pods_on_node(self, node: str) -> list[EntityState]:
        return [p for p in self.pods_bound_to(node) if p.get("phase") in ("Running", "Pending")]

    def pods_bound_to(self, node: str) -> list[EntityState]:
        """Every pod the inventory places on the node, whatever its phase."""
        by_node = self._indexed("pods_by_node", lambda: _group(self.pods, lambda p: p.get("node")))
        if by_node is not None:
            return list(by_node.get(node, ()))
        return [p for p in self.pods if p.get("node") == node]

    def gpus_of_node(self, node: str) -> list[EntityState]:
        by_node = self._indexed("gpus_by_node", lambda: _group(self.gpus, lambda g: g.get("node")))
        gpus = (
            by_node.get(node, ()) if by_node is not None else (g for g in self.gpus if g.get("node") == node)
        )
        return sorted(gpus, key=lambda g: g.get("index", 0) or 0)

    @contextmanager
    def indexed(self) -> Iterator[DiagnosisInput]:
        """Within this block lookups use indexes built once (a fleet: 1,000 nodes x 20,000 pods scanned per node
        took a minute). The input must not change inside the block; outside it every lookup scans, as before."""
        outer = self._index
        if outer is None:
            self._index = {}
        try:
            yield self
        finally:
            if outer is None:
                self._index = None

    def memo(self, name: str, build: Callable[[], Any]) -> Any:
        """``build()`` computed once per indexed block (None outside one: callers then compute as before)."""
        return self._indexed(name, build)

    def inherit(self, other: DiagnosisInput) -> None:
        """Take over ``other``'s lookups and memos that read only lists both inputs hold, the very same objects
        (``READS``): for an input written from another (``dataclasses.replace``: the victims gone, a job bound),
        most of whose lists are the other's. Both inputs must be indexed; a list does not change inside an
        indexed block, so what was built on it holds for any input holding it."""
        if self._index is None or other._index is None or other is self:
            return
        for name, got in other._index.items():
            reads = READS.get(name)
            if (
                reads
                and name not in self._index
                and all(getattr(self, f) is getattr(other, f) for f in reads)
            ):
                self._index[name] = got

    def _indexed(self, name: str, build: Callable[[], Any]) -> Any:
        if self._index is None:
            return None
        got = self._index.get(name)
        if got is None:
            got = self._index[name] = build()
        return got


# The lists a lookup or memo reads and nothing else (``DiagnosisInput.inherit``): the lookups' below; a module
# adds its memo's beside its memo.
READS: dict[str, tuple[str, ...]] = {
    "find:node": ("nodes",),
    "find:gpu": ("gpus",),
    "find:pod": ("pods",),
    "find:job": ("jobs",),
    "find:queue": ("queues",),
    "find:project": ("projects",),
    "find:department": ("departments",),
    "pods_of_job": ("pods",),
    "pods_by_node": ("pods",),
    "gpus_by_node": ("gpus",),
}


@dataclass
class Finding:
    """One hypothesis as a check proposes it; ``incidents.diagnosis_run`` persists it with its citations."""

    code: str
    statement: str
    status: str
    confidence: float
    supports: list[Cite] = field(default_factory=list)
    refutes: list[Cite] = field(default_factory=list)
    next_questions: list[str] = field(default_factory=list)
    why: str = ""  # for refuted/unverified: why
    subject: Ref | None = None
    sources: tuple[
        str, ...
    ] = ()  # the sources the finding relies on (k8s, prometheus, kai, kueue, log, change)
    since: datetime | None = None  # when the mechanism began, where known
    explains: tuple[str, ...] = ()  # codes this finding is a cause of (rank puts it before them)
    facts: dict[str, Any] = field(default_factory=dict)  # numbers and names the actions use
    # "cause": about the subject's causal neighbourhood; "elsewhere": a fault seen in the cluster that touches
    # nothing the subject needs (relevance.py decides; rank lists it as context, never as a cause).
    scope: str = "cause"

    @property
    def cites(self) -> list[Cite]:
        return [*self.supports, *self.refutes]

    @property
    def supported(self) -> bool:
        return self.status == SUPPORTED


@dataclass
class ActionDraft:
    """A proposed action with its computed impact, verification and rollback. rcaweb never executes it."""

    code: str  # the hypothesis it answers
    title: str
    command: str
    impact: str
    verify: str
    rollback: str
    subject: Ref | None = None


iso = format_t_or_none  # the diagnosis' short name for rcaweb.timestamps' one formatter


def hhmm(t: datetime | None) -> str:
    return t.strftime("%H:%M") if t else "?"


def gpus_of(state: dict[str, Any], key: str = "nvidia.com/gpu") -> int:
    """A GPU count from a capacity/allocatable map ('8', 8, None -> 8, 8, 0)."""
    try:
        return int(float(state.get(key) or 0))
    except (TypeError, ValueError):
        return 0


def parse_ts(raw: Any) -> datetime | None:
    """An ISO 8601 time from a state ('2026-11-29T03:12:00Z'), or None (``rcaweb.timestamps``)."""
    return timestamp_or_none(raw)


def _group(items: list[EntityState], key: Callable[[EntityState], Any]) -> dict[Any, list[EntityState]]:
    """Items by key, each group in list order (so an indexed lookup returns what a scan would, in order)."""
    out: dict[Any, list[EntityState]] = {}
    for it in items:
        out.setdefault(key(it), []).append(it)
    return out
