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

from simulator.kube import core, kai, kueue, nodes, pods
from simulator.kube.context import RenderContext, Signatures, build_context

__all__ = ["EVENT_TTL", "RenderContext", "Signatures", "build_context", "resources"]

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
    """What a Job/PodGroup/Workload rendering depends on.

    The same tuple object while the job, its pods (the same objects, in the same order) and their
    resourceVersions are unchanged (see ``Signatures``): not rebuilt, and the store's comparison with
    the signature it holds stops at the first element (tuples compare items by identity first).
    """
    pods = ctx.pods_by_job.get((job.namespace, job.name), ())
    members = tuple(pods)
    versions = tuple([p.resource_version for p in pods])
    rv = job.resource_version
    held = ctx.signatures.jobs.get(id(job))
    if held is not None and held[1] == rv and held[2] == members and held[3] == versions:
        return held[4]
    sig = (
        job.state,
        job.started_at,
        job.finished_at,
        job.generation,
        job.image,
        job.pods,
        job.gpus_per_pod,
        job.preempted_count,
        rv,
        tuple([_pod_sigs(ctx, p)[1] for p in pods]),
    )
    ctx.signatures.jobs[id(job)] = (job, rv, members, versions, sig)
    return sig


def _submitted_jobs(ctx: RenderContext) -> list[tuple[Any, tuple[Any, ...]]]:
    """The jobs past submission, each with its signature: once per tick for their Job, PodGroup, Workload."""
    found = ctx.memo.get(("submitted-jobs",))
    if found is None:
        now = ctx.now
        found = [
            (job, _job_sig(ctx, job))
            for job in ctx.jobs.values()
            if job.state != "Waiting" and job.submit_at <= now
        ]
        ctx.memo[("submitted-jobs",)] = found
    return found


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
    held_nodes = ctx.signatures.nodes
    for n in ctx.nodes.values():
        if n.created_at > ctx.now:
            continue
        rv = n.resource_version
        held = held_nodes.get(id(n))
        if held is not None and held[1] == rv:
            own = held[2]
        else:
            own = (
                n.ready,
                n.ready_changed_at,
                n.unschedulable,
                n.device_plugin_healthy,
                n.capacity_gpus,
                n.mig_state,
                repr(n.mig_layout),
                repr(n.taints),
                repr(n.labels),
                rv,
            )
            held_nodes[id(n)] = (n, rv, own)
        yield ("", n.name), (*own, ctx.last_change.get(("node", n.name)), hb), partial(nodes.node, ctx, n)


def _pod_sigs(ctx: RenderContext, p: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The pod's own signature and its part in its job's, once per pod and resourceVersion.

    Both read ``repr(p.container_state)``, the costly part: computed once for the two, and (with the
    store's ``Signatures``) not again until the engine writes the pod.
    """
    rv = p.resource_version
    held = ctx.signatures.pods.get(id(p))
    if held is not None and held[1] == rv:
        return held[2], held[3]
    containers = repr(p.container_state)
    sig = (
        p.phase,
        p.node,
        p.scheduled_message,
        p.started_at,
        p.finished_at,
        containers,
        repr(p.last_state),
        p.restart_count,
        p.deleted_at,
        rv,
        p.image,
    )
    part = (p.phase, p.node, p.restart_count, rv, containers)
    ctx.signatures.pods[id(p)] = (p, rv, sig, part)
    return sig, part


def _iter_pods(ctx: RenderContext) -> Iterator[Item]:
    for p in getattr(ctx.world, "reservations", {}).values():
        if p.deleted_at is None:
            yield (p.namespace, p.name), (p.resource_version,), partial(pods.reservation_pod, ctx, p)
    held_pods = ctx.signatures.pods
    for p in ctx.live_pods:
        held = held_pods.get(id(p))
        sig = held[2] if held is not None and held[1] == p.resource_version else _pod_sigs(ctx, p)[0]
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
    kueue = ctx.scheduler == "kueue"
    for job, sig in _submitted_jobs(ctx):
        admitted = ctx.job_admitted(job) if kueue else None
        yield (job.namespace, job.name), (sig, admitted), partial(core.job, ctx, job)


def _iter_kai_queues(ctx: RenderContext) -> Iterator[Item]:
    queues = kai.kai_queues(ctx)  # few objects: render them every tick and compare
    for q in queues:
        yield ("", q["metadata"]["name"]), repr(q), partial(_same, q)


def _iter_podgroups(ctx: RenderContext) -> Iterator[Item]:
    for job, sig in _submitted_jobs(ctx):
        usage = _project_sig(ctx, job.project) if job.state == "Pending" else None
        yield (job.namespace, kai.podgroup_name(job)), (sig, usage), partial(kai.kai_podgroup, ctx, job)


def _iter_flavors(ctx: RenderContext) -> Iterator[Item]:
    for obj in kueue.kueue_flavors(ctx):
        yield ("", obj["metadata"]["name"]), None, partial(_same, obj)


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
    for job, sig in _submitted_jobs(ctx):
        usage = _project_sig(ctx, job.project) if job.state == "Pending" else None
        yield (
            (job.namespace, kueue.workload_name(job)),
            (sig, usage, ctx.job_admitted(job)),
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
