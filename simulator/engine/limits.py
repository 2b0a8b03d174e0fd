"""KAI's CPU and memory limits of a queue: its pods' requests plus the job's may not pass them (OverLimit)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .messages import kai_over_limit_resource
from .sharing import cpu_memory_request

if TYPE_CHECKING:
    from ..state import SimJob
    from .world import World


def cpu_memory_over_limit(
    world: World, job: SimJob, queue: str, members: set[str], cpu_limit: int | None, memory_limit: int | None
) -> str | None:
    """KAI's message when the job's CPU or memory would take the queue (its projects ``members``) past its
    limit, else None. Only queues with such a limit pay for the count."""
    if cpu_limit is None and memory_limit is None:
        return None
    cpu, mem = cpu_memory_request(job)
    used_cpu = used_mem = 0
    for other in world.jobs.values():
        if other.project not in members:
            continue
        bound = sum(1 for p in world.pods_of(other) if p.node is not None)
        if bound:
            c, m = cpu_memory_request(other)
            used_cpu, used_mem = used_cpu + bound * c, used_mem + bound * m
    if cpu_limit is not None and used_cpu + job.pods * cpu > cpu_limit:
        return kai_over_limit_resource(queue, "cpu", cpu_limit, used_cpu, job.pods * cpu)
    if memory_limit is not None and used_mem + job.pods * mem > memory_limit:
        return kai_over_limit_resource(queue, "memory", memory_limit, used_mem, job.pods * mem)
    return None
