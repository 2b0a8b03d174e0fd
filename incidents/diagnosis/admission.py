"""Kueue's admission cycle as the product reads it: which waiting workload gets quota, in which flavor, and
whom it preempts.

Kueue admits by quota, not by node room: a ClusterQueue lists its ResourceFlavors in order, each with a
nominal quota, and may borrow the unused quota of its cohort (up to its borrowing limit) or lend its own (up
to its lending limit). One scheduling cycle (:func:`cycle`):

- **Heads.** Each ClusterQueue offers its next workload (higher priority, then older). StrictFIFO offers the
  head only; BestEffortFIFO passes over a head that cannot be admitted to the next one.
- **Flavors.** A workload's flavors are tried in order (a node selector rules out a flavor whose label it
  contradicts; keys no flavor has are ignored): it fits (within nominal, or borrowing), it fits by preempting
  (reclaiming from borrowers of the cohort is better than preempting in its own queue), or it does not fit.
  ``flavorFungibility``: whenCanBorrow MayStopSearch takes the first flavor that fits even borrowing,
  TryNextFlavor looks on for one that does not borrow; whenCanPreempt likewise for preemption. Otherwise the
  best mode wins, the earlier flavor on a tie.
- **Order.** The heads are served non-borrowing first, then higher priority, then older. A head whose
  nominated flavor an earlier head of the cycle took no longer fits and waits for the next cycle.
- **Preemption** (``preemption``): withinClusterQueue (LowerPriority, LowerOrNewerEqualPriority) takes from its
  own queue; reclaimWithinCohort (LowerPriority, Any) from queues of the cohort that borrow, while the
  preemptor's queue is below its nominal quota; borrowWithinCohort (LowerPriority, with maxPriorityThreshold)
  lets a borrowing preemptor take cohort workloads at or below the threshold. Candidates: other queues' first,
  then lower priority, then the newest; a cohort candidate is taken only while its queue still borrows. The
  set is minimal: once the workload fits, each victim but the last is given back if it still fits without.

The ClusterQueues, their flavors and the quota arithmetic are ``kueue_quota``'s. A workload's priority is :func:`~incidents.diagnosis.precedence.job_rank`, its flavor (when admitted) its
``flavor``, else the flavor its node selector names.

Pure: reads the ``DiagnosisInput`` only (no database, no simulator).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from incidents.diagnosis.allocation import job_units
from incidents.diagnosis.kueue_quota import (
    EPS,
    ClusterQueue,
    FlavorQuota,
    Quotas,
    Usage,
    selects,
)
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.precedence import job_rank
from incidents.diagnosis.types import DiagnosisInput, EntityState

FIT = 3  # fits without preemption
RECLAIM = 2  # fits by reclaiming from borrowers of the cohort only
PREEMPT = 1  # fits by preempting, some of it in its own queue
NO_FIT = 0

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


@dataclass
class Workload:
    job: EntityState
    queue: str
    units: float
    priority: int
    created: str
    flavor: str | None  # the flavor it holds quota in; None while it waits

    @property
    def label(self) -> str:
        return self.job.ref.label


@dataclass
class Choice:
    """A flavor for a workload: its mode, whether it borrows, and the victims that make it fit."""

    flavor: str | None
    mode: int
    borrows: bool = False
    victims: list[tuple[Workload, str]] = field(default_factory=list)  # (victim, eviction reason)
    short: dict[str, float] = field(default_factory=dict)  # flavor -> units missing, for the words


@dataclass
class Outcome:
    """A workload at the end of the cycle: ``admitted`` (its flavor), ``pending`` (why), ``evicted`` (the
    reason), or ``preempting`` (its flavor, once its victims are gone)."""

    state: str
    flavor: str | None = None
    reason: str = ""


class Cycle(Quotas):
    """The cluster's ClusterQueues, workloads and usage at t; :meth:`run` serves one scheduling cycle."""

    def __init__(self, di: DiagnosisInput) -> None:
        super().__init__(di)
        self.workloads: list[Workload] = []
        for j in di.jobs:
            queue = j.get("queue") or j.get("project") or ""
            cq = self.cqs.get(queue)
            if cq is None:
                continue
            flavor = None
            if not is_pending(j):
                flavor = j.get("flavor") or next(
                    (f.flavor for f in cq.flavors if selects(j, f, self.keys)), cq.flavors[0].flavor
                )
            self.workloads.append(
                Workload(j, queue, job_units(j), job_rank_kueue(j), j.get("submitted") or "", flavor)
            )
        self.usage: Usage = {}
        for w in self.workloads:
            if w.flavor is not None:
                self.usage[(w.queue, w.flavor)] = self.usage.get((w.queue, w.flavor), 0.0) + w.units

    #
    # Flavors
    #
    def choose(self, w: Workload, usage: Usage) -> Choice:
        """The workload's flavor (module doc)."""
        cq = self.cqs[w.queue]
        best = Choice(None, NO_FIT)
        for fq in cq.flavors:
            if not selects(w.job, fq, self.keys):
                continue
            if self.fits(cq, fq, w.units, usage, borrow=True):
                c = Choice(
                    fq.flavor, FIT, borrows=usage.get((cq.name, fq.flavor), 0.0) + w.units > fq.nominal + EPS
                )
            else:
                best.short[fq.flavor] = round(w.units - max(self.available(cq, fq, usage), 0.0), 4)
                victims = self.victims(w, cq, fq, usage)
                if victims is None:
                    continue
                mode = RECLAIM if all(r != IN_CLUSTER_QUEUE for _v, r in victims) else PREEMPT
                c = Choice(fq.flavor, mode, victims=victims)
            if (c.mode, not c.borrows) > (best.mode, not best.borrows):
                c.short = best.short
                best = c
            if c.mode == FIT and (not c.borrows or cq.when_can_borrow == "MayStopSearch"):
                break
            if c.mode in (RECLAIM, PREEMPT) and cq.when_can_preempt == "MayStopSearch":
                break
        return best

    #
    # Preemption
    #
    def _candidates(self, w: Workload, cq: ClusterQueue, fq: FlavorQuota) -> list[Workload]:
        """The workloads holding quota in the flavor that the preemption policies let ``w`` evict."""
        lower = lambda v: v.priority < w.priority  # noqa: E731
        out = []
        for v in self.workloads:
            if v.flavor != fq.flavor or v is w:
                continue
            if v.queue == cq.name:
                newer = v.priority == w.priority and v.created > w.created
                if (cq.within == "LowerPriority" and lower(v)) or (
                    cq.within == "LowerOrNewerEqualPriority" and (lower(v) or newer)
                ):
                    out.append(v)
            elif (
                cq.cohort
                and self.cqs[v.queue].cohort == cq.cohort
                and self.borrows(v.queue, fq.flavor, self.usage)
            ):
                if (
                    cq.reclaim == "Any"
                    or (cq.reclaim == "LowerPriority" and lower(v))
                    or (cq.borrow_within == "LowerPriority" and lower(v))
                ):
                    out.append(v)
        # other queues' first, then the lowest priority, then the newest
        out.sort(key=lambda v: (v.queue == cq.name, v.priority, _newest(v.created), v.label))
        return out

    def victims(
        self, w: Workload, cq: ClusterQueue, fq: FlavorQuota, usage: Usage
    ) -> list[tuple[Workload, str]] | None:
        """The minimal set of workloads whose eviction lets ``w`` in the flavor, each with Kueue's eviction
        reason; None when none does."""
        cands = self._candidates(w, cq, fq)
        if not cands:
            return None
        own = [v for v in cands if v.queue == cq.name]
        if len(own) == len(cands):
            return self._minimal(w, cq, fq, usage, cands, borrow=True)
        used = usage.get((cq.name, fq.flavor), 0.0)
        if cq.borrow_within == "LowerPriority" and cq.threshold is not None:
            below = [v for v in cands if v.queue == cq.name or v.priority <= cq.threshold]
            if below:
                got = self._minimal(w, cq, fq, usage, below, borrow=True)
                if got is not None:
                    return got
        if used < fq.nominal - EPS:
            reclaimable = [
                v
                for v in cands
                if v.queue == cq.name
                or cq.reclaim == "Any"
                or (cq.reclaim == "LowerPriority" and v.priority < w.priority)
            ]
            got = self._minimal(w, cq, fq, usage, reclaimable, borrow=False)
            if got is not None:
                return got
        return self._minimal(w, cq, fq, usage, own, borrow=True) if own else None

    def _minimal(
        self,
        w: Workload,
        cq: ClusterQueue,
        fq: FlavorQuota,
        usage: Usage,
        cands: list[Workload],
        *,
        borrow: bool,
    ) -> list[tuple[Workload, str]] | None:
        left = dict(usage)
        taken: list[Workload] = []
        for v in cands:
            if v.queue != cq.name and not self.borrows(v.queue, fq.flavor, left):
                continue  # earlier victims brought its queue back within its nominal quota
            left[(v.queue, fq.flavor)] -= v.units
            taken.append(v)
            if self.fits(cq, fq, w.units, left, borrow):
                break
        else:
            return None
        for v in reversed(taken[:-1]):  # give back what is not needed, the last taken kept
            back = dict(left)
            back[(v.queue, fq.flavor)] += v.units
            if self.fits(cq, fq, w.units, back, borrow):
                left = back
                taken.remove(v)
        borrows = left.get((cq.name, fq.flavor), 0.0) + w.units > fq.nominal + EPS
        reason = IN_COHORT_RECLAIM_WHILE_BORROWING if borrows else IN_COHORT_RECLAMATION
        return [(v, IN_CLUSTER_QUEUE if v.queue == cq.name else reason) for v in taken]

    #
    # The cycle
    #
    def heads(self) -> list[tuple[Workload, Choice]]:
        """Each ClusterQueue's entry for the cycle and its nominated flavor: StrictFIFO its head whatever
        happens to it, BestEffortFIFO the first that some flavor admits."""
        out = []
        for cq in self.cqs.values():
            waiting = sorted(
                (w for w in self.workloads if w.queue == cq.name and w.flavor is None),
                key=lambda w: (-w.priority, w.created, w.label),
            )
            for w in waiting:
                choice = self.choose(w, self.usage)
                if choice.mode != NO_FIT or cq.strict_fifo:
                    out.append((w, choice))
                    break
        return out

    def run(self) -> dict[str, Outcome]:
        """One scheduling cycle: job label -> its outcome (module doc)."""
        out = {w.label: Outcome("admitted", w.flavor) for w in self.workloads if w.flavor is not None}
        for w in self.workloads:
            if w.flavor is None:
                out[w.label] = Outcome("pending", reason=self._words(self.choose(w, self.usage)))
        entries = self.heads()
        entries.sort(key=lambda e: (e[1].borrows, -e[0].priority, e[0].created, e[0].label))
        usage = dict(self.usage)
        gone: set[int] = set()
        for w, choice in entries:
            if choice.mode == NO_FIT or choice.flavor is None:
                continue
            cq = self.cqs[w.queue]
            fq = cq.quota(choice.flavor)
            assert fq is not None
            if choice.mode == FIT:
                if not self.fits(cq, fq, w.units, usage, borrow=True):
                    out[w.label] = Outcome("pending", reason=NO_LONGER_FITS)
                    continue
                usage[(cq.name, fq.flavor)] = usage.get((cq.name, fq.flavor), 0.0) + w.units
                out[w.label] = Outcome("admitted", choice.flavor)
                continue
            if any(id(v) in gone for v, _r in choice.victims):
                continue  # an earlier entry of the cycle preempts them already
            for v, reason in choice.victims:
                gone.add(id(v))
                out[v.label] = Outcome("evicted", v.flavor, reason)
            out[w.label] = Outcome("preempting", choice.flavor)
        return out

    def _words(self, choice: Choice) -> str:
        """Kueue's QuotaReserved message for a workload no flavor admits."""
        if not choice.short:
            return ""
        parts = ", ".join(
            f"insufficient unused quota for nvidia.com/gpu in flavor {f}, {n:g} more needed"
            for f, n in choice.short.items()
        )
        return f"couldn't assign flavors to pod set main: {parts}"


def job_rank_kueue(job: EntityState) -> int:
    """A workload's priority: its PriorityClass value when recorded, else 0 (Kueue's default)."""
    value = job.get("priority_value")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return job_rank(job) if job.get("priority_class") else 0


def _newest(created: str) -> tuple[int, ...]:
    """A key that sorts the most recent creation first."""
    return tuple(-ord(c) for c in created)


def cycle(di: DiagnosisInput) -> dict[str, Outcome]:
    """One Kueue scheduling cycle over the input (module doc): job label -> outcome."""
    return Cycle(di).run()


__all__ = [
    "IN_CLUSTER_QUEUE",
    "IN_COHORT_RECLAIM_WHILE_BORROWING",
    "IN_COHORT_RECLAMATION",
    "NO_LONGER_FITS",
    "Choice",
    "Cycle",
    "Outcome",
    "Workload",
    "cycle",
]
