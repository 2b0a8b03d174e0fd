"""The inventory sweep: list everything once, map it, record it by diff (collectors.inventory).

Each kind is recorded as soon as it is mapped (pods and jobs as they are listed, 2,000 at a time), in transactions of at
most 500 objects, and only when every source it depends on answered: a failed listing never deletes entities
and never writes half-known states (a job without its PodGroup would otherwise open a version that says "no
scheduling condition"). Between kinds only compact indexes are kept (what jobs need of pods, what GPUs need
of nodes), so 20,000 pods' whole states never sit in memory together, nor beside 20,000 jobs.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import simdjson

from collectors import mapping
from collectors.inventory import (
    Observed,
    RecordResult,
    open_versions,
    record_absent,
    record_slices,
    record_states,
    state_hash,
)
from collectors.mapping.common import latest_transition
from collectors.models import Cluster, EntityVersion, SourceRun
from collectors.signals import inventory_swept
from collectors.sources import kai as kai_api
from collectors.sources import kueue as kueue_api
from collectors.sources import promql
from collectors.sources.dcgm import dcgm_identity
from collectors.sources.errors import SourceError
from collectors.sources.kai import KaiSource
from collectors.sources.kubernetes import KubeSource, custom_listing
from collectors.sources.kueue import KueueSource
from collectors.sources.prometheus import Answer, PrometheusSource, Series
from collectors.sources.runai import RunaiSource, runai_enabled
from collectors.sweep.common import Progress, Runner, SweepSummary, cluster_lock, resolve

logger = logging.getLogger(__name__)

BATCH = 500
LISTED_BATCH = 2000  # objects of a listing (pods, jobs) mapped, then recorded, at a time


class _RecordFailed(Exception):
    """Recording what a listing gave failed (the database, not the source): raised through ``Runner.call``,
    then ``cause`` is raised as the sweep's failure."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


GpuAnswers = tuple[Answer, dict[str, Answer | None]]  # the inventory query's answer, each fact query's
GpuSeries = tuple[list[Series], dict[str, list[Series] | None]]  # the same decoded (None: no data)


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


@contextmanager
def no_cyclic_gc(*, collect: bool = True) -> Iterator[None]:
    """Pause the cyclic garbage collector for one sweep.

    A sweep allocates millions of small dicts (decoded JSON, mapped states) and holds ~100,000 of them at
    once; each generation-2 pass walks them all, ~20% of a re-sweep's CPU, to find no cycle (decoded JSON
    has none). Reference counting still frees everything; one collection of the young generations runs at
    the end: everything the sweep allocated and kept is young (nothing was promoted while the collector was
    off), so that pass finds any cycle the sweep made, without walking the whole heap (a full pass cost as
    much as the rest of a 200-node re-sweep when the simulator shares the process: bench/sim.py --pipeline).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        if collect:
            gc.collect(1)


def _cohorts(kube: KubeSource) -> list[dict[str, Any]]:
    """Kueue Cohort objects (kueue.x-k8s.io/v1alpha1); a cluster without the Cohort API has none, not an error."""
    try:
        return list(kube.iter_custom(kueue_api.GROUP, kueue_api.COHORT_VERSION, "cohorts"))
    except SourceError as exc:
        if exc.status == 404:
            return []
        raise


def scheduler_source(scheduler: str) -> str:
    return {"kai": "kai", "kueue": "kueue"}.get(scheduler, "k8s")


@dataclass
class _Pods:
    """What the job and GPU mappers need of the pods, without the pods."""

    by_job: dict[tuple[str, str], list[Observed]] = field(default_factory=lambda: defaultdict(list))
    # Per job, its pods' (name, digest of the mapped state): what the job memo compares (_Memo).
    marks: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))
    on_node: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    shares: dict[str, dict[str, Any]] = field(default_factory=dict)  # GPU uuid -> KAI shares (gpu_shares)


class _Memo:
    """One cluster's objects of one listing as its last complete listing mapped them, by (namespace, name):
    each object's mark and the mapped object with its digest. The API server gives an object a new
    resourceVersion at every change, so an object listed again with the same mark maps to the same state: a
    sweep maps and digests only what changed (most objects of a busy cluster do not change between two sweeps).

    - pods: the mark is (uid, resourceVersion, the node's GPU memory);
    - jobs: (uid, resourceVersion, the PodGroup/Workload's resourceVersion, the pods' (name, digest)): a job's
      state is a function of exactly its object, its scheduling object and its pods' mapped states.

    Valid for one ``context`` (the queue → project maps the objects were mapped with): another empties it."""

    def __init__(self, context: int) -> None:
        self.context = context
        self.objects: dict[tuple[str, str], tuple[tuple[Any, ...], Observed]] = {}


_memos: dict[tuple[Any, ...], _Memo] = {}


def _memo(cluster: Cluster, listing: str, context: int) -> _Memo:
    """The cluster's memo of ``listing`` ("pods", "jobs"), emptied when its context changed. By the cluster row
    and where it is read from (a cluster registered anew is another cluster). Sweeps of one cluster never run
    at once (``cluster_lock``)."""
    key = (listing, cluster.pk, cluster.name, cluster.kubeconfig, cluster.created)
    memo = _memos.get(key)
    if memo is None or memo.context != context:
        for stale in [k for k in _memos if k[0] == listing and (k[1] == key[1] or k[2] == key[2])]:
            del _memos[stale]
        memo = _memos[key] = _Memo(context)
    return memo


_KEPT_POD_KEYS = ("phase", "node", "job", "gpu_share", "reservation_for")  # what a sweep reads of a pod


def _kept(pod: Observed) -> Observed:
    """A recorded pod as the memo keeps it for the next sweep: its mark's digest and only the part of its state
    a sweep reads (``_kube``: the job's pods, the node's, GPU shares), so 20,000 pods' whole states do not
    outlive their recording (they would sit beside the job listing). A pod that shares a GPU or reserves one
    for others is kept whole (``mapping.gpu_shares`` reads more of it; they are few)."""
    state = pod.state
    if pod.partial or state.get("gpu_share") or state.get("reservation_for"):
        return pod
    kept = {k: state[k] for k in _KEPT_POD_KEYS if k in state}
    cond = (state.get("conditions") or {}).get("PodScheduled")
    kept["conditions"] = {"PodScheduled": cond} if cond else {}
    return Observed(
        kind="pod",
        name=pod.name,
        namespace=pod.namespace,
        state=kept,
        since=pod.since,
        digest=pod.digest,
        partial=True,
    )


def _lite(pod: Observed) -> Observed:
    cond = (pod.state.get("conditions") or {}).get("PodScheduled")
    state = {
        "phase": pod.state.get("phase"),
        "node": pod.state.get("node"),
        "conditions": {"PodScheduled": cond} if cond else {},
    }
    return Observed(kind="pod", name=pod.name, namespace=pod.namespace, state=state, since=pod.since)


class _Streamed:
    """One listing's objects, recorded as they are mapped (``LISTED_BATCH`` at a time, when ``record``) against one
    read of the kind's open versions, and kept by the memo as ``keep`` makes them once recorded: a listing's
    whole states never sit in memory together.

    An object the memo keeps in part (``Observed.partial``) is reused only while its open version's digest is
    the one kept (``reusable``): another writer, or a database put back, makes it mapped again. A listing
    that fails part way leaves the objects recorded so far (each whole) and closes nothing: only a complete
    listing says what is gone (``Sweep._absent``). Used as a context manager around the listing: once it is
    complete the memo holds what it listed (objects gone are forgotten); after a failure, nothing (some of it
    recorded or not: the next listing maps everything again)."""

    def __init__(
        self, sweep: Sweep, kind: str, memo: _Memo, *, record: bool, keep: Callable[[Observed], Observed]
    ) -> None:
        self.sweep, self.kind, self.memo, self.record, self.keep = sweep, kind, memo, record, keep
        self.opened = open_versions(sweep.cluster, kind) if record or memo.objects else {}
        self.listed_before = sweep._listed_before(kind) if record else None
        self.batch: list[tuple[tuple[str, str], tuple[Any, ...] | None, Observed]] = []
        self.out: list[Observed] = []
        self.fresh: dict[tuple[str, str], tuple[tuple[Any, ...], Observed]] = {}
        self.listed: set[tuple[str, str]] = set()

    def __enter__(self) -> _Streamed:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.memo.objects = {}  # (also when the last batch fails to record)
        if exc_type is None:
            self.flush()
            self.memo.objects = self.fresh

    def recall(self, name: tuple[str, str], mark: tuple[Any, ...] | None) -> Observed | None:
        """The object as mapped last time, when ``mark`` (None: nothing says it is unchanged) is the memo's
        and what the memo keeps in part is still the open version; then it is kept for the next listing."""
        kept = self.memo.objects.get(name) if mark is not None else None
        if kept is None or kept[0] != mark:
            return None
        if kept[1].partial and (self.opened.get(name) or (0, 0, ""))[2] != kept[1].digest:
            return None
        self.fresh[name] = kept
        return kept[1]

    def add(self, name: tuple[str, str], mark: tuple[Any, ...] | None, obs: Observed) -> None:
        """One object as listed: ``mark`` None when it is not to be remembered, or is already in ``fresh``."""
        if name in self.listed:  # a page boundary moved under the listing: the first one stands
            return
        self.listed.add(name)
        self.batch.append((name, mark, obs))
        if len(self.batch) >= LISTED_BATCH:
            self.flush()

    def flush(self) -> None:
        # (an object reused in part is recorded already: recording it again only counts it as seen)
        if self.record and self.batch:
            with self.sweep.runner.aside():
                try:
                    result = record_states(
                        self.sweep.cluster,
                        [obs for _, _, obs in self.batch],
                        self.sweep.at,
                        batch=BATCH,
                        listed_before=self.listed_before,
                        open_versions=self.opened,
                    )
                except Exception as exc:
                    raise _RecordFailed(exc) from exc
            self.sweep.summary.add(result)
        for name, mark, obs in self.batch:
            kept = self.keep(obs) if self.record else obs
            if mark is not None:
                self.fresh[name] = (mark, kept)
            elif kept is not obs and name in self.fresh:  # reused whole (listed, not recorded, last time)
                self.fresh[name] = (self.fresh[name][0], kept)
            self.out.append(kept)
        self.batch.clear()


def _kept_job(job: Observed) -> Observed:
    """A recorded job as the memo keeps it: its digest (nothing of a job is read after it is recorded)."""
    if job.partial:
        return job
    return Observed(
        kind="job",
        name=job.name,
        namespace=job.namespace,
        state={},
        since=job.since,
        digest=job.digest,
        partial=True,
    )


def _plain(value: Any) -> Any:
    """A value read from a ``simdjson`` page as plain dicts and lists (a decoded one as it is)."""
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def _slim(obj: Any, status_keys: tuple[str, ...]) -> dict[str, Any]:
    """A scheduler object reduced to what the job mappers read (no managedFields, templates, usage): from a
    decoded object or read field by field from an undecoded one (``KubeSource.iter_reusing``)."""

    def part(name: str, keys: tuple[str, ...]) -> dict[str, Any]:
        value = obj.get(name)
        if not isinstance(value, dict | simdjson.Object):
            return {}
        return {k: _plain(value.get(k)) for k in keys if k in value}

    return {
        "metadata": part(
            "metadata", ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences")
        ),
        "spec": part("spec", ("queue", "queueName", "preemptibility")),
        "status": part("status", status_keys),
    }


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
        self.pods: _Pods | None = None
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
            self._gpu_series_asked = self._background.submit(self._gpu_series)
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
            self._gpus(fetched)

    def record(self, kind: str, items: list[Observed] | None, source: str = "k8s") -> None:
        if items is None:
            self.summary.skipped_kinds.append(kind)
            return
        # One read of the kind's open versions (digests only), then the changed objects are written in
        # transactions of at most 500: a failure leaves whole entities recorded or not, never half an entity.
        result = record_states(
            self.cluster, items, self.at, source=source, batch=BATCH, listed_before=self._listed_before(kind)
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

    def _listed_before(self, kind: str) -> datetime | None:
        """When the kind's listing last succeeded before this sweep: a state that changed since changed
        after then (``collectors.inventory.dated``). None for a kind without a listing of its own (GPUs, from
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
        runner = self.runner
        raw_nodes = runner.call("k8s", "list nodes", kube.list_nodes)
        if raw_nodes is not None:
            nodes = [mapping.map_node(n) for n in raw_nodes]
            for node, raw in zip(nodes, raw_nodes, strict=True):
                node.since = latest_transition(raw)
            runner.set_rows("list nodes", len(nodes))
            self.record("node", nodes)
            self.nodes = {o.name: o.state for o in nodes}
        else:
            self.summary.skipped_kinds.append("node")

        # Scheduler objects first: pods need the queue -> project map, jobs the PodGroups/Workloads.
        sched_ok = True
        project_of: dict[tuple[str, str], str] = {}
        index = mapping.SchedulingIndex()
        local_queues: dict[tuple[str, str], str] = {}
        lq_ok = True
        source = scheduler_source(self.scheduler)
        if self.scheduler == "kai":
            kai = KaiSource(kube)
            queues = runner.call("kai", "list queues", kai.list_queues)
            podgroups = runner.call(
                "kai",
                "list podgroups",
                lambda: [
                    _slim(o, ("schedulingConditions",))
                    for o in kube.iter_custom(
                        kai_api.GROUP,
                        kai_api.PODGROUP_VERSION,
                        "podgroups",
                        reuse=lambda o: _slim(o, ("schedulingConditions",)),
                    )
                ],
            )
            namespaces = runner.call("k8s", "list namespaces", kube.list_namespaces)
            sched_ok = queues is not None and podgroups is not None
            index = mapping.SchedulingIndex.build(podgroups or [])
            qs = (
                mapping.map_kai_queues(queues, mapping.kai_namespaces(namespaces))
                if queues is not None and namespaces is not None
                else None
            )
            departments = mapping.map_kai_departments(queues) if queues is not None else None
            if qs is not None and departments is not None:
                mapping.link_departments(qs, departments)
            self._record_queues(qs, actors, source)
            self.record("department", departments, source)
            project_of = {
                ("", o.name): o.state["project"] for o in qs or [] if o.kind == "queue" and o.state["project"]
            }
        elif self.scheduler == "kueue":
            kueue = KueueSource(kube)
            cqs = runner.call("kueue", "list clusterqueues", kueue.list_cluster_queues)
            lqs = runner.call("kueue", "list localqueues", kueue.list_local_queues)
            workloads = runner.call(
                "kueue",
                "list workloads",
                lambda: [
                    _slim(o, ("conditions", "admission"))
                    for o in kube.iter_custom(
                        kueue_api.GROUP,
                        kueue_api.VERSION,
                        "workloads",
                        reuse=lambda o: _slim(o, ("conditions", "admission")),
                    )
                ],
            )
            runner.call("kueue", "list resourceflavors", kueue.list_resource_flavors)
            sched_ok = cqs is not None and lqs is not None and workloads is not None
            lq_ok = lqs is not None
            local_queues = mapping.kueue_local_queue_map(lqs or [])
            project_of = dict(local_queues)
            index = mapping.SchedulingIndex.build(workloads or [], uid_label="kueue.x-k8s.io/job-uid")
            cohorts = runner.call("kueue", "list cohorts", lambda: _cohorts(kube))
            qs = mapping.map_kueue_queues(cqs, lqs) if cqs is not None and lqs is not None else None
            departments = (
                mapping.map_kueue_departments(cohorts, cqs)
                if cohorts is not None and cqs is not None
                else None
            )
            if qs is not None and departments is not None:
                mapping.link_departments(qs, departments)
            self._record_queues(qs, actors, source)
            self.record("department", departments, source)

        # Kueue: a pod's queue label names a LocalQueue; without the LocalQueue list its project is unknown,
        # and the pods are listed (jobs need them) but not recorded.
        pods = self._streamed("list pods", lambda: self._list_pods(kube, project_of, record=lq_ok))
        if pods is not None:
            runner.set_rows("list pods", len(pods))
            if lq_ok:  # recorded as listed, 2,000 at a time: what is open and was not listed is gone
                self.summary.add(self._absent("pod", pods, "k8s"))
                self.progress("recorded pods", len(pods))
            else:
                self.summary.skipped_kinds.append("pod")
            self.pods = _Pods()
            gpu_memory = {n: (st.get("gpu_memory_mib") or None) for n, st in (self.nodes or {}).items()}
            self.pods.shares = mapping.gpu_shares(
                [p for p in pods if p.state.get("gpu_share") or p.state.get("reservation_for")], gpu_memory
            )
            for p in pods:
                if p.state.get("job"):
                    self.pods.by_job[(p.namespace, p.state["job"])].append(_lite(p))
                    self.pods.marks[(p.namespace, p.state["job"])].append(
                        (p.name, p.digest or state_hash(p.state))
                    )
                if p.state.get("node") and p.state.get("phase") in ("Running", "Pending"):
                    self.pods.on_node[p.state["node"]].add(f"{p.namespace}/{p.name}")
            del pods
        else:
            self.summary.skipped_kinds.append("pod")

        if self.pods is None or not sched_ok:
            self.summary.skipped_kinds.append("job")
            return
        queue_project = {q: p for (_, q), p in project_of.items()}
        jobs = self._streamed("list jobs", lambda: self._list_jobs(kube, index, queue_project, local_queues))
        if jobs is None:
            self.summary.skipped_kinds.append("job")
            return
        runner.set_rows("list jobs", len(jobs))
        self.summary.add(self._absent("job", jobs, "k8s"))  # recorded as listed: what was not listed is gone
        self.progress("recorded jobs", len(jobs))

    def _streamed(self, call: str, fn: Callable[[], list[Observed]]) -> list[Observed] | None:
        """A Kubernetes listing recorded as it is listed (:class:`_Streamed`): its source's failure is recorded
        as the call's, the database's is the sweep's and raised."""
        try:
            return self.runner.call("k8s", call, fn, passes=(_RecordFailed,))
        except _RecordFailed as failed:
            raise failed.cause from None

    def _record_queues(self, qs: list[Observed] | None, actors: dict[str, str], source: str) -> None:
        if qs is None:
            self.summary.skipped_kinds += ["project", "queue"]
            return
        for o in qs:
            who = actors.get(o.state.get("project") or o.name)
            if who:
                o.actor = who
        self.record("project", [o for o in qs if o.kind == "project"], source)
        self.record("queue", [o for o in qs if o.kind == "queue"], source)

    def _list_pods(
        self, kube: KubeSource, project_of: dict[tuple[str, str], str], *, record: bool
    ) -> list[Observed]:
        """The pods, mapped (those unchanged since the last listing taken from the memo, not mapped again) and,
        when ``record``, recorded as they are mapped (:class:`_Streamed`). Returned, and kept in the memo, as
        :func:`_kept` keeps them once recorded."""
        memory = {n: st.get("gpu_memory_mib") for n, st in (self.nodes or {}).items()}
        memo = _memo(self.cluster, "pods", hash(frozenset(project_of.items())))
        stream = _Streamed(self, "pod", memo, record=record, keep=_kept)

        def identify(raw: Any) -> tuple[tuple[str, str], tuple[Any, ...], Any]:
            """A pod's (namespace, name), mark and node's GPU memory, read from it decoded or not."""
            m = raw.get("metadata") or {}
            node = (raw.get("spec") or {}).get("nodeName")
            gpu_memory = memory.get(node) if node else None
            name = (str(m.get("namespace") or ""), str(m.get("name") or ""))
            return name, (m.get("uid"), m.get("resourceVersion"), gpu_memory), gpu_memory

        def known(name: tuple[str, str], mark: tuple[Any, ...]) -> Observed | None:
            """The pod as mapped last time, when this is the same object version (kept in ``fresh``)."""
            return stream.recall(name, mark if mark[1] else None)

        def reuse(raw: Any) -> Observed | None:
            try:
                return known(*identify(raw)[:2])
            except (AttributeError, TypeError):  # malformed (metadata not an object…): decoded and mapped
                return None

        with stream:
            for n, raw in enumerate(kube.iter_pods(reuse), 1):
                if isinstance(raw, Observed):  # reused (undecoded): already in fresh
                    stream.add((raw.namespace, raw.name), None, raw)
                else:
                    name, mark, gpu_memory = identify(raw)
                    found = known(name, mark)
                    if found is not None:  # the same object version as last time: already in fresh
                        stream.add(name, None, found)
                    else:
                        obs = mapping.map_pod(raw, project_of, gpu_memory)
                        obs.digest = state_hash(obs.state)
                        obs.since = latest_transition(raw)
                        stream.add(name, mark if mark[1] else None, obs)
                if n % 2000 == 0:
                    self.progress("pods", n)
        self.progress("pods", len(stream.out))
        return stream.out

    def _list_jobs(
        self,
        kube: KubeSource,
        index: mapping.SchedulingIndex,
        queue_project: dict[str, str],
        local_queues: dict[tuple[str, str], str],
    ) -> list[Observed]:
        """The jobs, mapped (those whose job, scheduling object and pods are unchanged taken from the memo) and
        recorded as they are mapped (:class:`_Streamed`); the memo keeps a recorded job's digest only."""
        assert self.pods is not None
        context = hash((self.scheduler, frozenset(queue_project.items()), frozenset(local_queues.items())))
        memo = _memo(self.cluster, "jobs", context)
        stream = _Streamed(self, "job", memo, record=True, keep=_kept_job)
        marks = self.pods.marks

        def known(job: Any) -> tuple[tuple[str, str], tuple[Any, ...], Any, str | None]:
            """The job's name, mark, scheduling object and resourceVersion (None: nothing says it is unchanged),
            read from a decoded job or an undecoded one alike."""
            m = job.get("metadata") or {}
            name = (str(m.get("namespace") or ""), str(m.get("name") or ""))
            group = index.find(job) if self.scheduler in ("kai", "kueue") else None
            group_rv = None if group is None else (group.get("metadata") or {}).get("resourceVersion")
            # Without resourceVersions (a server that omits them) nothing says a job is unchanged: mapped anew.
            rv = m.get("resourceVersion") if group is None or group_rv else None
            return name, (m.get("uid"), rv, group_rv, tuple(marks.get(name, ()))), group, rv

        def reuse(job: Any) -> Observed | None:
            """The job as mapped last time: the same job, scheduling object and pods as then."""
            if not isinstance(job.get("metadata"), simdjson.Object):
                return None
            name, mark, _, rv = known(job)
            return stream.recall(name, mark if rv else None)

        with stream:
            for job in kube.iter_reusing("list jobs", kube.batch.list_job_for_all_namespaces, reuse):
                self._map_job(job, stream, known, index, queue_project, local_queues)
        self.progress("jobs", len(stream.out))
        return stream.out

    def _map_job(
        self,
        job: Any,
        stream: _Streamed,
        known: Callable[[Any], tuple[tuple[str, str], tuple[Any, ...], Any, str | None]],
        index: mapping.SchedulingIndex,
        queue_project: dict[str, str],
        local_queues: dict[tuple[str, str], str],
    ) -> None:
        """One listed job into ``stream``: reused from the memo, or mapped from the job, its scheduling object
        and its pods."""
        assert self.pods is not None
        if isinstance(job, Observed):  # reused: already in fresh
            stream.add((job.namespace, job.name), None, job)
            return
        name, mark, group, rv = known(job)
        kept = stream.recall(name, mark if rv else None)
        if kept is not None:  # the same job, scheduling object and pods as last time: the same state
            stream.add(name, None, kept)
            return
        jpods = self.pods.by_job.get(name, [])
        if self.scheduler == "kai":
            js = mapping.kai_job_scheduling(group, jpods, queue_project)
        elif self.scheduler == "kueue":
            js = mapping.kueue_job_scheduling(group, jpods, local_queues)
        else:
            js = mapping.pod_job_scheduling(jpods)
        # A job's state follows its PodGroup/Workload and its pods: the latest of their times dates it.
        since = max(
            (t for t in (latest_transition(job, group), *(p.since for p in jpods)) if t is not None),
            default=None,
        )
        obs = mapping.map_job(
            job,
            pod_phases=[p.state.get("phase", "") for p in jpods],
            queue=js.queue,
            project=js.project,
            scheduling=js.scheduling,
            admitted=js.admitted,
            preemptible=js.preemptible,
            waiting_for_admission=js.waiting_for_admission,
        )
        obs.since = since
        obs.digest = state_hash(obs.state)
        stream.add(name, mark if rv else None, obs)

    #
    # GPUs (DCGM through Prometheus)
    #

    def _gpu_answers(self) -> GpuAnswers | None:
        """The GPU inventory query and every fact query, answered but not decoded (HTTP only: runs in a
        worker thread). The watch's GPU poll compares them with the last poll's and decodes only a change.

        None when Prometheus failed (recorded once: after the first failure the others are not waited on).
        """
        at, runner = self.at, self.runner
        prom = PrometheusSource(self.cluster.prometheus_url)
        inventory = runner.call(
            "prometheus", f"query {promql.GPU_INVENTORY}", lambda: prom.answer(promql.GPU_INVENTORY, at)
        )
        if inventory is None:
            return None
        facts: dict[str, Answer | None] = {}
        for key, query in promql.GPU_STATE_QUERIES.items():
            answer = runner.call("prometheus", f"query {query}", partial(prom.answer, query, at))
            if answer is None:
                return None
            if answer.empty() and not inventory.empty():
                metric = promql.GPU_STATE_METRICS[key]
                why = promql.ABSENT_WHY.get(metric, "the exporter does not export it")
                runner.note(
                    "prometheus",
                    f"no data {metric}",
                    f"no data: {metric} has no series ({why}); GPU {key} is unknown, not zero",
                )
                facts[key] = None
            else:
                facts[key] = answer
        return inventory, facts

    def _gpu_decoded(self, answers: GpuAnswers | None) -> GpuSeries | None:
        """The answers' series; None (the call's row says why) when one cannot be read."""
        if answers is None:
            return None
        inventory, facts = answers
        current = promql.GPU_INVENTORY
        try:
            decoded = inventory.series()
            series: dict[str, list[Series] | None] = {}
            for key, answer in facts.items():
                current = promql.GPU_STATE_QUERIES[key]
                series[key] = answer.series() if answer is not None else None
        except SourceError as exc:
            self.runner.unreadable("prometheus", f"query {current}", exc)
            return None
        return decoded, series

    def _gpu_series(self) -> tuple[GpuAnswers | None, GpuSeries | None]:
        """The answers and their series (a sweep maps them in any case: the worker thread decodes them)."""
        answers = self._gpu_answers()
        return answers, self._gpu_decoded(answers)

    def _gpus(self, fetched: GpuSeries | None) -> None:
        """GPUs need the inventory query and every fact query; hosts resolve against the nodes just listed
        (or, if that listing failed, the nodes recorded last time)."""
        cluster, runner = self.cluster, self.runner
        if fetched is None:
            self.summary.skipped_kinds.append("gpu")
            return
        inventory, facts = fetched
        open_states = EntityVersion.objects.filter(cluster=cluster, valid_to__isnull=True)
        nodes = self.nodes
        if nodes is None:
            nodes = dict(open_states.filter(kind="node").values_list("entity__name", "state"))
        # The last states of the GPUs that stopped reporting (map_gpus keeps them, missing): only theirs are
        # read, not the fleet's (1,600 JSON states decoded at every sweep to use none).
        reporting = {dcgm_identity(s.labels)["uuid"] for s in inventory}
        open_gpus = open_states.filter(kind="gpu")
        silent = set(open_gpus.values_list("entity__name", flat=True)) - reporting
        if not silent:
            previous = {}
        elif len(silent) <= 500:  # an IN list SQLite takes; more (a fleet gone silent): all, then filtered
            previous = dict(open_gpus.filter(entity__name__in=silent).values_list("entity__name", "state"))
        else:
            rows = open_gpus.values_list("entity__name", "state")
            previous = {name: state for name, state in rows if name in silent}
        gpus = mapping.map_gpus(
            inventory,
            facts,
            nodes=nodes,
            previous=previous,
            running_pods_on_node=self.pods.on_node if self.pods else None,
            shares=self.pods.shares if self.pods else None,
        )
        runner.set_rows(f"query {promql.GPU_INVENTORY}", len(inventory))
        self.record("gpu", gpus, "prometheus")
        if any(g.state.get("mig") or g.state.get("shares") for g in gpus) or self._had_slices():
            record_slices(cluster, gpus, self.at)

    def _had_slices(self) -> bool:
        from collectors.models import GpuSlice

        return GpuSlice.objects.filter(cluster=self.cluster, valid_to__isnull=True).exists()

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
