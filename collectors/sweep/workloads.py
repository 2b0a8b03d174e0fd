"""Pods and jobs: listed, mapped (what is unchanged since the last listing taken from the memo) and recorded
as they are listed, for one sweep."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import simdjson

from collectors import mapping
from collectors.mapping.transitions import latest_transition
from collectors.observed import Observed, state_hash
from collectors.sources.kubernetes import KubeSource
from collectors.sweep.listing_memo import memo_of, remembered_job, remembered_pod
from collectors.sweep.listing_recorder import ListingRecorder

if TYPE_CHECKING:
    from collectors.sweep.inventory import Sweep


def list_pods(
    sweep: Sweep, kube: KubeSource, project_of: dict[tuple[str, str], str], *, record: bool
) -> list[Observed]:
    """The pods, mapped (those unchanged since the last listing taken from the memo, not mapped again) and,
    when ``record``, recorded as they are mapped (:class:`ListingRecorder`). Returned, and kept in the memo, as
    :func:`remembered_pod` keeps them once recorded."""
    memory = {n: st.get("gpu_memory_mib") for n, st in (sweep.nodes or {}).items()}
    memo = memo_of(sweep.cluster, "pods", hash(frozenset(project_of.items())))
    stream = ListingRecorder(sweep, "pod", memo, record=record, keep=remembered_pod)

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
                sweep.progress("pods", n)
    sweep.progress("pods", len(stream.out))
    return stream.out


def list_jobs(
    sweep: Sweep,
    kube: KubeSource,
    index: mapping.SchedulingIndex,
    queue_project: dict[str, str],
    local_queues: dict[tuple[str, str], str],
) -> list[Observed]:
    """The jobs, mapped (those whose job, scheduling object and pods are unchanged taken from the memo) and
    recorded as they are mapped (:class:`ListingRecorder`); the memo keeps a recorded job's digest only."""
    assert sweep.pods is not None
    context = hash((sweep.scheduler, frozenset(queue_project.items()), frozenset(local_queues.items())))
    memo = memo_of(sweep.cluster, "jobs", context)
    stream = ListingRecorder(sweep, "job", memo, record=True, keep=remembered_job)
    marks = sweep.pods.marks

    def known(job: Any) -> tuple[tuple[str, str], tuple[Any, ...], Any, str | None]:
        """The job's name, mark, scheduling object and resourceVersion (None: nothing says it is unchanged),
        read from a decoded job or an undecoded one alike."""
        m = job.get("metadata") or {}
        name = (str(m.get("namespace") or ""), str(m.get("name") or ""))
        group = index.find(job) if sweep.scheduler in ("kai", "kueue") else None
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
            map_job(sweep, job, stream, known, index, queue_project, local_queues)
    sweep.progress("jobs", len(stream.out))
    return stream.out


def map_job(
    sweep: Sweep,
    job: Any,
    stream: ListingRecorder,
    known: Callable[[Any], tuple[tuple[str, str], tuple[Any, ...], Any, str | None]],
    index: mapping.SchedulingIndex,
    queue_project: dict[str, str],
    local_queues: dict[tuple[str, str], str],
) -> None:
    """One listed job into ``stream``: reused from the memo, or mapped from the job, its scheduling object
    and its pods."""
    assert sweep.pods is not None
    if isinstance(job, Observed):  # reused: already in fresh
        stream.add((job.namespace, job.name), None, job)
        return
    name, mark, group, rv = known(job)
    kept = stream.recall(name, mark if rv else None)
    if kept is not None:  # the same job, scheduling object and pods as last time: the same state
        stream.add(name, None, kept)
        return
    jpods = sweep.pods.by_job.get(name, [])
    if sweep.scheduler == "kai":
        js = mapping.kai_job_scheduling(group, jpods, queue_project)
    elif sweep.scheduler == "kueue":
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
