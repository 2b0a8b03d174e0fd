"""How a KAI cluster (or a Kueue cohort's lending) divides its GPUs among claimants: the fair share.

Every claimant first gets what it deserves (its quota) up to what it asks (held plus waiting); what is left goes
to the highest queue priority first and, within one priority, is split among those that still ask for more in
proportion to their over-quota weight, never past their limit nor past what they ask, until nothing is left or
nobody asks (KAI Scheduler's docs/fairness). As KAI's proportion plugin divides it, a claimant that asks more
than its part of a round takes the part rounded down to whole GPUs; the fractions left over go afterwards, one
GPU at a time, to the largest remainder first (a tie: by name). One division for the queues page (``fairshare``) and for the order
the scheduling model serves waiting jobs in (``queue_order``).

Pure: reads the ``DiagnosisInput`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from incidents.diagnosis.types import READS, DiagnosisInput, gpus_of

EPS = 1e-6
MAX_ROUNDS = 64  # water-filling rounds: each one fills at least one claimant, so this bounds any real cluster


@dataclass
class Claim:
    """One claimant of a division: what it deserves, may reach, weighs and asks (held + waiting)."""

    name: str
    deserved: float | None  # None: no quota (it deserves nothing ahead of the others)
    limit: float | None  # None: no limit
    weight: float
    asks: float
    priority: int = 0  # queue priority: the spare goes to the highest first


def divide(capacity: float, claims: list[Claim]) -> dict[str, float]:
    """Each claimant's fair share of ``capacity`` (module doc): deserved first, then the rest by priority and
    weight, in KAI's rounds."""
    share = {c.name: min(c.deserved or 0.0, _asks(c)) for c in claims}
    left = capacity - sum(share.values())
    if left <= EPS:
        return {k: round(v, 4) for k, v in share.items()}
    levels = sorted({c.priority for c in claims}, reverse=True)
    remainders: dict[int, dict[str, float]] = {}
    for priority in levels:
        left, remainders[priority] = _rounds(left, [c for c in claims if c.priority == priority], share)
    for priority in levels:  # what the whole-GPU rounds left: one GPU each, the largest remainder first
        for name in sorted(remainders[priority], key=lambda n: (-remainders[priority][n], n)):
            if left <= EPS:
                break
            give = min(1.0, left)
            share[name] += give
            left -= give
    return {k: round(v, 4) for k, v in share.items()}


def _rounds(left: float, level: list[Claim], share: dict[str, float]) -> tuple[float, dict[str, float]]:
    """KAI's rounds within one queue priority: each claimant still asking is offered the round's amount in
    proportion to its over-quota weight; one that asks no more than that takes what it asks, the others take
    the offer rounded down to whole GPUs (KAI limits a fair share in round numbers) and keep the fraction as a
    remainder; another round runs while someone took less than its offer. Returns what is left and the
    remainders."""
    remainders: dict[str, float] = {}
    for _ in range(MAX_ROUNDS):
        hungry = [c for c in level if share[c.name] < _asks(c) - EPS and c.weight > 0]
        weight = sum(c.weight for c in hungry)
        if left <= EPS or not hungry or weight <= 0:
            break
        offer_total = left
        again = False
        for c in hungry:
            if left <= EPS:
                break
            offer = offer_total * c.weight / weight
            wants = _asks(c) - share[c.name]
            if wants <= offer + EPS:
                give = wants
                remainders.pop(c.name, None)
            else:
                give = float(math.floor(offer + EPS))
                if offer - give > EPS:
                    remainders[c.name] = offer - give
            share[c.name] += give
            left -= give
            again = again or wants < offer
        if not again:
            break
    return left, remainders


def _asks(c: Claim) -> float:
    """What a claimant may be given at most: what it asks, never past its limit."""
    return min(c.asks, _cap(c))


def _cap(c: Claim) -> float:
    return math.inf if c.limit is None else c.limit


def capacity(di: DiagnosisInput) -> float:
    """Allocatable GPUs of the nodes that take pods: Ready and not cordoned (read once per indexed block)."""
    got = di.memo("gpu_capacity", lambda: _capacity(di))
    return float(got) if got is not None else _capacity(di)


READS["gpu_capacity"] = ("nodes",)


def _capacity(di: DiagnosisInput) -> float:
    return float(
        sum(
            gpus_of(n.get("allocatable") or {})
            for n in di.nodes
            if n.get("ready") is not False and not n.get("unschedulable")
        )
    )


__all__ = ["Claim", "capacity", "divide"]
