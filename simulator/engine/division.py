"""KAI's fair shares: each queue's demand (GPUs in use plus what its waiting jobs ask for) and the division of
the cluster's GPUs among the queues, level by level, as KAI's proportion plugin divides them (Kueue has no
fair share here: it is the nominal quota)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from .proportion import DEPARTMENT_PRIORITY, EPS

if TYPE_CHECKING:
    from .world import World


def requested_gpus(
    world: World, alloc: dict[str, float]
) -> tuple[dict[str, float], dict[str, int], dict[str, int]]:
    """Per project: GPUs in use plus those its waiting jobs ask for; waiting jobs; admitted (bound) jobs."""
    requested = dict(alloc)
    pending = dict.fromkeys(world.projects, 0)
    admitted = dict.fromkeys(world.projects, 0)
    for job in world.jobs.values():
        if job.state not in ("Pending", "Running"):
            continue
        bound = job.admitted if world.scheduler == "kueue" else any(p.node for p in world.pods_of(job))
        if bound:
            admitted[job.project] += 1
        else:
            pending[job.project] += 1
            requested[job.project] = round(requested[job.project] + job.pods * job.gpus_per_pod, 4)
    return requested, pending, admitted


def fair_shares(world: World, requested: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """KAI: the cluster's GPUs divided among the top-level queues (departments and ungrouped projects), then each
    department's share among its projects; at each level deserved quota first, then the spare by over-quota
    weight in whole GPUs, higher queue priority first, never past a queue's demand (capped by its limit).

    Returns the projects' fair shares and the departments'. Kueue has no fair share here: it is the nominal quota.
    """
    projects = world.projects
    if world.scheduler == "kueue":
        return {n: float(p.quota_gpus) for n, p in projects.items()}, {
            d: float(dept.quota_gpus) for d, dept in world.departments.items()
        }
    total = float(sum(n.allocatable_gpus for n in world.nodes.values() if n.ready))
    total += sum(
        sum(i.compute_slices for g in n.gpus if g.present and g.healthy for i in g.mig)
        for n in world.nodes.values()
        if n.ready and n.mig_layout
    )  # MIG instances count as their "<n>g" in a KAI queue: a partitioned GPU offers its slices
    demand = {
        n: float(min(requested[n], p.limit_gpus if p.limit_gpus is not None else math.inf))
        for n, p in projects.items()
    }
    members: dict[str, list[str]] = {d: [] for d in world.departments}
    top: list[Division] = []
    for n, p in projects.items():
        if p.department in members:
            members[p.department].append(n)
        else:
            top.append(Division(n, float(p.quota_gpus), demand[n], p.priority, p.over_quota_weight))
    for d, names in members.items():
        dept = world.departments[d]
        want = sum(demand[n] for n in names)
        if dept.limit_gpus is not None:
            want = min(want, float(dept.limit_gpus))
        top.append(
            Division(
                f"department/{d}", float(dept.quota_gpus), want, DEPARTMENT_PRIORITY, dept.over_quota_weight
            )
        )
    level = divide(total, top)
    share = {n: level[n] for n, p in projects.items() if p.department not in members}
    for d, names in members.items():
        share.update(
            divide(
                level[f"department/{d}"],
                [
                    Division(
                        n,
                        float(projects[n].quota_gpus),
                        demand[n],
                        projects[n].priority,
                        projects[n].over_quota_weight,
                    )
                    for n in names
                ],
                within=True,
            )
        )
    return share, {d: level[f"department/{d}"] for d in members}


class Division(NamedTuple):
    """One queue at one level of the division, listed in the order the queues were created."""

    name: str
    deserved: float
    demand: float
    priority: int
    weight: int


def divide(total: float, queues: list[Division], *, within: bool = False) -> dict[str, float]:
    """One level of KAI's resource division (its proportion plugin's resource_division): queue -> fair share.

    Deserved quota first (capped by the demand; an over-committed top level still gives it, as KAI does;
    ``within`` a department, whose share is what is divided, the projects' deserved quotas are scaled down to
    fit it). Then, for each queue priority from the highest, rounds over the queues still wanting more: each
    gets the round's spare times its over-quota weight over the weights of those still wanting, all of it if
    that covers its demand, else only the whole GPUs of it (the fraction is remembered). Another round follows
    only when a queue took less than its part. Last, what the rounds left is handed out a GPU at a time to the
    queues with the largest remembered fraction (the queue created first on a tie), higher priority first."""
    # KAI's unlimited deserved quota (-1) is the whole amount divided here
    share = {q.name: min(total if q.deserved < 0 else q.deserved, q.demand) for q in queues}
    need = sum(share.values())
    if within and need > total + EPS:  # a department's share is divided: its projects get no more together
        share = {n: v * total / need for n, v in share.items()}
    spare = total - sum(share.values())
    if spare <= EPS:
        return share
    leftovers: list[dict[str, float]] = []
    for prio in sorted({q.priority for q in queues}, reverse=True):
        level = [q for q in queues if q.priority == prio and q.weight > 0]
        fraction: dict[str, float] = {}
        while spare > EPS:
            wanting = [q for q in level if share[q.name] < q.demand - EPS]
            wsum = sum(q.weight for q in wanting)
            if wsum <= 0:
                break
            amount, again = spare, False
            for q in wanting:
                part = amount * q.weight / wsum
                want = q.demand - share[q.name]
                if want <= part + EPS:
                    give = want
                    fraction.pop(q.name, None)
                else:
                    give = math.floor(part + EPS)
                    if part - give > EPS:
                        fraction[q.name] = part - give
                share[q.name] += give
                spare -= give
                again = again or want < part - EPS
            if not again:
                break
        leftovers.append(fraction)
    order = {q.name: i for i, q in enumerate(queues)}
    for fraction in leftovers:
        for name in sorted(fraction, key=lambda n: (-fraction[n], order[n])):
            if spare <= EPS:
                return share
            give = min(1.0, spare)
            share[name] += give
            spare -= give
    return share
