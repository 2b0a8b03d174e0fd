"""The inventory sweep: list everything once, map it, record it by diff (collectors.inventory).

Each kind is recorded as soon as it is mapped (pods and jobs as they are listed, 2,000 at a time), in transactions of at
most 500 objects, and only when every source it depends on answered: a failed listing never deletes entities
and never writes half-known states (a job without its PodGroup would otherwise open a version that says "no
scheduling condition"). Between kinds only compact indexes are kept (what jobs need of pods, what GPUs need
of nodes), so 20,000 pods' whole states never sit in memory together, nor beside 20,000 jobs.

The parts live in modules of their own: the pods and jobs (:mod:`~collectors.sweep.workloads`), the GPUs
(:mod:`~collectors.sweep.gpus`), the scheduler objects (:mod:`~collectors.sweep.scheduler_objects`), what a
listing is remembered as (:mod:`~collectors.sweep.listing_memo`) and recorded by
(:mod:`~collectors.sweep.listing_recorder`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from collectors import mapping
from collectors.inventory import Observed, RecordResult, record_absent, record_states
from collectors.mapping.transitions import latest_transition
from collectors.models import Cluster, EntityVersion, SourceRun
from collectors.signals import inventory_swept
from collectors.sources import kai as kai_api
from collectors.sources import kueue as kueue_api
from collectors.sources.kube_client import custom_listing
from collectors.sources.kubernetes import KubeSource
from collectors.sources.runai import RunaiSource, runai_enabled
from collectors.sweep.cluster_lock import cluster_lock
from collectors.sweep.gc_pause import no_cyclic_gc
from collectors.sweep.gpus import GpuAnswers, GpuSeries, gpu_series, record_gpus
from collectors.sweep.listing_recorder import BATCH, RecordFailed
from collectors.sweep.pod_index import PodIndex
from collectors.sweep.runner import Runner
from collectors.sweep.scheduler_objects import (
    ListedScheduling,
    list_kai,
    list_kueue,
)
from collectors.sweep.summary import Progress, SweepSummary
from collectors.sweep.target import resolve
from collectors.sweep.workloads import list_jobs, list_pods

logger = logging.getLogger(__name__)


def sweep_cluster(
    cluster_name: str,
    at: datetime | None = None,
    *,
    progress: Progress | None = None,
    kube_factory: Callable[[Cluster], Any] = KubeSource,
    passes: list[Sweep] | None = None,
    asked: Sweep | None = None,
) -> SweepSummary:
    """Sweep one cluster's inventory at ``at`` (default now; the simulator drivers pass simulated time).

    Never raises for a source failure: each failure is a ``SourceRun(ok=False)`` and in ``summary.errors``.
    Raises ValueError for an unknown cluster. ``kube_factory``: see ``Sweep``; ``passes`` gets the pass
    (its nodes and pods: what the watch's GPU polls resolve against). ``asked``: this sweep, its reads sent
    earlier (:func:`ask_inventory`, for the same cluster and ``at``): it maps and records what they answer.
    """
    cluster, at = resolve(cluster_name, at)
    if asked is not None and (asked.cluster.pk, asked.at) != (cluster.pk, at):
        asked.close()
        raise ValueError(f"asked for {asked.cluster.name} at {asked.at}, swept {cluster.name} at {at}")
    summary = (
        asked.summary if asked is not None else SweepSummary(cluster=cluster.name, at=at, kind="inventory")
    )
    started = time.monotonic()
    with cluster_lock(cluster.name, "inventory") as got:
        if not got:
            summary.skipped = True
            if asked is not None:
                asked.close()
            return summary
        one = asked or Sweep(cluster, at, Runner(cluster, at, summary), summary, kube_factory=kube_factory)
        if progress is not None:
            one.progress = progress
        try:
            with no_cyclic_gc():
                one.run()
                if passes is not None:
                    passes.append(one)
        finally:
            one.runner.save()
    summary.duration_s = time.monotonic() - started
    logger.info("%s", summary.line())
    announce(cluster.name, at)
    return summary


def ask_inventory(cluster_name: str, at: datetime) -> Sweep:
    """Send an inventory sweep's reads now, in the background; ``sweep_cluster(…, asked=…)`` maps and
    records their answers later (:meth:`Sweep.ask`). For a driver that will sweep at ``at`` and waits on
    other work first (the simulation harness, while its inline worker finishes): what the cluster answers
    is what it would answer then, provided nothing moves it in between (the simulated cluster does not
    advance while the harness waits). Nothing is written until the sweep runs; ``close()`` drops it."""
    cluster, at = resolve(cluster_name, at)
    summary = SweepSummary(cluster=cluster.name, at=at, kind="inventory")
    one = Sweep(cluster, at, Runner(cluster, at, summary), summary)
    one.ask()
    return one


def announce(cluster: str, at: datetime) -> None:
    """Send ``inventory_swept`` (after a sweep, and after a watch recorded changes); receivers never fail it."""
    for receiver, result in inventory_swept.send_robust(sender=sweep_cluster, cluster=cluster, at=at):
        if isinstance(result, Exception):
            logger.error("after the sweep of %s: %s failed: %r", cluster, receiver, result)


class Sweep:
    """One pass over a cluster. ``kube_factory`` gives the Kubernetes source (default: a ``KubeSource``; the
    watch passes one that keeps what it lists, then one that answers from what it keeps); ``gpus=False``
    leaves Prometheus out (the watch polls GPUs on their own interval)."""

    def __init__(
        self,
        cluster: Cluster,
        at: datetime,
        runner: Runner,
        summary: SweepSummary,
        progress: Progress | None = None,
        *,
        kube_factory: Callable[[Cluster], Any] = KubeSource,
        gpus: bool = True,
    ):
        self.cluster, self.at, self.runner, self.summary, self.progress = (
            cluster,
            at,
            runner,
            summary,
            progress or (lambda what, n: None),
        )
        self.kube_factory = kube_factory
        self.with_gpus = gpus
        self.scheduler = cluster.scheduler
        self.nodes: dict[str, dict[str, Any]] | None = None  # node name -> state (GPU host resolution)
        self.pods: PodIndex | None = None
        self.gpu_answers: GpuAnswers | None = None  # the GPU queries' answers (the watch's poll compares)
        self._background: ThreadPoolExecutor | None = None  # the Prometheus reads' thread (ask)
        self._gpu_series_asked: Future[tuple[GpuAnswers | None, GpuSeries | None]] | None = None
        self._kube_asked: Any = None  # the Kubernetes source, its listings read ahead (ask)

    def listings(self) -> list[str]:
        """What ``_kube`` lists, in its order (``KubeSource.lister``'s names): what ``ask`` reads ahead."""
        calls = ["list nodes"]
        if self.scheduler == "kai":
            calls += [
                custom_listing(kai_api.GROUP, kai_api.QUEUE_VERSION, "queues"),
                custom_listing(kai_api.GROUP, kai_api.PODGROUP_VERSION, "podgroups"),
                "list namespaces",
            ]
        elif self.scheduler == "kueue":
            calls += [
                custom_listing(kueue_api.GROUP, kueue_api.VERSION, plural)
                for plural in ("clusterqueues", "localqueues", "workloads", "resourceflavors")
            ]
            calls.append(custom_listing(kueue_api.GROUP, kueue_api.COHORT_VERSION, "cohorts"))
        return [*calls, "list pods", "list jobs"]

    def ask(self, *, kube: bool = True) -> None:
        """Send the reads: Prometheus' GPU queries, and with ``kube`` every Kubernetes listing (read ahead:
        ``KubeSource.prefetch``), each in a thread of its own. Only HTTP happens there; ``run`` maps and
        records. A source that cannot be reached is connected to again, and its failure recorded, by ``run``."""
        if self._background is not None:
            return
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prometheus")
        if self.cluster.prometheus_url and self.with_gpus:
            self._gpu_series_asked = self._background.submit(gpu_series, self)
        if kube:
            try:
                source = self.kube_factory(self.cluster)
            except Exception:  # connected again by run, which records why it cannot
                return
            self._kube_asked = source
            if isinstance(source, KubeSource):
                source.prefetch(self.listings())

    def close(self) -> None:
        """Stop what ``ask`` sent and was not used (a sweep that did not run), and free its threads."""
        if self._gpu_series_asked is not None:
            self._gpu_series_asked.cancel()
        if self._background is not None:
            self._background.shutdown(wait=True)
            self._background = None
        if self._kube_asked is not None:
            self._kube_asked.close()
            self._kube_asked = None

    def run(self) -> None:
        # Prometheus is asked in the background while Kubernetes is listed and mapped: the two wait on
        # different servers. The worker thread only talks HTTP; everything touching the database stays here.
        self.ask()
        try:
            self._run(self._gpu_series_asked)
        finally:
            self.close()

    def _run(self, gpu_series: Future[tuple[GpuAnswers | None, GpuSeries | None]] | None) -> None:
        actors = self._runai_actors() if runai_enabled(self.cluster.runai_url) else {}
        asked, self._kube_asked = self._kube_asked, None
        kube = self.runner.call("k8s", "connect", lambda: asked or self.kube_factory(self.cluster))
        if kube is None:
            self.summary.skipped_kinds += ["node", "pod", "job"] + (
                ["project", "queue"] if self.scheduler != "default" else []
            )
        else:
            try:
                self._kube(kube, actors)
            finally:
                kube.close()
        if not self.with_gpus:
            pass
        elif gpu_series is None:
            self.runner.note(
                "prometheus",
                "configure",
                "no Prometheus URL configured: GPUs and telemetry are not collected",
            )
        else:
            try:
                answers, fetched = gpu_series.result()
            except Exception as exc:  # a bug in the worker thread must not stop the sweep
                logger.exception("prometheus: GPU queries failed")
                self.summary.errors.append(f"prometheus: GPU queries: unexpected {type(exc).__name__}: {exc}")
                answers = fetched = None
            self.gpu_answers = answers if fetched is not None else None
            record_gpus(self, fetched)

    def record(self, kind: str, items: list[Observed] | None, source: str = "k8s") -> None:
        if items is None:
            self.summary.skipped_kinds.append(kind)
            return
        # One read of the kind's open versions (digests only), then the changed objects are written in
        # transactions of at most 500: a failure leaves whole entities recorded or not, never half an entity.
        result = record_states(
            self.cluster, items, self.at, source=source, batch=BATCH, listed_before=self.listed_before(kind)
        )
        if kind != "gpu":  # a GPU that stops reporting is "missing", never deleted (map_gpus keeps it)
            result += self._absent(kind, items, source)
        self.summary.add(result)
        self.progress(f"recorded {kind}s", len(items))

    def _absent(self, kind: str, items: list[Observed], source: str) -> RecordResult:
        """Close what is open of ``kind`` and not among ``items``, a complete listing: it is gone."""
        keys = {(o.namespace, o.name) for o in items}
        still_open = EntityVersion.objects.filter(
            cluster=self.cluster, kind=kind, valid_to__isnull=True
        ).count()
        if still_open == len(keys):  # nothing open that was not listed (one COUNT spares a full read)
            return RecordResult()
        return record_absent(self.cluster, kind, keys, self.at, source=source)

    def listed_before(self, kind: str) -> datetime | None:
        """When the kind's listing last succeeded before this sweep: a state that changed since changed
        after then (``collectors.version_rows.dated``). None for a kind without a listing of its own (GPUs, from
        Prometheus, carry no time)."""
        if kind in ("node", "pod", "job"):
            source, call = "k8s", f"list {kind}s"
        elif kind in ("queue", "project", "department") and self.scheduler == "kai":
            source, call = "kai", "list queues"
        elif kind in ("queue", "project", "department") and self.scheduler == "kueue":
            source, call = "kueue", "list clusterqueues"
        else:
            return None
        return (
            SourceRun.objects.filter(
                cluster=self.cluster, source=source, call=call, ok=True, time__lt=self.at
            )
            .order_by("-time")
            .values_list("time", flat=True)
            .first()
        )

    #
    # Kubernetes and the scheduler
    #

    def _kube(self, kube: KubeSource, actors: dict[str, str]) -> None:
        self._nodes(kube)
        # Scheduler objects first: pods need the queue -> project map, jobs the PodGroups/Workloads.
        if self.scheduler == "kai":
            sched = list_kai(self, kube, actors)
        elif self.scheduler == "kueue":
            sched = list_kueue(self, kube, actors)
        else:
            sched = ListedScheduling()
        self._pods_and_jobs(kube, sched)

    def _nodes(self, kube: KubeSource) -> None:
        raw_nodes = self.runner.call("k8s", "list nodes", kube.list_nodes)
        if raw_nodes is None:
            self.summary.skipped_kinds.append("node")
            return
        nodes = [mapping.map_node(n) for n in raw_nodes]
        for node, raw in zip(nodes, raw_nodes, strict=True):
            node.since = latest_transition(raw)
        self.runner.set_rows("list nodes", len(nodes))
        self.record("node", nodes)
        self.nodes = {o.name: o.state for o in nodes}

    def _pods_and_jobs(self, kube: KubeSource, sched: ListedScheduling) -> None:
        """Pods, then jobs (mapped from their pods and scheduling objects), each recorded as listed."""
        runner = self.runner
        # Kueue: a pod's queue label names a LocalQueue; without the LocalQueue list its project is unknown,
        # and the pods are listed (jobs need them) but not recorded.
        pods = self._streamed(
            "list pods", lambda: list_pods(self, kube, sched.project_of, record=sched.local_queues_ok)
        )
        if pods is None:
            self.summary.skipped_kinds.append("pod")
        else:
            runner.set_rows("list pods", len(pods))
            if (
                sched.local_queues_ok
            ):  # recorded as listed, 2,000 at a time: what is open and not listed is gone
                self.summary.add(self._absent("pod", pods, "k8s"))
                self.progress("recorded pods", len(pods))
            else:
                self.summary.skipped_kinds.append("pod")
            self.pods = PodIndex.of(pods, self.nodes)
            del pods

        if self.pods is None or not sched.ok:
            self.summary.skipped_kinds.append("job")
            return
        queue_project = {q: p for (_, q), p in sched.project_of.items()}
        jobs = self._streamed(
            "list jobs", lambda: list_jobs(self, kube, sched.index, queue_project, sched.local_queues)
        )
        if jobs is None:
            self.summary.skipped_kinds.append("job")
            return
        runner.set_rows("list jobs", len(jobs))
        self.summary.add(self._absent("job", jobs, "k8s"))  # recorded as listed: what was not listed is gone
        self.progress("recorded jobs", len(jobs))

    def _streamed(self, call: str, fn: Callable[[], list[Observed]]) -> list[Observed] | None:
        """A Kubernetes listing recorded as it is listed (:class:`ListingRecorder`): its source's failure is recorded
        as the call's, the database's is the sweep's and raised."""
        try:
            return self.runner.call("k8s", call, fn, passes=(RecordFailed,))
        except RecordFailed as failed:
            raise failed.cause from None

    def record_queues(self, qs: list[Observed] | None, actors: dict[str, str], source: str) -> None:
        if qs is None:
            self.summary.skipped_kinds += ["project", "queue"]
            return
        for o in qs:
            who = actors.get(o.state.get("project") or o.name)
            if who:
                o.actor = who
        self.record("project", [o for o in qs if o.kind == "project"], source)
        self.record("queue", [o for o in qs if o.kind == "queue"], source)

    #
    # Run:ai
    #

    def _runai_actors(self) -> dict[str, str]:
        """Run:ai's audit log names the user behind a project change: it beats the managedFields manager."""
        source = RunaiSource(self.cluster.runai_url)
        logs = self.runner.call(
            "runai", "audit log", lambda: source.audit_log(self.at - timedelta(hours=1), self.at)
        )
        who: dict[str, str] = {}
        for entry in logs or []:  # oldest first: the last write wins
            if entry.get("entityType") == "project" and entry.get("entityName") and entry.get("subject"):
                who[str(entry["entityName"])] = str(entry["subject"])
        return who
