"""Departments: KAI parent queues above projects, Kueue Cohorts above ClusterQueues, and the link from each
queue and project to its department."""

from __future__ import annotations

from typing import Any

from collectors.mapping.metadata import meta
from collectors.mapping.quantities import GPU, int_quantity, limit_or_none
from collectors.mapping.queues import kai_cpu_memory
from collectors.mapping.writers import actor
from collectors.observed import Observed

KAI_ROOT_QUEUE = "default-parent-queue"  # the root KAI installs; above departments, not one


def _gpu_float(value: Any) -> float | None:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        n = int_quantity(value)
        return None if n is None else float(n)


def _allocated(obj: dict[str, Any]) -> float | None:
    alloc = (obj.get("status") or {}).get("allocated") or {}
    return _gpu_float(alloc.get(GPU)) if isinstance(alloc, dict) else None


def map_kai_departments(queues: list[dict[str, Any]]) -> list[Observed]:
    """A department is a parent queue with projects (leaf queues) under it, other than KAI's root queue."""
    by_name = {meta(q).get("name", ""): q for q in queues}
    children: dict[str, list[str]] = {}
    for name, q in by_name.items():
        parent = (q.get("spec") or {}).get("parentQueue")
        if parent:
            children.setdefault(parent, []).append(name)
    out = []
    for name, kids in sorted(children.items()):
        parent_queue = by_name.get(name)
        if parent_queue is None or name == KAI_ROOT_QUEUE:
            continue
        leaves = sorted(k for k in kids if k not in children)
        if not leaves:
            continue
        resources = (parent_queue.get("spec") or {}).get("resources") or {}
        gpu = resources.get("gpu") or {}
        quota, limit = limit_or_none(gpu.get("quota")), limit_or_none(gpu.get("limit"))
        allocated = _allocated(parent_queue)
        state = {
            "scheduler": "kai",
            "quota_gpus": quota,
            "limit_gpus": limit,
            "queues": leaves,
            "projects": sorted(
                (meta(by_name[k]).get("labels") or {}).get("runai/project") or k for k in leaves
            ),
            "parent": (parent_queue.get("spec") or {}).get("parentQueue") or None,
            "allocated_gpus": allocated,
            **kai_cpu_memory(resources),
        }
        out.append(
            Observed(
                kind="department",
                name=name,
                uid=meta(parent_queue).get("uid", ""),
                state=state,
                actor=actor(parent_queue, spec_only=True),
                hot={"gpus": quota, "gpus_allocatable": limit, "queue": name, "gpu_units": allocated},
            )
        )
    return out


def map_kueue_departments(
    cohorts: list[dict[str, Any]], cluster_queues: list[dict[str, Any]]
) -> list[Observed]:
    """A department is a Kueue Cohort with ClusterQueues in it: its quota is its own nominal quota plus its
    ClusterQueues'; its limit, when it has a borrowing limit, that plus what it may borrow from its parent."""
    members: dict[str, list[dict[str, Any]]] = {}
    for cq in cluster_queues:
        cohort = (cq.get("spec") or {}).get("cohort")
        if cohort:
            members.setdefault(cohort, []).append(cq)
    out = []
    for c in cohorts:
        name = meta(c).get("name", "")
        cqs = sorted(members.get(name, []), key=lambda o: meta(o).get("name", ""))
        if not name or not cqs:
            continue
        own, borrow = _nominal(c)
        nominal = own + sum(_nominal(cq)[0] for cq in cqs)
        limit = None if borrow is None else nominal + borrow
        used = 0.0
        for cq in cqs:
            for fl in (cq.get("status") or {}).get("flavorsUsage") or []:
                for r in fl.get("resources") or []:
                    if r.get("name") == GPU:
                        used += _gpu_float(r.get("total")) or 0.0
        names = [meta(cq).get("name", "") for cq in cqs]
        state = {
            "scheduler": "kueue",
            "quota_gpus": int(nominal),
            "limit_gpus": None if limit is None else int(limit),
            "queues": names,
            "projects": names,
            "parent": (c.get("spec") or {}).get("parentName") or None,
            "allocated_gpus": round(used, 4),
        }
        out.append(
            Observed(
                kind="department",
                name=name,
                uid=meta(c).get("uid", ""),
                state=state,
                actor=actor(c, spec_only=True),
                hot={
                    "gpus": state["quota_gpus"],
                    "gpus_allocatable": state["limit_gpus"],
                    "queue": name,
                    "gpu_units": state["allocated_gpus"],
                },
            )
        )
    return out


def _nominal(obj: dict[str, Any]) -> tuple[float, float | None]:
    """nvidia.com/gpu nominal quota and borrowing limit (None = unlimited) over every flavor."""
    nominal, borrow = 0.0, 0.0
    unlimited = True
    for group in (obj.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if res.get("name") != GPU:
                    continue
                nominal += _gpu_float(res.get("nominalQuota")) or 0.0
                if res.get("borrowingLimit") is not None:
                    unlimited = False
                    borrow += _gpu_float(res.get("borrowingLimit")) or 0.0
    return nominal, (None if unlimited else borrow)


def link_departments(queues: list[Observed], departments: list[Observed]) -> None:
    """Projects and queues name their department (the department lists them, see map_*_departments)."""
    of_queue = {q: d.name for d in departments for q in d.state.get("queues") or []}
    of_project = {p: d.name for d in departments for p in d.state.get("projects") or []}
    for o in queues:
        if o.kind == "queue":
            o.state["department"] = of_queue.get(o.name)
        elif o.kind == "project":
            o.state["department"] = of_project.get(o.name)
