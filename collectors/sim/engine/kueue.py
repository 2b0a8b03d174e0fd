"""Kueue admission with ClusterQueues written out (the scenario's ``kueue`` section).

Follows Kueue's own mechanisms for one resource, ``nvidia.com/gpu`` (kubernetes-sigs/kueue, pkg/cache/scheduler
resource nodes, pkg/scheduler/flavorassigner, pkg/scheduler/preemption classical mode):

- quota: a ClusterQueue's flavor has a nominal quota and optional borrowing and lending limits; a cohort (one
  level, no Cohort objects) pools what its members lend (nominal − the part kept back by a lending limit) and
  counts their usage beyond what they keep. ``available`` and ``potential`` are Kueue's ``available`` and
  ``potentialAvailable``;
- flavors are tried in the ClusterQueue's order; a flavor whose labels the job's node selector contradicts is
  skipped; the search stops at the first flavor that fits without borrowing, fits while borrowing (whenCanBorrow
  MayStopSearch) or can preempt (whenCanPreempt MayStopSearch); otherwise the best one is kept: fit, then
  reclaim, then preempt, less borrowing first. A workload that fits nowhere waits with Kueue's message
  ``couldn't assign flavors to pod set main: <every flavor's reason, comma-separated>``;
- preemption: candidates of the ClusterQueue itself (withinClusterQueue) and of borrowing ClusterQueues of the
  cohort (reclaimWithinCohort, borrowWithinCohort), ordered other queues first, lower priority, most recently
  admitted; removed one by one until the workload fits, then the ones not needed are put back, last first.
- each pass offers every ClusterQueue's head (StrictFIFO: only its oldest; BestEffortFIFO: the next one that was
  not yet tried in this pass), admits the heads that do not borrow first, then by priority and age.

Without the section the engine's single-cohort, single-flavor model (scheduler._admit_kueue) is used.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .quota import preempt_kueue

if TYPE_CHECKING:
    from ..scenario.kueue import ClusterQueueSpec, FlavorQuotaSpec, KueueSpec
    from ..state import SimJob
    from .world import World

RESOURCE = "nvidia.com/gpu"
NOFIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)  # Kueue's preemptionMode, worst to best
MAX_CYCLES = 64  # admission cycles per pass; each admits or evicts something, so this only bounds a ping-pong

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

    def cq(self, name: str) -> ClusterQueueSpec:
        return self.spec.queue(name)

    def quota(self, cq: str, flavor: str) -> FlavorQuotaSpec | None:
        return next((q for q in self.cq(cq).flavors if q.flavor == flavor), None)

    def used(self, cq: str, flavor: str) -> int:
        return self.usage.get((cq, flavor), 0)

    def members(self, cq: str) -> list[str]:
        cohort = self.cq(cq).cohort
        return [q.project for q in self.spec.cluster_queues if cohort is not None and q.cohort == cohort]

    def _kept(self, cq: str, flavor: str) -> int:
        """What the ClusterQueue does not lend (Kueue's localQuota): nominal − lendingLimit, else 0."""
        q = self.quota(cq, flavor)
        return max(0, q.nominal - q.lending_limit) if q and q.lending_limit is not None else 0

    def _cohort_available(self, cq: str, flavor: str) -> int:
        total = 0
        for m in self.members(cq):
            q = self.quota(m, flavor)
            if q is not None:
                kept = self._kept(m, flavor)
                total += q.nominal - kept - max(0, self.used(m, flavor) - kept)
        return total

    def available(self, cq: str, flavor: str) -> int:
        q = self.quota(cq, flavor)
        if q is None:
            return 0
        if self.cq(cq).cohort is None:
            return q.nominal - self.used(cq, flavor)
        kept, used = self._kept(cq, flavor), self.used(cq, flavor)
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
        pooled = 0
        for m in self.members(cq):
            mq = self.quota(m, flavor)
            if mq is not None:
                pooled += mq.nominal - self._kept(m, flavor)
        avail = self._kept(cq, flavor) + pooled
        return min(q.nominal + q.borrowing_limit, avail) if q.borrowing_limit is not None else avail

    def borrowing_with(self, cq: str, flavor: str, r: int) -> bool:
        q = self.quota(cq, flavor)
        return q is not None and self.used(cq, flavor) + r > q.nominal

    def add(self, cq: str, flavor: str, r: int) -> None:
        self.usage[(cq, flavor)] = self.used(cq, flavor) + r


def ledger_of(world: World, spec: KueueSpec) -> Ledger:
    ledger = Ledger(spec)
    for job in world.jobs.values():
        flavor = assigned_flavor(world, job)
        if flavor and job.state in ("Pending", "Running"):
            ledger.add(job.project, flavor, _request(job))
    return ledger


def _request(job: SimJob) -> int:
    return int(job.pods * job.gpus_per_pod)


#
# Flavor assignment
#


@dataclass
class Choice:
    flavor: str | None
    mode: int
    borrow: int
    reasons: list[str]
    targets: list[SimJob]


def _matches(world: World, job: SimJob, flavor: str) -> bool:
    """Kueue's flavorSelector: the job's node selector, on the flavor's own label keys only."""
    spec = world.scenario.kueue
    assert spec is not None
    labels = next(f.node_labels for f in spec.flavors if f.name == flavor)
    selector = _own_selector(world, job)
    return all(selector[k] == v for k, v in labels.items() if k in selector)


def _own_selector(world: World, job: SimJob) -> dict[str, str]:
    """The job's node selector as submitted, without what admission added (the flavor's labels)."""
    spec = next((j for j in world.scenario.jobs if j.name == job.name), None)
    return dict(spec.node_selector) if spec else dict(job.node_selector)


def _preferred(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Kueue's isPreferred with the default BorrowingOverPreemption preference: (mode, borrow)."""
    if a[0] == NOFIT:
        return False
    if b[0] == NOFIT:
        return True
    if (a[0] == NO_CANDIDATES) != (b[0] == NO_CANDIDATES):
        return a[0] != NO_CANDIDATES
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def _try_next(mode: tuple[int, int], cq: ClusterQueueSpec) -> bool:
    if mode[0] in (NOFIT, NO_CANDIDATES):
        return True
    if mode[0] in (PREEMPT, RECLAIM) and cq.when_can_preempt == "TryNextFlavor":
        return True
    return mode[1] > 0 and cq.when_can_borrow == "TryNextFlavor"


def assign(world: World, ledger: Ledger, job: SimJob) -> Choice:
    cq = ledger.cq(job.project)
    r = _request(job)
    best = Choice(None, NOFIT, 1 << 30, [], [])
    reasons: list[str] = []
    for fq in cq.flavors:
        f = fq.flavor
        if not _matches(world, job, f):
            reasons.append(f"flavor {f} doesn't match node affinity")
            continue
        mode, borrow, reason, targets = _fits(world, ledger, job, f, r)
        if reason:
            reasons.append(reason)
        if not _try_next((mode, borrow), cq):
            best = Choice(f, mode, borrow, reasons, targets)
            break
        if _preferred((mode, borrow), (best.mode, best.borrow)):
            best = Choice(f, mode, borrow, reasons, targets)
    best.reasons = reasons
    return best


def _fits(
    world: World, ledger: Ledger, job: SimJob, f: str, r: int
) -> tuple[int, int, str | None, list[SimJob]]:
    """Kueue's fitsResourceQuota: (mode, borrowing level, the reason it does not fit, preemption targets)."""
    cq = ledger.cq(job.project)
    q = ledger.quota(job.project, f)
    assert q is not None
    avail, cap = ledger.available(job.project, f), ledger.potential(job.project, f)
    if r > cap:
        why = (
            f"insufficient quota for {RESOURCE} in flavor {f}, previously considered podsets requests (0) + "
            f"current podset request ({r}) > maximum capacity ({cap})"
        )
        return NOFIT, 0, why, []
    borrows = cq.cohort is not None and ledger.borrowing_with(job.project, f, r)
    borrow = 1 if borrows else 0
    if r <= avail:
        return FIT, borrow, None, []
    why = f"insufficient unused quota for {RESOURCE} in flavor {f}, {r - avail} more needed"
    may_reclaim = cq.cohort is not None and not borrows
    if q.nominal >= r or may_reclaim or cq.borrow_within_cohort != "Never":
        targets = preemption_targets(world, ledger, job, f, r)
        if not targets:
            return NO_CANDIDATES, borrow, why, []
        for t in targets:
            ledger.add(t.project, f, -_request(t))
        after = 1 if cq.cohort is not None and ledger.borrowing_with(job.project, f, r) else 0
        for t in targets:
            ledger.add(t.project, f, _request(t))
        mode = PREEMPT if any(t.project == job.project for t in targets) else RECLAIM
        return mode, after, why, targets
    return NOFIT, borrow, why, []


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
    admitted = [
        j for j in world.jobs.values() if assigned_flavor(world, j) == f and j.state in ("Pending", "Running")
    ]

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
            if j.project == job.project or j.project not in ledger.members(job.project) or other is None:
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
            ledger.add(cand.project, f, -_request(cand))
            targets.append(cand)
            if fits(borrowing):
                targets = _fill_back(ledger, targets, f, fits, borrowing)
                for t in targets:
                    ledger.add(t.project, f, _request(t))
                return targets
        for t in targets:
            ledger.add(t.project, f, _request(t))
    return []


def _fill_back(
    ledger: Ledger, targets: list[SimJob], f: str, fits: Callable[[bool], bool], borrowing: bool
) -> list[SimJob]:
    """Put back, last first, the targets the workload fits without (Kueue's fillBackWorkloads)."""
    for i in range(len(targets) - 2, -1, -1):
        ledger.add(targets[i].project, f, _request(targets[i]))
        if fits(borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            ledger.add(targets[i].project, f, -_request(targets[i]))
    return targets


#
# The admission pass
#


def admit_pass(
    world: World,
    admit: Callable[[SimJob], None],
    wait: Callable[[SimJob, str], None],
) -> None:
    """Admission cycles until every waiting workload was tried once in this pass."""
    spec = world.scenario.kueue
    assert spec is not None
    ledger = ledger_of(world, spec)
    tried: set[str] = set()
    last: dict[str, str] = {}
    for _ in range(MAX_CYCLES):
        heads = _heads(world, spec, tried)
        if not heads:
            break
        entries = [(job, assign(world, ledger, job)) for job in heads]
        entries.sort(
            key=lambda e: (e[1].mode == FIT and e[1].borrow > 0, -priority(world, e[0]), e[0].submit_at)
        )
        for job, _first in entries:
            choice = assign(
                world, ledger, job
            )  # again: an earlier entry of this cycle may have taken the quota
            if choice.mode in (PREEMPT, RECLAIM) and choice.flavor:
                _evict(world, ledger, job, choice)
                tried.update(
                    t.name for t in choice.targets
                )  # requeued once their eviction is done: next pass
                choice = assign(world, ledger, job)
            if choice.mode == FIT and choice.flavor:
                _admit(world, ledger, job, choice.flavor, admit)
                last.pop(job.name, None)
            else:
                tried.add(job.name)
                last[job.name] = "couldn't assign flavors to pod set main: " + ", ".join(choice.reasons)
    for name, message in last.items():
        job = world.jobs[name]
        if not job.admitted:
            wait(job, message)


def _heads(world: World, spec: KueueSpec, tried: set[str]) -> list[SimJob]:
    heads = []
    for cq in spec.cluster_queues:
        queue = sorted(
            (
                j
                for j in world.jobs.values()
                if j.project == cq.project and j.state == "Pending" and j.suspended
            ),
            key=lambda j: (-priority(world, j), j.submit_at, world.creation_order.get(j.name, 0)),
        )
        if cq.queueing_strategy == "StrictFIFO":
            queue = queue[:1]
        head = next((j for j in queue if j.name not in tried), None)
        if head is not None:
            heads.append(head)
    return heads


def _admit(world: World, ledger: Ledger, job: SimJob, flavor: str, admit: Callable[[SimJob], None]) -> None:
    spec = ledger.spec
    labels = next(f.node_labels for f in spec.flavors if f.name == flavor)
    ledger.add(job.project, flavor, _request(job))
    _FLAVORS.setdefault(world, {})[job.name] = flavor
    job.node_selector = {**_own_selector(world, job), **labels}  # Kueue injects the flavor's node labels
    admit(job)


def _evict(world: World, ledger: Ledger, job: SimJob, choice: Choice) -> None:
    assert choice.flavor is not None
    used = dict.fromkeys(world.projects, 0.0)
    for (cq, _f), n in ledger.usage.items():
        used[cq] += n
    victims = [("preempt" if t.project == job.project else "reclaim", t) for t in choice.targets]
    for t in choice.targets:
        ledger.add(t.project, choice.flavor, -_request(t))
    preempt_kueue(world, job, victims, used)
    for t in choice.targets:
        _FLAVORS.get(world, {}).pop(t.name, None)
        t.node_selector = _own_selector(world, t)
        world.touch(t)
