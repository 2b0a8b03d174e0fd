"""Kueue admission with ClusterQueues written out (the scenario's ``kueue`` section).

Follows Kueue's flavor assigner and scheduler for one resource, ``nvidia.com/gpu`` (kubernetes-sigs/kueue,
pkg/scheduler/flavorassigner, pkg/scheduler); quota and preemption are in ``kueue_quota``:

- flavors are tried in the ClusterQueue's order; a flavor whose labels the job's node selector contradicts is
  skipped; the search stops at the first flavor that fits without borrowing, fits while borrowing (whenCanBorrow
  MayStopSearch) or can preempt (whenCanPreempt MayStopSearch); otherwise the best one is kept: fit, then
  reclaim, then preempt, less borrowing first. A workload that fits nowhere waits with Kueue's message
  ``couldn't assign flavors to pod set main: <every flavor's reason, comma-separated>``;
- each pass offers every ClusterQueue's head (StrictFIFO: only its oldest; BestEffortFIFO: the next one that was
  not yet tried in this pass), admits the heads that do not borrow first, then by priority and age; a victim is
  requeued in the next pass, as its eviction takes time;
- a head that fits is admitted in the flavor nominated at the start of its cycle; when an earlier entry of the
  cycle took that quota it is skipped ("Workload no longer fits after processing another workload") and tried
  again in the next pass, as Kueue requeues it for its next cycle.

Without the section the engine's single-cohort, single-flavor model (scheduler._admit_kueue) is used.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .kueue_quota import (
    RESOURCE,
    Ledger,
    assigned_flavor,
    ledger_of,
    preemption_targets,
    priority,
    request,
    set_flavor,
)
from .quota import preempt_kueue

if TYPE_CHECKING:
    from ..scenario.kueue import ClusterQueueSpec, KueueSpec
    from ..state import SimJob
    from .world import World

__all__ = ["admit_pass", "assign", "assigned_flavor", "ledger_of", "priority"]

NOFIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)  # Kueue's preemptionMode, worst to best
NO_LONGER_FITS = "Workload no longer fits after processing another workload"
_SELECTORS: weakref.WeakKeyDictionary[World, dict[str, dict[str, str]]] = weakref.WeakKeyDictionary()

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
    selectors = _SELECTORS.get(world)
    if selectors is None:
        selectors = _SELECTORS[world] = {j.name: j.node_selector for j in world.scenario.jobs}
    return dict(selectors.get(job.name, job.node_selector))


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
    r = request(job)
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
            ledger.add(t.project, f, -request(t))
        after = 1 if cq.cohort is not None and ledger.borrowing_with(job.project, f, r) else 0
        for t in targets:
            ledger.add(t.project, f, request(t))
        mode = PREEMPT if any(t.project == job.project for t in targets) else RECLAIM
        return mode, after, why, targets
    return NOFIT, borrow, why, []


#
# The admission pass
#


def admit_pass(
    world: World,
    admit: Callable[[SimJob], None],
    wait: Callable[[SimJob, str], None],
) -> None:
    """Admission cycles until every waiting workload was tried once in this pass.

    Each cycle admits or marks tried at least one workload (victims are marked too: they are requeued once
    their eviction is done, in the next pass), so the cycles end."""
    spec = world.scenario.kueue
    assert spec is not None
    ledger = ledger_of(world, spec)
    queues = _queues(world, spec)
    tried: set[str] = set()
    last: dict[str, str] = {}
    while heads := _heads(spec, queues, tried):
        entries = [(job, assign(world, ledger, job)) for job in heads]
        entries.sort(
            key=lambda e: (e[1].mode == FIT and e[1].borrow > 0, -priority(world, e[0]), e[0].submit_at)
        )
        for job, nominated in entries:
            if nominated.mode == FIT and nominated.flavor:
                # Kueue admits in the flavors nominated at the cycle's start; an entry that no longer fits
                # there once an earlier one took the quota is skipped until the next cycle.
                if request(job) <= ledger.available(job.project, nominated.flavor):
                    _admit(world, ledger, job, nominated.flavor, admit)
                    last.pop(job.name, None)
                else:
                    tried.add(job.name)
                    last[job.name] = NO_LONGER_FITS
                continue
            choice = assign(world, ledger, job)  # again: an earlier entry may have taken the quota
            if choice.mode in (PREEMPT, RECLAIM) and choice.flavor:
                _evict(world, ledger, job, choice)
                tried.update(t.name for t in choice.targets)
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


def _queues(world: World, spec: KueueSpec) -> dict[str, list[SimJob]]:
    """Each ClusterQueue's waiting workloads in Kueue's order (priority, then age), reversed."""
    out: dict[str, list[SimJob]] = {q.project: [] for q in spec.cluster_queues}
    for j in world.jobs.values():
        if j.state == "Pending" and j.suspended:
            out[j.project].append(j)
    for jobs in out.values():  # last first: the head is popped off the end
        jobs.sort(
            key=lambda j: (-priority(world, j), j.submit_at, world.creation_order.get(j.name, 0)),
            reverse=True,
        )
    return out


def _heads(spec: KueueSpec, queues: dict[str, list[SimJob]], tried: set[str]) -> list[SimJob]:
    """The next workload of each ClusterQueue; StrictFIFO: only its first, which blocks the rest.

    Admitted and tried workloads only accumulate during a pass, so each queue is read past them once."""
    heads = []
    for cq in spec.cluster_queues:
        queue = queues[cq.project]
        strict = cq.queueing_strategy == "StrictFIFO"
        while queue and (queue[-1].admitted or (not strict and queue[-1].name in tried)):
            queue.pop()
        if queue and queue[-1].name not in tried:
            heads.append(queue[-1])
    return heads


def _admit(world: World, ledger: Ledger, job: SimJob, flavor: str, admit: Callable[[SimJob], None]) -> None:
    spec = ledger.spec
    labels = next(f.node_labels for f in spec.flavors if f.name == flavor)
    ledger.hold(job, flavor)
    set_flavor(world, job, flavor)
    job.node_selector = {**_own_selector(world, job), **labels}  # Kueue injects the flavor's node labels
    admit(job)


def _evict(world: World, ledger: Ledger, job: SimJob, choice: Choice) -> None:
    assert choice.flavor is not None
    used = dict.fromkeys(world.projects, 0.0)
    for (cq, _f), n in ledger.usage.items():
        used[cq] += n
    victims = [("preempt" if t.project == job.project else "reclaim", t) for t in choice.targets]
    for t in choice.targets:
        ledger.release(t, choice.flavor)
    preempt_kueue(world, job, victims, used)
    for t in choice.targets:
        set_flavor(world, t, None)
        t.node_selector = _own_selector(world, t)
        world.touch(t)
