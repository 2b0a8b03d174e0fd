"""A cluster's (or pool's) GPU totals at t, over the rows of a job's fit table."""

from __future__ import annotations

from dataclasses import dataclass

from incidents.diagnosis.fit import STATIC_BLOCKERS, NodeFit


@dataclass
class Totals:
    """Cluster (or pool) GPU totals at t."""

    nodes: int
    capacity: int
    allocatable: int
    allocated: int
    free: int
    largest_free_block: int
    eligible_nodes: int  # nodes with no static blocker for this job
    eligible_free: int
    largest_eligible_block: int

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def totals(rows: list[NodeFit]) -> Totals:
    eligible = [r for r in rows if not any(b in STATIC_BLOCKERS for b in r.blockers)]
    return Totals(
        nodes=len(rows),
        capacity=sum(r.capacity for r in rows),
        allocatable=sum(r.allocatable for r in rows),
        allocated=sum(r.allocated for r in rows),
        free=sum(r.free for r in rows),
        largest_free_block=max((r.free for r in rows), default=0),
        eligible_nodes=len(eligible),
        eligible_free=sum(r.free for r in eligible),
        largest_eligible_block=max((r.free for r in eligible), default=0),
    )
