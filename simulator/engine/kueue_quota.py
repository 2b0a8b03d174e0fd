"""Kueue's quota and classical preemption for ClusterQueues written out (the scenario's ``kueue`` section).

For one resource, ``nvidia.com/gpu`` (kubernetes-sigs/kueue, pkg/cache/scheduler resource nodes and
pkg/scheduler/preemption): a ClusterQueue's flavor has a nominal quota and optional borrowing and lending
limits; a cohort (one level, no Cohort objects) pools what its members lend (nominal − the part kept back by a
lending limit) and counts their usage beyond what they keep. ``Ledger.available`` and ``Ledger.potential`` are
Kueue's ``available`` and ``potentialAvailable``. Preemption candidates come from the ClusterQueue itself
(withinClusterQueue) and from borrowing ClusterQueues of the cohort (reclaimWithinCohort, borrowWithinCohort),
ordered other queues first, lower priority, most recently admitted; they are removed one by one until the
workload fits, then the ones not needed are put back, last first.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..scenario.kueue import ClusterQueueSpec, FlavorQuotaSpec, KueueSpec
    from ..state import SimJob
    from .world import World

RESOURCE = "nvidia.com/gpu"

_FLAVORS: weakref.WeakKeyDictionary[World, dict[str, str]] = weakref.WeakKeyDictionary()


def assigned_flavor(world: World, job: SimJob) -> str | None:
    """The flavor an admitted workload holds its quota in (status.admission.podSetAssignments[0].flavors)."""
    return _FLAVORS.get(world, {}).get(job.name) if job.admitted else None


def priority(world: World, job: SimJob) -> int:
    spec = world.scenario.kueue
    return spec.priorities.get(job.name, 0) if spec else 0


#
# Quota (Kueue's resource nodes, one level)
#


@dataclass
class Ledger:
    spec: KueueSpec
    usage: dict[tuple[str, str], int] = field(default_factory=dict)  # (ClusterQueue, flavor) -> GPUs admitted
    holders: dict[tuple[str, str], list[SimJob]] = field(
        default_factory=dict
    )  # (ClusterQueue, flavor) -> jobs

    def __post_init__(self) -> None:
        # looked up for every flavor of every workload tried: kept as dicts, not searched in the spec
        self._cqs = {q.project: q for q in self.spec.cluster_queues}
        self._quotas = {(q.project, f.flavor): f for q in self.spec.cluster_queues for f in q.flavors}
        self._members = {
            q.project: tuple(m.project for m in self.spec.cluster_queues if q.cohort and m.cohort == q.cohort)
            for q in self.spec.cluster_queues
        }
        self._kept = {
            k: max(0, f.nominal - f.lending_limit) if f.lending_limit is not None else 0
            for k, f in self._quotas.items()
        }
        # a cohort's lendable pool per flavor (Kueue's SubtreeQuota), and what its members hold of it (its Usage)
        self._pool: dict[tuple[str, str], int] = {}
        for (cq, flavor), f in self._quotas.items():
            cohort = self._cqs[cq].cohort
            if cohort is not None:
                key = (cohort, flavor)
                self._pool[key] = self._pool.get(key, 0) + f.nominal - self._kept[(cq, flavor)]
        self._pooled_use: dict[tuple[str, str], int] = {}

    def cq(self, name: str) -> ClusterQueueSpec:
        return self._cqs[name]

    def quota(self, cq: str, flavor: str) -> FlavorQuotaSpec | None:
        return self._quotas.get((cq, flavor))

    def used(self, cq: str, flavor: str) -> int:
        return self.usage.get((cq, flavor), 0)

    def members(self, cq: str) -> tuple[str, ...]:
        """The ClusterQueues of its cohort, itself included; none without a cohort."""
        return self._members[cq]

    def kept(self, cq: str, flavor: str) -> int:
        """What the ClusterQueue does not lend (Kueue's localQuota): nominal − lendingLimit, else 0."""
        return self._kept.get((cq, flavor), 0)

    def _cohort_available(self, cq: str, flavor: str) -> int:
        key = (self._cqs[cq].cohort or "", flavor)
        return self._pool.get(key, 0) - self._pooled_use.get(key, 0)

    def available(self, cq: str, flavor: str) -> int:
        q = self.quota(cq, flavor)
        if q is None:
            return 0
        if self.cq(cq).cohort is None:
            return q.nominal - self.used(cq, flavor)
        kept, used = self.kept(cq, flavor), self.used(cq, flavor)
        parent = self._cohort_available(cq, flavor)
        if q.borrowing_limit is not None:
            parent = min(q.nominal - kept - max(0, used - kept) + q.borrowing_limit, parent)
        return max(0, kept - used) + parent

    def potential(self, cq: str, flavor: str) -> int:
        q = self.quota(cq, flavor)
        if q is None:
            return 0
        if self.cq(cq).cohort is None:
            return q.nominal
        avail = self.kept(cq, flavor) + self._pool[(self._cqs[cq].cohort or "", flavor)]
        return min(q.nominal + q.borrowing_limit, avail) if q.borrowing_limit is not None else avail

    def borrowing_with(self, cq: str, flavor: str, r: int) -> bool:
        q = self.quota(cq, flavor)
        return q is not None and self.used(cq, flavor) + r > q.nominal

    def add(self, cq: str, flavor: str, r: int) -> None:
        before = self.used(cq, flavor)
        self.usage[(cq, flavor)] = before + r
        cohort = self._cqs[cq].cohort
        if cohort is not None:  # what it holds beyond what it keeps is held in the cohort's pool
            kept = self.kept(cq, flavor)
            key = (cohort, flavor)
            delta = max(0, before + r - kept) - max(0, before - kept)
            self._pooled_use[key] = self._pooled_use.get(key, 0) + delta

    def hold(self, job: SimJob, flavor: str) -> None:
        """An admitted workload: its quota and its place among the flavor's holders (preemption candidates)."""
        self.add(job.project, flavor, request(job))
        self.holders.setdefault((job.project, flavor), []).append(job)

    def release(self, job: SimJob, flavor: str) -> None:
        self.add(job.project, flavor, -request(job))
        self.holders[(job.project, flavor)].remove(job)


def ledger_of(world: World, spec: KueueSpec) -> Ledger:
    ledger = Ledger(spec)
    for job in world.jobs.values():
        flavor = assigned_flavor(world, job)
        if flavor and job.state in ("Pending", "Running"):
            ledger.hold(job, flavor)
    return ledger


def request(job: SimJob) -> int:
    return int(job.pods * job.gpus_per_pod)


#
# Preemption (Kueue's classical preemption)
#

HIERARCHY, WITHOUT_BORROWING, WHILE_BORROWING, WITHIN_CQ = range(4)


def _satisfies(world: World, policy: str, preemptor: SimJob, cand: SimJob) -> bool:
    p, c = priority(world, preemptor), priority(world, cand)
    if policy == "LowerPriority":
        return c < p
    if policy == "LowerOrNewerEqualPriority":
        return c < p or (c == p and preemptor.submit_at < cand.submit_at)
    return policy == "Any"


def _candidates(world: World, ledger: Ledger, job: SimJob, f: str, r: int) -> list[tuple[SimJob, int]]:
    cq = ledger.cq(job.project)
    members = [m for m in ledger.members(job.project) if m != job.project] or []
    admitted = list(ledger.holders.get((job.project, f), ()))
    for m in members:
        mq = ledger.quota(m, f)
        if mq is not None and ledger.used(m, f) > mq.nominal:  # only borrowing ClusterQueues give candidates
            admitted += ledger.holders.get((m, f), ())

    def order(c: tuple[SimJob, int]) -> tuple:
        j = c[0]
        at = j.admitted_at.timestamp() if j.admitted_at else 0.0
        return (j.project == job.project, priority(world, j), -at, -world.creation_order.get(j.name, 0))

    same: list[tuple[SimJob, int]] = []
    if cq.within_cluster_queue != "Never":
        same = [
            (j, WITHIN_CQ)
            for j in admitted
            if j.project == job.project and _satisfies(world, cq.within_cluster_queue, job, j)
        ]
    hier: list[tuple[SimJob, int]] = []
    prio: list[tuple[SimJob, int]] = []
    if cq.cohort is not None and cq.reclaim_within_cohort != "Never":
        advantage = not ledger.borrowing_with(job.project, f, r)
        for j in admitted:
            other = ledger.quota(j.project, f)
            if j.project == job.project or other is None:
                continue
            if ledger.used(j.project, f) <= other.nominal or not _satisfies(
                world, cq.reclaim_within_cohort, job, j
            ):
                continue
            if advantage:
                hier.append((j, HIERARCHY))
                continue
            cp, ip = priority(world, j), priority(world, job)
            above = cp >= ip or (cq.max_priority_threshold is not None and cp > cq.max_priority_threshold)
            forbidden = cq.borrow_within_cohort == "Never"
            prio.append((j, WITHOUT_BORROWING if forbidden or above else WHILE_BORROWING))
    return sorted(hier, key=order) + sorted(prio, key=order) + sorted(same, key=order)


def preemption_targets(world: World, ledger: Ledger, job: SimJob, f: str, r: int) -> list[SimJob]:
    cq = ledger.cq(job.project)
    cands = _candidates(world, ledger, job, f, r)
    q = ledger.quota(job.project, f)
    assert q is not None
    forbidden = cq.borrow_within_cohort == "Never"
    others = [c for c in cands if c[0].project != job.project]
    under = q.nominal > ledger.used(job.project, f)
    if not others or (forbidden and not under):
        attempts = [True]
    elif forbidden and not any(v == HIERARCHY for _, v in others):
        attempts = [False, True]
    else:
        attempts = [True, False]

    def fits(borrowing: bool) -> bool:
        if not borrowing and ledger.borrowing_with(job.project, f, r):
            return False
        return r <= ledger.available(job.project, f)

    for borrowing in attempts:
        targets: list[SimJob] = []
        for cand, variant in cands:
            if cand.project != job.project:
                if borrowing and variant == WITHOUT_BORROWING:
                    continue
                vq = ledger.quota(cand.project, f)
                if vq is None or ledger.used(cand.project, f) <= vq.nominal:
                    continue
            ledger.add(cand.project, f, -request(cand))
            targets.append(cand)
            if fits(borrowing):
                targets = _fill_back(ledger, targets, f, fits, borrowing)
                for t in targets:
                    ledger.add(t.project, f, request(t))
                return targets
        for t in targets:
            ledger.add(t.project, f, request(t))
    return []


def _fill_back(
    ledger: Ledger, targets: list[SimJob], f: str, fits: Callable[[bool], bool], borrowing: bool
) -> list[SimJob]:
    """Put back, last first, the targets the workload fits without (Kueue's fillBackWorkloads)."""
    for i in range(len(targets) - 2, -1, -1):
        ledger.add(targets[i].project, f, request(targets[i]))
        if fits(borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            ledger.add(targets[i].project, f, -request(targets[i]))
    return targets


def set_flavor(world: World, job: SimJob, flavor: str | None) -> None:
    """Record (or, with None, forget) the flavor a workload holds its quota in."""
    flavors = _FLAVORS.setdefault(world, {})
    if flavor is None:
        flavors.pop(job.name, None)
    else:
        flavors[job.name] = flavor
