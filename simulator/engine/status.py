"""Project and department status, recomputed every tick: what KAI's Queue status and Kueue's ClusterQueue status
report (allocated, requested, fair share, pending and admitted workloads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .division import fair_shares, requested_gpus
from .quota import usage

if TYPE_CHECKING:
    from .world import World


def update_projects(world: World) -> None:
    alloc, alloc_np = usage(world)
    requested, pending, admitted = requested_gpus(world, alloc)
    shares, _departments = fair_shares(world, requested)
    for dname, dept in world.departments.items():
        members = [n for n, p in world.projects.items() if p.department == dname]
        new_d = (round(sum(alloc[n] for n in members), 4), round(sum(requested[n] for n in members), 4))
        if new_d != (dept.allocated_gpus, dept.requested_gpus):
            dept.allocated_gpus, dept.requested_gpus = new_d
            world.touch(dept)
    for name, proj in world.projects.items():
        new = (
            alloc[name],
            alloc_np[name],
            requested[name],
            round(shares[name], 3),
            pending[name],
            admitted[name],
        )
        old = (
            proj.allocated_gpus,
            proj.allocated_nonpreemptible_gpus,
            proj.requested_gpus,
            proj.fair_share_gpus,
            proj.pending_workloads,
            proj.admitted_workloads,
        )
        if new != old:
            (
                proj.allocated_gpus,
                proj.allocated_nonpreemptible_gpus,
                proj.requested_gpus,
                proj.fair_share_gpus,
                proj.pending_workloads,
                proj.admitted_workloads,
            ) = new
            world.touch(proj)
