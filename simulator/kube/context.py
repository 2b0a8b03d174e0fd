"""One pass over the world that the renderers share: indexes and per-project usage.

Built once per world tick by the API server's store, so that rendering 20,000
pods does not re-scan the world for every pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from operator import attrgetter
from typing import Any

from simulator.state import SimChange, SimJob, SimNode, SimPod, SimProject

ACTIVE_PHASES = ("Pending", "Running")


@dataclass
class Usage:
    """GPUs of one project (= queue) at now."""

    allocated: float = 0  # GPUs of bound, live pods (a share counts its fraction)
    allocated_non_preemptible: float = 0
    requested: float = 0  # GPUs of all live pods (bound or not) and of pending jobs without pods
    pending_jobs: int = 0
    admitted_jobs: int = 0


class Signatures:
    """Signature parts of the world's objects, computed once per object and resourceVersion.

    The engine's world stamps every write to an object with a new resourceVersion (``World.touch``), so
    parts computed for an object at a resourceVersion hold until it moves: the API server's store keeps
    one ``Signatures`` from sync to sync and a tick re-reads only the objects written since (the repr()
    of container states, each pod's part in its job's signature). A world without an integer
    ``resource_version`` may change its objects in place: ``build_context`` gives it a fresh one every
    tick, a per-tick memo. Entries are keyed by ``id()`` and hold the object, so an id is not reused
    while its entry lives.
    """

    def __init__(self) -> None:
        self.pods: dict[int, tuple[SimPod, int, tuple[Any, ...], tuple[Any, ...]]] = {}  # pod, rv, sig, part
        # job, rv, its pods, their resourceVersions, sig
        self.jobs: dict[int, tuple[SimJob, int, tuple[SimPod, ...], tuple[int, ...], tuple[Any, ...]]] = {}
        self.nodes: dict[int, tuple[SimNode, int, tuple[Any, ...]]] = {}  # node, rv, its own fields' part

    def prune(
        self, pods: list[SimPod], jobs: dict[tuple[str, str], SimJob], nodes: dict[str, SimNode]
    ) -> None:
        """Forget the objects that left the world, once they outnumber the live ones (amortised)."""
        if len(self.pods) > 2 * len(pods) + 1000:
            live = {id(p) for p in pods}
            self.pods = {k: v for k, v in self.pods.items() if k in live}
        if len(self.jobs) > 2 * len(jobs) + 1000:
            ids = {id(j) for j in jobs.values()}
            self.jobs = {k: v for k, v in self.jobs.items() if k in ids}
        if len(self.nodes) > 2 * len(nodes) + 1000:
            ids = {id(n) for n in nodes.values()}
            self.nodes = {k: v for k, v in self.nodes.items() if k in ids}


@dataclass
class RenderContext:
    world: Any
    now: datetime
    scheduler: str  # kai | kueue
    cluster: str
    nodes: dict[str, SimNode]
    projects: dict[str, SimProject]
    jobs: dict[tuple[str, str], SimJob]  # (namespace, name)
    pods_by_job: dict[tuple[str, str], list[SimPod]]
    live_pods: list[SimPod]
    usage: dict[str, Usage]
    last_change: dict[tuple[str, str], SimChange] = field(default_factory=dict)  # (kind, target) -> latest
    memo: dict[tuple[Any, ...], Any] = field(default_factory=dict)  # per-tick signatures shared by renderers
    signatures: Signatures = field(default_factory=Signatures)

    @cached_property
    def pods_by_key(self) -> dict[tuple[str, str], SimPod]:
        """Live pods by (namespace, name): only an Event's rendering reads it, so only such a tick builds it."""
        return {(p.namespace, p.name): p for p in self.live_pods}

    @property
    def heartbeat(self) -> datetime:
        """kubelet reports an unchanged node status every 5 minutes (nodeStatusReportFrequency)."""
        return self.now.replace(minute=self.now.minute - self.now.minute % 5, second=0, microsecond=0)

    @property
    def scheduler_name(self) -> str:
        return "kai-scheduler" if self.scheduler == "kai" else "default-scheduler"

    def project_of(self, job: SimJob) -> SimProject | None:
        return self.projects.get(job.project)

    def manager_for(self, kind: str, target: str, default: str) -> tuple[str, datetime | None]:
        change = self.last_change.get((kind, target))
        if change is None:
            return default, None
        return (change.actor or default), change.time

    def job_admitted(self, job: SimJob) -> bool:
        """Kueue admission: quota reserved. Running/finished jobs were admitted; a pending job is
        admitted when it has a bound pod or its request fits the project's quota headroom."""
        if hasattr(job, "admitted") and job.state in ("Pending", "Running"):
            return bool(job.admitted)  # the engine's scheduler decided
        if job.state in ("Running", "Succeeded", "Failed"):
            return True
        if job.state != "Pending":
            return False
        pods = self.pods_by_job.get((job.namespace, job.name), [])
        if any(p.node for p in pods):
            return True
        return self.quota_shortfall(job) <= 0

    def quota_shortfall(self, job: SimJob) -> float:
        """GPUs the job needs beyond what its project may still take (quota + borrowable or limit)."""
        project = self.project_of(job)
        if project is None:
            return 0
        used = self.usage[project.name].allocated
        request = job.pods * job.gpus_per_pod
        ceiling: float
        if project.limit_gpus is not None:
            ceiling = project.limit_gpus
        else:
            lendable = sum(
                max(0, p.quota_gpus - self.usage[p.name].allocated)
                for p in self.projects.values()
                if p.name != project.name
            )
            ceiling = project.quota_gpus + lendable
        return used + request - ceiling


def _values(container: Any) -> list[Any]:
    if isinstance(container, dict):
        return list(container.values())
    return list(container)


def build_context(world: Any, signatures: Signatures | None = None) -> RenderContext:
    """The context of one tick; ``signatures``: the caller's, kept across ticks (used when the world
    stamps its writes with an integer ``resource_version``, see ``Signatures``)."""
    now = world.now
    scenario = getattr(world, "scenario", None)
    cluster_spec = getattr(scenario, "cluster", None)
    scheduler = getattr(cluster_spec, "scheduler", "kai")
    cluster = getattr(cluster_spec, "name", "sim")
    nodes = {n.name: n for n in _values(world.nodes)}
    projects = {p.name: p for p in _values(world.projects)}
    jobs = {(j.namespace, j.name): j for j in _values(world.jobs)}
    pods_by_job: dict[tuple[str, str], list[SimPod]] = {}
    live: list[SimPod] = []
    for pod in _values(world.pods):
        if pod.deleted_at is not None and pod.deleted_at <= now:
            continue
        if pod.created_at > now:
            continue
        live.append(pod)
        siblings = pods_by_job.get((pod.namespace, pod.job))
        if siblings is None:
            pods_by_job[(pod.namespace, pod.job)] = [pod]
        else:
            siblings.append(pod)
    by_index = attrgetter("index")
    for pods in pods_by_job.values():
        if len(pods) > 1:
            pods.sort(key=by_index)
    usage: dict[str, Usage] = {name: Usage() for name in projects}
    # The engine keeps its own accounting (allocated_gpus...): a project that has it takes it below, and the
    # estimate from its pods would be overwritten; only the others need it.
    estimated = {name for name, project in projects.items() if not hasattr(project, "allocated_gpus")}
    for job in jobs.values():
        u = usage.get(job.project)
        if u is None or job.state not in ACTIVE_PHASES:
            continue
        if job.project in estimated:
            pods = pods_by_job.get((job.namespace, job.name), [])
            bound = sum(p.gpus_requested for p in pods if p.node and p.phase in ACTIVE_PHASES)
            u.allocated += bound
            if job.priority_class == "inference":
                u.allocated_non_preemptible += bound
            u.requested += job.pods * job.gpus_per_pod
        if job.state == "Pending":
            u.pending_jobs += 1
    for project in projects.values():
        if project.name not in estimated:  # the engine's own accounting
            u = usage[project.name]
            u.allocated = project.allocated_gpus
            u.allocated_non_preemptible = project.allocated_nonpreemptible_gpus
            u.requested = project.requested_gpus
    last_change: dict[tuple[str, str], SimChange] = {}
    for change in getattr(world, "changes", []) or []:
        if change.time <= now:
            last_change[(change.kind, change.target)] = change
    ctx = RenderContext(
        world=world,
        now=now,
        scheduler=scheduler,
        cluster=cluster,
        nodes=nodes,
        projects=projects,
        jobs=jobs,
        pods_by_job=pods_by_job,
        live_pods=live,
        usage=usage,
        last_change=last_change,
    )
    if signatures is not None and isinstance(getattr(world, "resource_version", None), int):
        signatures.prune(live, jobs, nodes)
        ctx.signatures = signatures
    for job in jobs.values():
        u = usage.get(job.project)
        if u is not None and job.state in ACTIVE_PHASES and ctx.job_admitted(job):
            u.admitted_jobs += 1
    return ctx
