"""The inventory sweep: list everything once, map it, record it by diff (collectors.inventory).

Each kind is recorded in its own transaction, and only when every source it depends on answered: a
failed listing never deletes entities and never writes half-known states (a job without its PodGroup would
otherwise open a version that says "no scheduling condition").
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from collectors import mapping
from collectors.inventory import Observed, record_absent, record_states
from collectors.models import Cluster, EntityVersion
from collectors.sources import promql
from collectors.sources.kai import KaiSource
from collectors.sources.kubernetes import KubeSource
from collectors.sources.kueue import KueueSource
from collectors.sources.prometheus import PrometheusSource, Series
from collectors.sources.runai import RunaiSource, runai_enabled
from collectors.sweep.common import Progress, Runner, SweepSummary, cluster_lock, resolve

logger = logging.getLogger(__name__)


def sweep_cluster(
    cluster_name: str, at: datetime | None = None, *, progress: Progress | None = None
) -> SweepSummary:
    """Sweep one cluster's inventory at ``at`` (default now; the simulator drivers pass simulated time).

    Never raises for a source failure: each failure is a ``SourceRun(ok=False)`` and in ``summary.errors``.
    Raises ValueError for an unknown cluster.
    """
    cluster, at = resolve(cluster_name, at)
    summary = SweepSummary(cluster=cluster.name, at=at, kind="inventory")
    started = time.monotonic()
    with cluster_lock(cluster.name, "inventory") as got:
        if not got:
            summary.skipped = True
            return summary
        runner = Runner(cluster, at, summary)
        try:
            _sweep(cluster, at, runner, summary, progress or (lambda what, n: None))
        finally:
            runner.save()
    summary.duration_s = time.monotonic() - started
    logger.info("%s", summary.line())
    return summary


def _sweep(cluster: Cluster, at: datetime, runner: Runner, summary: SweepSummary, progress: Progress) -> None:
    observed: dict[str, list[Observed] | None] = {}
    kube = runner.call("k8s", "connect", lambda: KubeSource(cluster))
    scheduler = cluster.scheduler
    try:
        _collect_kube(cluster, kube, scheduler, runner, observed, progress)
    finally:
        if kube is not None:
            kube.close()
    _collect_gpus(cluster, at, runner, observed)
    if runai_enabled(cluster.runai_url):
        _apply_runai_actors(cluster, at, runner, observed)
    source_of = {
        "project": scheduler_source(scheduler),
        "queue": scheduler_source(scheduler),
        "gpu": "prometheus",
    }
    for kind in ("project", "queue", "node", "job", "pod", "gpu"):
        items = observed.get(kind)
        if items is None:
            if kind not in ("project", "queue") or scheduler != "default":
                summary.skipped_kinds.append(kind)
            continue
        source = source_of.get(kind, "k8s")
        result = record_states(cluster, items, at, source=source)
        if kind != "gpu":  # a GPU that stops reporting is "missing", never deleted (map_gpus keeps it)
            result += record_absent(cluster, kind, [(o.namespace, o.name) for o in items], at, source=source)
        summary.add(result)
        progress(f"recorded {kind}s", len(items))


def scheduler_source(scheduler: str) -> str:
    return {"kai": "kai", "kueue": "kueue"}.get(scheduler, "k8s")


def _collect_kube(
    cluster: Cluster,
    kube: KubeSource | None,
    scheduler: str,
    runner: Runner,
    observed: dict[str, list[Observed] | None],
    progress: Progress,
) -> None:
    if kube is None:
        return
    raw_nodes = runner.call("k8s", "list nodes", kube.list_nodes)
    if raw_nodes is not None:
        observed["node"] = [mapping.map_node(n) for n in raw_nodes]
        runner.set_rows("list nodes", len(raw_nodes))
        progress("nodes", len(raw_nodes))

    # Scheduler objects first: pods need the queue → project map.
    sched_ok = True
    project_of: dict[tuple[str, str], str] = {}
    podgroups: list[dict[str, Any]] | None = None
    workloads: list[dict[str, Any]] | None = None
    local_queues: dict[tuple[str, str], str] = {}
    lq_ok = False
    if scheduler == "kai":
        kai = KaiSource(kube)
        queues = runner.call("kai", "list queues", kai.list_queues)
        podgroups = runner.call("kai", "list podgroups", kai.list_podgroups)
        namespaces = runner.call("k8s", "list namespaces", kube.list_namespaces)
        sched_ok = queues is not None and podgroups is not None
        if queues is not None and namespaces is not None:
            qs = mapping.map_kai_queues(queues, mapping.kai_namespaces(namespaces))
            observed["queue"] = [o for o in qs if o.kind == "queue"]
            observed["project"] = [o for o in qs if o.kind == "project"]
            project_of = {("", o.name): o.state["project"] for o in observed["queue"] if o.state["project"]}
    elif scheduler == "kueue":
        kueue = KueueSource(kube)
        cqs = runner.call("kueue", "list clusterqueues", kueue.list_cluster_queues)
        lqs = runner.call("kueue", "list localqueues", kueue.list_local_queues)
        workloads = runner.call("kueue", "list workloads", kueue.list_workloads)
        runner.call("kueue", "list resourceflavors", kueue.list_resource_flavors)
        sched_ok = cqs is not None and lqs is not None and workloads is not None
        lq_ok = lqs is not None
        if lqs is not None:
            local_queues = mapping.kueue_local_queue_map(lqs)
            project_of = dict(local_queues)
        if cqs is not None and lqs is not None:
            qs = mapping.map_kueue_queues(cqs, lqs)
            observed["queue"] = [o for o in qs if o.kind == "queue"]
            observed["project"] = [o for o in qs if o.kind == "project"]
    else:
        observed["queue"] = observed["project"] = None

    def list_pods() -> list[Observed]:
        out = []
        for n, raw in enumerate(kube.iter_pods(), 1):
            out.append(mapping.map_pod(raw, project_of))
            if n % 2000 == 0:
                progress("pods", n)
        return out

    pods = runner.call("k8s", "list pods", list_pods)
    if pods is not None:
        runner.set_rows("list pods", len(pods))
        progress("pods", len(pods))
        # Kueue: a pod's queue label names a LocalQueue; without the LocalQueue list its project is unknown.
        if scheduler != "kueue" or lq_ok:
            observed["pod"] = pods
    raw_jobs = runner.call("k8s", "list jobs", kube.list_jobs)
    if raw_jobs is None or pods is None or not sched_ok:
        return
    runner.set_rows("list jobs", len(raw_jobs))
    pods_by_job: dict[tuple[str, str], list[Observed]] = defaultdict(list)
    for p in pods:
        if p.state.get("job"):
            pods_by_job[(p.namespace, p.state["job"])].append(p)
    queue_project = {q: p for (_, q), p in project_of.items()}
    pg_index = mapping.SchedulingIndex.build(podgroups or [])
    wl_index = mapping.SchedulingIndex.build(workloads or [], uid_label="kueue.x-k8s.io/job-uid")
    jobs: list[Observed] = []
    for job in raw_jobs:
        m = job.get("metadata") or {}
        jpods = pods_by_job.get((m.get("namespace", ""), m.get("name", "")), [])
        if scheduler == "kai":
            js = mapping.kai_job_scheduling(pg_index.find(job), jpods, queue_project)
        elif scheduler == "kueue":
            js = mapping.kueue_job_scheduling(wl_index.find(job), jpods, local_queues)
        else:
            js = mapping.pod_job_scheduling(jpods)
        jobs.append(
            mapping.map_job(
                job,
                pod_phases=[p.state.get("phase", "") for p in jpods],
                queue=js.queue,
                project=js.project,
                scheduling=js.scheduling,
                admitted=js.admitted,
                preemptible=js.preemptible,
                waiting_for_admission=js.waiting_for_admission,
            )
        )
    observed["job"] = jobs
    progress("jobs", len(jobs))


def _collect_gpus(
    cluster: Cluster, at: datetime, runner: Runner, observed: dict[str, list[Observed] | None]
) -> None:
    """GPUs from DCGM: needs the inventory query, every fact query, and the node list (to resolve hosts)."""
    if not cluster.prometheus_url:
        runner.note(
            "prometheus", "configure", "no Prometheus URL configured: GPUs and telemetry are not collected"
        )
        return
    prom = PrometheusSource(cluster.prometheus_url)
    inventory = runner.call(
        "prometheus", f"query {promql.GPU_INVENTORY}", lambda: prom.query(promql.GPU_INVENTORY, at)
    )
    if inventory is None:
        return  # Prometheus is down or broken: one recorded error is enough, do not wait on every query
    facts: dict[str, list[Series] | None] = {}
    facts_ok = True
    for key, query in promql.GPU_STATE_QUERIES.items():
        series = runner.call("prometheus", f"query {query}", lambda q=query: prom.query(q, at))
        if series is None:
            facts_ok = False
        elif not series and inventory:
            metric = promql.GPU_STATE_METRICS[key]
            why = promql.ABSENT_WHY.get(metric, "the exporter does not export it")
            runner.note(
                "prometheus",
                f"no data {metric}",
                f"no data: {metric} has no series ({why}); GPU {key} is unknown, not zero",
            )
            facts[key] = None
        else:
            facts[key] = series
    if not facts_ok:
        return
    if observed.get("node") is not None:
        nodes = {o.name: o.state for o in observed["node"] or []}
    else:  # the node listing failed: resolve hosts against the nodes recorded last time
        nodes = {
            v.entity.name: v.state
            for v in EntityVersion.objects.filter(
                cluster=cluster, kind="node", valid_to__isnull=True
            ).select_related("entity")
        }
    running: dict[str, set[str]] = defaultdict(set)
    for p in observed.get("pod") or []:
        if p.state.get("node") and p.state.get("phase") in ("Running", "Pending"):
            running[p.state["node"]].add(f"{p.namespace}/{p.name}")
    previous = {
        v.entity.name: v.state
        for v in EntityVersion.objects.filter(
            cluster=cluster, kind="gpu", valid_to__isnull=True
        ).select_related("entity")
    }
    observed["gpu"] = mapping.map_gpus(
        inventory, facts, nodes=nodes, running_pods_on_node=running, previous=previous
    )
    runner.set_rows(f"query {promql.GPU_INVENTORY}", len(inventory))


def _apply_runai_actors(
    cluster: Cluster, at: datetime, runner: Runner, observed: dict[str, list[Observed] | None]
) -> None:
    """Run:ai's audit log names the user behind a project change: it beats the managedFields manager."""
    source = RunaiSource(cluster.runai_url)
    logs = runner.call("runai", "audit log", lambda: source.audit_log(at - timedelta(hours=1), at))
    if not logs:
        return
    who: dict[str, str] = {}
    for entry in logs:  # oldest first: the last write wins
        if entry.get("entityType") == "project" and entry.get("entityName") and entry.get("subject"):
            who[str(entry["entityName"])] = str(entry["subject"])
    for kind in ("project", "queue"):
        for o in observed.get(kind) or []:
            name = o.state.get("project") or o.name
            if name in who:
                o.actor = who[name]
