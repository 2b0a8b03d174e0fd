"""A Kueue ClusterQueue's flavors and quota, and the room its cohort leaves it: the arithmetic of
``admission``.

A ClusterQueue lists its ResourceFlavors in order, each with a nominal quota; inside a cohort it may borrow
the unused quota of the others up to its borrowing limit and lends its own up to its lending limit (what it
does not lend is guaranteed to it). What a cohort has unused moves as its queues' workloads end and are
admitted: ``Quotas.admits`` reads it on a usage the caller keeps (the queue replayed forward keeps one on its
books, so a queue that borrows gets what another's ending job gives back, and no more). The state read
(``flavor_quotas``: ``[{flavor, nominal, borrowing_limit, lending_limit, node_labels}]``, ``cohort``,
``queueing_strategy``, ``preemption``, ``flavor_fungibility``) falls back to one flavor holding the queue's
whole ``quota_gpus`` and ``limit_gpus`` when the inventory records no flavors.

Pure: reads the ``DiagnosisInput`` only (no database, no simulator).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from incidents.diagnosis.allocation import pod_units
from incidents.diagnosis.types import DiagnosisInput, EntityState

EPS = 1e-9

Usage = dict[tuple[str, str], float]  # (queue, flavor) -> units held


@dataclass
class FlavorQuota:
    flavor: str
    nominal: float
    borrowing_limit: float | None  # None: no limit (0 outside a cohort)
    lending_limit: float | None  # None: it lends all of its unused quota
    node_labels: dict[str, str] = field(default_factory=dict)

    @property
    def guaranteed(self) -> float:
        """What the queue keeps for itself: its nominal quota less what it may lend."""
        return 0.0 if self.lending_limit is None else max(self.nominal - self.lending_limit, 0.0)

    @property
    def lendable(self) -> float:
        return self.nominal if self.lending_limit is None else min(self.lending_limit, self.nominal)


@dataclass
class ClusterQueue:
    name: str
    cohort: str
    flavors: list[FlavorQuota]
    strict_fifo: bool = False
    within: str = "Never"  # withinClusterQueue
    reclaim: str = "Never"  # reclaimWithinCohort
    borrow_within: str = "Never"  # borrowWithinCohort policy
    threshold: int | None = None  # borrowWithinCohort maxPriorityThreshold
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"

    def quota(self, flavor: str) -> FlavorQuota | None:
        return next((f for f in self.flavors if f.flavor == flavor), None)


def _num(value: Any, default: float | None = None) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def cluster_queues(di: DiagnosisInput) -> dict[str, ClusterQueue]:
    """Every ClusterQueue of the input, its flavors in order (module doc)."""
    out: dict[str, ClusterQueue] = {}
    for q in di.queues:
        st = q.state
        cohort = str(st.get("cohort") or st.get("department") or "")
        flavors = []
        for f in st.get("flavor_quotas") or []:
            flavors.append(
                FlavorQuota(
                    str(f.get("flavor") or "default"),
                    _num(f.get("nominal"), 0.0) or 0.0,
                    _num(f.get("borrowing_limit")) if cohort else 0.0,
                    _num(f.get("lending_limit")),
                    dict(f.get("node_labels") or {}),
                )
            )
        if not flavors:
            nominal = _num(st.get("quota_gpus"), 0.0) or 0.0
            limit = _num(st.get("limit_gpus"))
            borrow = None if limit is None else max(limit - nominal, 0.0)
            flavors = [FlavorQuota("default", nominal, borrow if cohort else 0.0, None)]
        pre = st.get("preemption") or {}
        fung = st.get("flavor_fungibility") or {}
        threshold = pre.get("max_priority_threshold")
        out[q.name] = ClusterQueue(
            q.name,
            cohort,
            flavors,
            strict_fifo=str(st.get("queueing_strategy") or "") == "StrictFIFO",
            within=str(pre.get("within_cluster_queue") or "Never"),
            reclaim=str(pre.get("reclaim_within_cohort") or "Never"),
            borrow_within=str(pre.get("borrow_within_cohort") or "Never"),
            threshold=None if threshold is None else int(threshold),
            when_can_borrow=str(fung.get("when_can_borrow") or "MayStopSearch"),
            when_can_preempt=str(fung.get("when_can_preempt") or "TryNextFlavor"),
        )
    return out


def selects(job: EntityState, f: FlavorQuota, keys: set[str]) -> bool:
    """Whether the job's node selector allows the flavor: a key some flavor labels must match; others are
    ignored."""
    for k, v in (job.get("node_selector") or {}).items():
        if k in keys and f.node_labels.get(k) != v:
            return False
    return True


class Quotas:
    """Every ClusterQueue of the input and the quota arithmetic over a usage."""

    def __init__(self, di: DiagnosisInput) -> None:
        self.cqs = cluster_queues(di)
        self.keys = {k for cq in self.cqs.values() for f in cq.flavors for k in f.node_labels}
        self.cohorts: dict[str, list[ClusterQueue]] = {}  # cohort -> its ClusterQueues, read once
        for cq in self.cqs.values():
            if cq.cohort:
                self.cohorts.setdefault(cq.cohort, []).append(cq)

    def members(self, cq: ClusterQueue) -> list[ClusterQueue]:
        return self.cohorts.get(cq.cohort, []) if cq.cohort else []

    def in_cohort(self, queue: str) -> bool:
        """Whether ``queue`` is a ClusterQueue of a cohort (what it may admit then moves with the others')."""
        cq = self.cqs.get(queue)
        return cq is not None and bool(cq.cohort)

    def flavor_of(self, job: EntityState, queue: str) -> str | None:
        """The flavor an admitted workload holds quota in: its ``flavor``, else the first its node selector
        allows (``admission.Cycle`` reads it so); None outside a known ClusterQueue."""
        cq = self.cqs.get(queue)
        if cq is None or not cq.flavors:
            return None
        return job.get("flavor") or next(
            (f.flavor for f in cq.flavors if selects(job, f, self.keys)), cq.flavors[0].flavor
        )

    def admits(self, job: EntityState, queue: str, units: float, usage: Usage) -> str | None:
        """The flavor Kueue would admit the waiting workload in on ``usage``: the first of its ClusterQueue's
        flavors its node selector allows with room for it, its own unused quota then what the cohort lends,
        within its borrowing limit (whenCanBorrow TryNextFlavor: a later flavor that does not borrow goes
        first); None when none has room (or the queue is unknown)."""
        cq = self.cqs.get(queue)
        if cq is None:
            return None
        borrowing: str | None = None
        for fq in cq.flavors:
            if not selects(job, fq, self.keys) or not self.fits(cq, fq, units, usage, borrow=True):
                continue
            if (
                cq.when_can_borrow == "MayStopSearch"
                or usage.get((cq.name, fq.flavor), 0.0) + units <= fq.nominal + EPS
            ):
                return fq.flavor
            borrowing = borrowing or fq.flavor
        return borrowing

    def admit(self, job: EntityState, queue: str, units: float, usage: Usage) -> str | None:
        """``admits`` for the pass at t: the flavor, "" when none admits, None for a queue that is no
        ClusterQueue (nothing of Kueue's quota to weigh)."""
        return None if queue not in self.cqs else self.admits(job, queue, units, usage) or ""

    def available(self, cq: ClusterQueue, fq: FlavorQuota, usage: Usage) -> float:
        """Units the queue may still take in the flavor: its own unused quota, then what the cohort lends, never
        past its borrowing limit."""
        used = usage.get((cq.name, fq.flavor), 0.0)
        if not cq.cohort:
            return fq.nominal - used
        pool = pool_used = 0.0
        for m in self.members(cq):
            mq = m.quota(fq.flavor)
            if mq is None:
                continue
            pool += mq.lendable
            pool_used += max(usage.get((m.name, fq.flavor), 0.0) - mq.guaranteed, 0.0)
        room = max(fq.guaranteed - used, 0.0) + pool - pool_used
        if fq.borrowing_limit is not None:
            room = min(room, fq.nominal + fq.borrowing_limit - used)
        return room

    def fits(
        self,
        cq: ClusterQueue,
        fq: FlavorQuota,
        units: float,
        usage: Usage,
        borrow: bool,
    ) -> bool:
        if units > self.available(cq, fq, usage) + EPS:
            return False
        return borrow or usage.get((cq.name, fq.flavor), 0.0) + units <= fq.nominal + EPS

    def usage_at(self, di: DiagnosisInput) -> Usage:
        """What each ClusterQueue holds per flavor at t: the units of its workloads' bound pods
        (``allocation.pod_units``), each workload in the flavor it holds quota in (``flavor_of``)."""
        out: Usage = {}
        for p in di.pods:
            if not p.get("node") or p.get("phase") not in ("Running", "Pending") or not p.get("job"):
                continue
            j = di.find("job", p.get("job"), p.namespace)
            queue = (j.get("queue") or j.get("project") or "") if j is not None else ""
            if j is None or queue not in self.cqs:
                continue
            flavor = self.flavor_of(j, queue)
            if flavor is not None:
                out[(queue, flavor)] = out.get((queue, flavor), 0.0) + pod_units(p)
        return out

    def borrows(self, queue: str, flavor: str, usage: Usage) -> bool:
        """Whether the queue holds more than its nominal quota of the flavor."""
        fq = self.cqs[queue].quota(flavor)
        return fq is not None and usage.get((queue, flavor), 0.0) > fq.nominal + EPS


def quotas_of(di: DiagnosisInput) -> Quotas:
    """The input's ClusterQueues (``Quotas``), read once per indexed block."""
    got: Quotas | None = di.memo("kueue_quotas", lambda: Quotas(di))
    return got if got is not None else Quotas(di)


def usage_of(di: DiagnosisInput) -> Usage:
    """What each ClusterQueue holds per flavor at t (``Quotas.usage_at``), read once per indexed block: a
    caller that charges starts to it works on a copy."""
    got: Usage | None = di.memo("kueue_usage_at", lambda: quotas_of(di).usage_at(di))
    return got if got is not None else quotas_of(di).usage_at(di)


def charge(usage: Usage, queue: str, flavor: str | None, units: float) -> None:
    """An admitted workload's units held in its flavor (nothing where no flavor admitted it)."""
    if flavor:
        usage[(queue, flavor)] = usage.get((queue, flavor), 0.0) + units


__all__ = [
    "EPS",
    "ClusterQueue",
    "FlavorQuota",
    "Quotas",
    "Usage",
    "charge",
    "cluster_queues",
    "quotas_of",
    "selects",
    "usage_of",
]
