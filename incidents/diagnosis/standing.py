"""A queue or department as KAI's queue order weighs it: its quota, weight and priority, what it holds and asks,
and its fair share, in GPUs and (``res``) in CPU and memory; and how the fair shares are divided.

Pure: numbers only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from incidents.diagnosis.division import Claim, divide
from incidents.diagnosis.resources import DIMS, NO_SHARE_FACTOR, ZERO, Dim, Vector, dims_of
from incidents.diagnosis.types import EntityState

EPS = 1e-9


def _num(value: object) -> float | None:
    try:
        n = float(value)  # type: ignore[arg-type]  # a state value: number, string or None
    except (TypeError, ValueError):
        return None
    return n if math.isfinite(n) and n >= 0 else None


@dataclass
class Standing:
    """A queue or department as the order weighs it: its quota, weight, priority and what it holds."""

    name: str
    priority: int = 0
    deserved: float | None = None
    weight: float = 1.0
    limit: float | None = None
    used: float = 0.0
    demand: float = 0.0  # what it holds plus what its waiting jobs ask
    fair: float = 0.0  # KAI fair share (set by ``fair_shares``)
    res: dict[str, Dim] = field(default_factory=lambda: dims_of(None))  # CPU and memory (``resources``)

    def ratio(self, extra: float = 0.0) -> float:
        """GPUs held (with ``extra``) over what it may hold before it is saturated; none to hold: 1000 × held."""
        room = max(self.deserved or 0.0, self.fair)
        held = self.used + extra
        return held * NO_SHARE_FACTOR if room <= EPS else held / room

    def within(self, extra: float) -> bool:
        return self.deserved is not None and self.used + extra <= self.deserved + EPS

    def within_all(self, extra: float, vec: Vector = ZERO) -> bool:
        """Within its deserved quota with the job in every resource (an unlimited CPU or memory quota always)."""
        return self.within(extra) and all(self.res[d].within(v) for d, v in zip(DIMS, vec, strict=True))

    def over_fair_share(self) -> bool:
        """KAI's over-utilized queue: it holds more than its fair share in every resource."""
        return self.used > self.fair + EPS and all(self.res[d].over_fair() for d in DIMS)

    def dominant(self, total: Vector, extra: float = 0.0, vec: Vector = ZERO) -> float:
        """KAI's dominant resource share: the largest of held / allocatable over GPUs, CPU and memory."""
        cpu, memory = self.res[DIMS[0]], self.res[DIMS[1]]
        return max(self.ratio(extra), cpu.share(total[0], vec[0]), memory.share(total[1], vec[1]))


def fair_shares(total: float, members: list[Standing], cpu_memory: Vector | None = None) -> None:
    """Set each member's ``fair``: its share of ``total`` GPUs as KAI divides them (``division.divide``), and,
    given the CPU and memory to divide, its fair share of each (an unlimited quota deserves what it asks)."""
    share = divide(
        total, [Claim(m.name, m.deserved, m.limit, m.weight, m.demand, m.priority) for m in members]
    )
    for m in members:
        m.fair = share[m.name]
    for dim, amount in zip(DIMS, cpu_memory or (), strict=False):
        claims = [
            Claim(
                m.name,
                math.inf if m.res[dim].deserved is None else m.res[dim].deserved,
                m.res[dim].limit,
                m.res[dim].weight,
                m.res[dim].demand,
                m.priority,
            )
            for m in members
        ]
        got = divide(amount, claims)
        for m in members:
            m.res[dim].fair = got[m.name]


def standing_of(state: EntityState | None, name: str, used: float) -> Standing:
    if state is None:
        return Standing(name, used=used)
    weight = _num(state.get("over_quota_weight"))
    return Standing(
        name,
        priority=int(_num(state.get("priority")) or 0),
        deserved=_num(state.get("quota_gpus")),
        weight=1.0 if weight is None else weight,
        limit=_num(state.get("limit_gpus")),
        used=used,
    )


__all__ = ["EPS", "Standing", "fair_shares", "standing_of"]
