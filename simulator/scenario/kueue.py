"""The optional ``kueue`` section: ResourceFlavors and ClusterQueues written out (docs/scenarios.md).

Without it a Kueue cluster has one ClusterQueue per project in cohort ``gpu-cohort`` with the single flavor
``default-flavor``. With it every project's ClusterQueue is described as Kueue's API does: its cohort (or
none), its flavors in order with nominal quota, borrowing and lending limits for ``nvidia.com/gpu``, its
preemption policies, flavor fungibility and queueing strategy; and workloads may carry Kueue priorities.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from .nodes import Reader, line_of

PREEMPTION_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any")
RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
BORROW_POLICIES = ("Never", "LowerPriority")
WHEN_CAN_BORROW = ("MayStopSearch", "TryNextFlavor")
WHEN_CAN_PREEMPT = ("TryNextFlavor", "MayStopSearch")
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")


@dataclass(frozen=True)
class FlavorSpec:
    """A ResourceFlavor: its name and the node labels it stands for."""

    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    line: int = 0


@dataclass(frozen=True)
class FlavorQuotaSpec:
    """One flavor of a ClusterQueue's resource group, for nvidia.com/gpu. None: no limit set."""

    flavor: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class ClusterQueueSpec:
    project: str
    cohort: str | None
    flavors: tuple[FlavorQuotaSpec, ...]
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    queueing_strategy: str = "BestEffortFIFO"
    line: int = 0


@dataclass(frozen=True)
class KueueSpec:
    flavors: tuple[FlavorSpec, ...]
    cluster_queues: tuple[ClusterQueueSpec, ...]
    priorities: dict[str, int] = field(default_factory=dict)  # job -> Workload spec.priority
    line: int = 0

    def queue(self, project: str) -> ClusterQueueSpec:
        return next(q for q in self.cluster_queues if q.project == project)


def read_kueue(
    r: Reader,
    node: yaml.Node | None,
    scheduler: str | None,
    projects: dict[str, int],
    jobs: set[str],
    has_departments: bool,
) -> KueueSpec | None:
    """``projects``: name -> its GPU quota, which must equal the sum of its ClusterQueue's nominal quotas."""
    top = r.mapping(
        node, "kueue", ("flavors", "cluster_queues", "priorities"), required=("flavors", "cluster_queues")
    )
    if top is None:
        return None
    if scheduler is not None and scheduler != "kueue":
        r.problem("kueue", node, f"a kueue section needs cluster.scheduler: kueue, not {scheduler}")
    if has_departments:
        r.problem("kueue", node, "a kueue section describes cohorts itself; remove departments")
    flavors = _flavors(r, top.get("flavors"))
    names = {f.name for f in flavors}
    queues = _queues(r, top.get("cluster_queues"), names, projects)
    missing = sorted(set(projects) - {q.project for q in queues})
    if missing:
        r.problem(
            "kueue.cluster_queues",
            top.get("cluster_queues"),
            f"no ClusterQueue for project(s) {', '.join(missing)}",
        )
    priorities: dict[str, int] = {}
    pnode = top.get("priorities")
    pk = r.mapping(pnode, "kueue.priorities", tuple(sorted(jobs))) if pnode is not None else {}
    for job, vnode in (pk or {}).items():
        value = r.integer(vnode, f"kueue.priorities.{job}")
        if value is not None:
            priorities[job] = value
    return KueueSpec(tuple(flavors), tuple(queues), priorities, line_of(node) if node is not None else 0)


def _flavors(r: Reader, node: yaml.Node | None) -> list[FlavorSpec]:
    out: list[FlavorSpec] = []
    for i, fnode in enumerate(r.sequence(node, "kueue.flavors") or []):
        path = f"kueue.flavors[{i}]"
        fk = r.mapping(fnode, path, ("name", "node_labels"), required=("name",))
        if fk is None:
            continue
        name = r.string(fk.get("name"), f"{path}.name")
        labels = r.string_map(fk.get("node_labels"), f"{path}.node_labels") if "node_labels" in fk else {}
        if name in {f.name for f in out}:
            r.problem(f"{path}.name", fk.get("name"), f"duplicate flavor {name!r}")
        elif name is not None and labels is not None:
            out.append(FlavorSpec(name, labels, line_of(fnode)))
    return out


def _queues(
    r: Reader, node: yaml.Node | None, flavors: set[str], projects: dict[str, int]
) -> list[ClusterQueueSpec]:
    out: list[ClusterQueueSpec] = []
    keys = ("project", "cohort", "flavors", "preemption", "flavor_fungibility", "queueing_strategy")
    for i, qnode in enumerate(r.sequence(node, "kueue.cluster_queues") or []):
        path = f"kueue.cluster_queues[{i}]"
        qk = r.mapping(qnode, path, keys, required=("project", "flavors"))
        if qk is None:
            continue
        project = r.string(qk.get("project"), f"{path}.project")
        if project is not None and project not in projects:
            r.problem(f"{path}.project", qk.get("project"), f"unknown project {project!r}")
            continue
        if project in {q.project for q in out}:
            r.problem(f"{path}.project", qk.get("project"), f"a second ClusterQueue for project {project!r}")
            continue
        cohort = r.string(qk.get("cohort"), f"{path}.cohort", slug=True) if "cohort" in qk else None
        quotas = _quotas(r, qk.get("flavors"), f"{path}.flavors", flavors)
        pre = _preemption(r, qk.get("preemption"), f"{path}.preemption")
        fung = r.mapping(
            qk.get("flavor_fungibility"),
            f"{path}.flavor_fungibility",
            ("when_can_borrow", "when_can_preempt"),
        )
        fung = fung or {}
        borrow = (
            r.choice(fung["when_can_borrow"], f"{path}.flavor_fungibility.when_can_borrow", WHEN_CAN_BORROW)
            if "when_can_borrow" in fung
            else "MayStopSearch"
        )
        preempt = (
            r.choice(
                fung["when_can_preempt"], f"{path}.flavor_fungibility.when_can_preempt", WHEN_CAN_PREEMPT
            )
            if "when_can_preempt" in fung
            else "TryNextFlavor"
        )
        strategy = (
            r.choice(qk["queueing_strategy"], f"{path}.queueing_strategy", QUEUEING_STRATEGIES)
            if "queueing_strategy" in qk
            else "BestEffortFIFO"
        )
        if project is None or quotas is None or pre is None or None in (borrow, preempt, strategy):
            continue
        total = sum(q.nominal for q in quotas)
        if total != projects[project]:
            r.problem(
                f"{path}.flavors",
                qk.get("flavors"),
                f"nominal quotas add up to {total}, project {project!r} has quota {projects[project]}",
            )
        assert borrow is not None and preempt is not None and strategy is not None
        out.append(
            ClusterQueueSpec(
                project,
                cohort,
                tuple(quotas),
                *pre,
                when_can_borrow=borrow,
                when_can_preempt=preempt,
                queueing_strategy=strategy,
                line=line_of(qnode),
            )
        )
    return out


def _quotas(r: Reader, node: yaml.Node | None, path: str, flavors: set[str]) -> list[FlavorQuotaSpec] | None:
    out: list[FlavorQuotaSpec] = []
    items = r.sequence(node, path)
    if not items:
        r.problem(path, node, "a ClusterQueue needs at least one flavor")
        return None
    for i, fnode in enumerate(items):
        sub = f"{path}[{i}]"
        fk = r.mapping(
            fnode,
            sub,
            ("flavor", "nominal", "borrowing_limit", "lending_limit"),
            required=("flavor", "nominal"),
        )
        if fk is None:
            return None
        name = r.string(fk.get("flavor"), f"{sub}.flavor")
        if name is not None and name not in flavors:
            r.problem(
                f"{sub}.flavor",
                fk.get("flavor"),
                f"unknown flavor {name!r}; kueue.flavors has {', '.join(sorted(flavors)) or 'none'}",
            )
            return None
        if name in {q.flavor for q in out}:
            r.problem(f"{sub}.flavor", fk.get("flavor"), f"flavor {name!r} listed twice")
            return None
        nominal = r.integer(fk.get("nominal"), f"{sub}.nominal", minimum=0)
        limits = [
            r.integer(fk[k], f"{sub}.{k}", minimum=0) if k in fk and not r.is_null(fk[k]) else None
            for k in ("borrowing_limit", "lending_limit")
        ]
        if name is None or nominal is None:
            return None
        if limits[1] is not None and limits[1] > nominal:
            r.problem(
                f"{sub}.lending_limit",
                fk["lending_limit"],
                f"lending_limit ({limits[1]}) is above nominal ({nominal})",
            )
            return None
        out.append(FlavorQuotaSpec(name, nominal, limits[0], limits[1]))
    return out


def _preemption(r: Reader, node: yaml.Node | None, path: str) -> tuple[str, str, str, int | None] | None:
    """(withinClusterQueue, reclaimWithinCohort, borrowWithinCohort policy, its maxPriorityThreshold)."""
    if node is None:
        return ("Never", "Never", "Never", None)
    keys = ("within_cluster_queue", "reclaim_within_cohort", "borrow_within_cohort", "max_priority_threshold")
    pk = r.mapping(node, path, keys)
    if pk is None:
        return None
    within = (
        r.choice(pk["within_cluster_queue"], f"{path}.within_cluster_queue", PREEMPTION_POLICIES)
        if "within_cluster_queue" in pk
        else "Never"
    )
    reclaim = (
        r.choice(pk["reclaim_within_cohort"], f"{path}.reclaim_within_cohort", RECLAIM_POLICIES)
        if "reclaim_within_cohort" in pk
        else "Never"
    )
    borrow = (
        r.choice(pk["borrow_within_cohort"], f"{path}.borrow_within_cohort", BORROW_POLICIES)
        if "borrow_within_cohort" in pk
        else "Never"
    )
    threshold = (
        r.integer(pk["max_priority_threshold"], f"{path}.max_priority_threshold")
        if "max_priority_threshold" in pk
        else None
    )
    if within is None or reclaim is None or borrow is None:
        return None
    return (within, reclaim, borrow, threshold)
