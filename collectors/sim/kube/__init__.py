"""The world's state rendered as Kubernetes API objects (core/v1, batch/v1, KAI, Kueue).

``resources(ctx)`` lists, per served resource, every object as
``(key, signature, render)``: the store re-renders an object only when its
signature changed since the previous tick, which keeps a 20,000-pod world cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from functools import partial
from typing import Any

from collectors.sim.kube import core, kai, kueue, nodes, pods
from collectors.sim.kube.context import RenderContext, build_context

__all__ = ["EVENT_TTL", "RenderContext", "build_context", "resources"]

EVENT_TTL = timedelta(hours=1)
Key = tuple[str, str]  # (namespace or "", name)
# (key, signature, render) — events add the engine's event object for the store's incremental pass.
Item = tuple[Key, Any, Callable[[], dict[str, Any]]] | tuple[Key, Any, Callable[[], dict[str, Any]], Any]


def _same(obj: dict[str, Any]) -> dict[str, Any]:
    """Render an object that is already a manifest."""
    return obj


def _heartbeat_bucket(ctx: RenderContext) -> int:
    # kubelet reports an unchanged node status every 5 minutes (nodeStatusReportFrequency)
    return int(ctx.now.timestamp()) // 300


def _job_sig(ctx: RenderContext, job: Any) -> tuple[Any, ...]:
    """What a Job/PodGroup/Workload rendering depends on; memoised per tick (jobs and groups share it)."""
    key = ("job", job.namespace, job.name)
    sig = ctx.memo.get(key)
    if sig is None:
        pods = ctx.pods_by_job.get((job.namespace, job.name), [])
        sig = (
            job.state,
            job.started_at,
            job.finished_at,
            job.generation,
            job.image,
            job.pods,
            job.gpus_per_pod,
            job.preempted_count,
            job.resource_version,
            tuple(
                (p.phase, p.node, p.restart_count, p.resource_version, _container_repr(ctx, p)) for p in pods
            ),
        )
        ctx.memo[key] = sig
    return sig


def _project_sig(ctx: RenderContext, name: str) -> tuple[Any, ...]:
    key = ("project", name)
    sig = ctx.memo.get(key)
    if sig is None:
        sig = (
            repr(ctx.usage.get(name)),
            repr(ctx.projects.get(name)),
            ctx.last_change.get(("project", name)),
        )
        ctx.memo[key] = sig
    return sig


def _iter_nodes(ctx: RenderContext) -> Iterator[Item]:
    hb = _heartbeat_bucket(ctx)
    for n in ctx.nodes.values():
        if n.created_at > ctx.now:
            continue
        sig = (
            n.ready,
            n.ready_changed_at,
            n.unschedulable,
            n.device_plugin_healthy,
            n.capacity_gpus,
            n.mig_state,
            repr(n.mig_layout),
            repr(n.taints),
            repr(n.labels),
            n.resource_version,
            ctx.last_change.get(("node", n.name)),
            hb,
        )
        yield ("", n.name), sig, partial(nodes.node, ctx, n)


def _container_repr(ctx: RenderContext, p: Any) -> str:
    """``repr(p.container_state)``, once per pod and tick (the pod's signature and its job's both read it)."""
    key = ("containers", id(p))  # the object itself: two pods may share a name within a tick
    found = ctx.memo.get(key)
    if found is None:
        found = ctx.memo[key] = repr(p.container_state)
    return found


def _iter_pods(ctx: RenderContext) -> Iterator[Item]:
    for p in getattr(ctx.world, "reservations", {}).values():
        if p.deleted_at is None:
            yield (p.namespace, p.name), (p.resource_version,), partial(pods.reservation_pod, ctx, p)
    for p in ctx.live_pods:
        sig = (
            p.phase,
            p.node,
            p.scheduled_message,
            p.started_at,
            p.finished_at,
            _container_repr(ctx, p),
            repr(p.last_state),
            p.restart_count,
            p.deleted_at,
            p.resource_version,
            p.image,
        )
        yield (p.namespace, p.name), sig, partial(pods.pod, ctx, p)


def _iter_events(ctx: RenderContext) -> Iterator[Item]:
    live = ctx.world.live_events() if hasattr(ctx.world, "live_events") else getattr(ctx.world, "events", [])
    for e in live:
        if e.last_time < ctx.now - EVENT_TTL or e.first_time > ctx.now:
            continue
        sig = (e.count, e.last_time, e.message, e.resource_version)
        yield (
            (e.namespace, e.name),
            sig,
            partial(core.event, ctx, e),
            e,
        )  # the event: the store's incremental pass


def _iter_namespaces(ctx: RenderContext) -> Iterator[Item]:
    names = {
        "default",
        "kube-system",
        "kube-node-lease",
        "gpu-operator",
        "kai-scheduler" if ctx.scheduler == "kai" else "kueue-system",
    }
    if getattr(ctx.world, "reservations", None) is not None and any(n.sharing for n in ctx.nodes.values()):
        names.add("runai-reservation")
    names |= {p.namespace for p in ctx.projects.values()}
    for name in names:
        yield ("", name), (name, tuple(sorted(ctx.projects))), partial(core.namespace, ctx, name)


def _iter_jobs(ctx: RenderContext) -> Iterator[Item]:
    for job in ctx.jobs.values():
        if job.state == "Waiting" or job.submit_at > ctx.now:
            continue
        admitted = ctx.job_admitted(job) if ctx.scheduler == "kueue" else None
        yield (job.namespace, job.name), (_job_sig(ctx, job), admitted), partial(core.job, ctx, job)


def _iter_kai_queues(ctx: RenderContext) -> Iterator[Item]:
    queues = kai.kai_queues(ctx)  # few objects: render them every tick and compare
    for q in queues:
        yield ("", q["metadata"]["name"]), repr(q), partial(_same, q)


def _iter_podgroups(ctx: RenderContext) -> Iterator[Item]:
    for job in ctx.jobs.values():
        if job.state == "Waiting" or job.submit_at > ctx.now:
            continue
        usage = _project_sig(ctx, job.project) if job.state == "Pending" else None
        yield (
            (job.namespace, kai.podgroup_name(job)),
            (_job_sig(ctx, job), usage),
            partial(kai.kai_podgroup, ctx, job),
        )


def _iter_flavors(ctx: RenderContext) -> Iterator[Item]:
    yield ("", kai.FLAVOR), None, partial(kueue.kueue_flavor, ctx)


def _iter_cluster_queues(ctx: RenderContext) -> Iterator[Item]:
    for p in ctx.projects.values():
        obj = kueue.kueue_cluster_queue(ctx, p)
        yield ("", p.name), repr(obj), partial(_same, obj)


def _iter_cohorts(ctx: RenderContext) -> Iterator[Item]:
    for obj in kueue.kueue_cohorts(ctx):
        yield ("", obj["metadata"]["name"]), repr(obj), partial(_same, obj)


def _iter_local_queues(ctx: RenderContext) -> Iterator[Item]:
    for p in ctx.projects.values():
        obj = kueue.kueue_local_queue(ctx, p)
        yield (p.namespace, p.name), repr(obj), partial(_same, obj)


def _iter_workloads(ctx: RenderContext) -> Iterator[Item]:
    for job in ctx.jobs.values():
        if job.state == "Waiting" or job.submit_at > ctx.now:
            continue
        usage = _project_sig(ctx, job.project) if job.state == "Pending" else None
        yield (
            (job.namespace, kueue.workload_name(job)),
            (_job_sig(ctx, job), usage, ctx.job_admitted(job)),
            partial(kueue.kueue_workload, ctx, job),
        )


def resources(ctx: RenderContext) -> dict[str, Iterator[Item]]:
    """Per store resource name, the objects it holds at ctx.now."""
    out: dict[str, Iterator[Item]] = {
        "nodes": _iter_nodes(ctx),
        "namespaces": _iter_namespaces(ctx),
        "pods": _iter_pods(ctx),
        "events": _iter_events(ctx),
        "jobs": _iter_jobs(ctx),
    }
    if ctx.scheduler == "kai":
        out["queues"] = _iter_kai_queues(ctx)
        out["podgroups"] = _iter_podgroups(ctx)
    else:
        out["resourceflavors"] = _iter_flavors(ctx)
        out["clusterqueues"] = _iter_cluster_queues(ctx)
        out["cohorts"] = _iter_cohorts(ctx)
        out["localqueues"] = _iter_local_queues(ctx)
        out["workloads"] = _iter_workloads(ctx)
    return out
