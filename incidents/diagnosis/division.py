"""How a KAI cluster (or a Kueue cohort's lending) divides its GPUs among claimants: the fair share.

Every claimant first gets what it deserves (its quota) up to what it asks (held plus waiting); what is left goes
to the highest queue priority first and, within one priority, is split among those that still ask for more in
proportion to their over-quota weight, never past their limit nor past what they ask, until nothing is left or
nobody asks (KAI Scheduler's docs/fairness). One division for the queues page (``fairshare``) and for the order
the scheduling model serves waiting jobs in (``queue_order``).

Pure: reads the ``DiagnosisInput`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from incidents.diagnosis.types import DiagnosisInput, gpus_of

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
    weight."""
    share = {c.name: min(c.deserved or 0.0, c.asks, _cap(c)) for c in claims}
    left = capacity - sum(share.values())
    for priority in sorted({c.priority for c in claims}, reverse=True):
        level = [c for c in claims if c.priority == priority]
        for _ in range(MAX_ROUNDS):
            hungry = [c for c in level if share[c.name] < min(c.asks, _cap(c)) - EPS]
            weight = sum(c.weight for c in hungry)
            if left <= EPS or not hungry or weight <= 0:
                break
            given = 0.0
            for c in hungry:
                more = min(left * c.weight / weight, min(c.asks, _cap(c)) - share[c.name])
                share[c.name] += more
                given += more
            left -= given
    return {k: round(v, 4) for k, v in share.items()}


def _cap(c: Claim) -> float:
    return math.inf if c.limit is None else c.limit


def capacity(di: DiagnosisInput) -> float:
    """Allocatable GPUs of the nodes that take pods: Ready and not cordoned."""
    return float(
        sum(
            gpus_of(n.get("allocatable") or {})
            for n in di.nodes
            if n.get("ready") is not False and not n.get("unschedulable")
        )
    )


__all__ = ["Claim", "capacity", "divide"]
