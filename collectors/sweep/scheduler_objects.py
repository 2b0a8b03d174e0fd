"""The scheduler objects a sweep lists: KAI's queues and PodGroups, Kueue's ClusterQueues, LocalQueues, Workloads
and Cohorts. Queues, projects and departments are recorded; PodGroups and Workloads are reduced to what the job
mappers read (:func:`scheduling_fields`) and handed to them (:class:`ListedScheduling`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import simdjson

from collectors import mapping
from collectors.sources import kai as kai_api
from collectors.sources import kueue as kueue_api
from collectors.sources.errors import SourceError
from collectors.sources.kai import KaiSource
from collectors.sources.kubernetes import KubeSource
from collectors.sources.kueue import KueueSource

if TYPE_CHECKING:
    from collectors.sweep.inventory import Sweep


def list_cohorts(kube: KubeSource) -> list[dict[str, Any]]:
    """Kueue Cohort objects (kueue.x-k8s.io/v1alpha1); a cluster without the Cohort API has none, not an error."""
    try:
        return list(kube.iter_custom(kueue_api.GROUP, kueue_api.COHORT_VERSION, "cohorts"))
    except SourceError as exc:
        if exc.status == 404:
            return []
        raise


def scheduler_source(scheduler: str) -> str:
    return {"kai": "kai", "kueue": "kueue"}.get(scheduler, "k8s")


def _plain(value: Any) -> Any:
    """A value read from a ``simdjson`` page as plain dicts and lists (a decoded one as it is)."""
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def scheduling_fields(obj: Any, status_keys: tuple[str, ...]) -> dict[str, Any]:
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


@dataclass
class ListedScheduling:
    """What a sweep's pods and jobs need of the scheduler objects it listed."""

    ok: bool = True  # every listing the jobs depend on answered
    project_of: dict[tuple[str, str], str] = field(
        default_factory=dict
    )  # (namespace, queue label) -> project
    index: mapping.SchedulingIndex = field(default_factory=mapping.SchedulingIndex)  # PodGroups/Workloads
    local_queues: dict[tuple[str, str], str] = field(
        default_factory=dict
    )  # Kueue: LocalQueue -> ClusterQueue
    # Kueue: a pod's queue label names a LocalQueue; without the LocalQueue list its project is unknown.
    local_queues_ok: bool = True


def list_kai(sweep: Sweep, kube: KubeSource, actors: dict[str, str]) -> ListedScheduling:
    """KAI's queues (projects, queues, departments) recorded, and its PodGroups listed for the jobs."""
    runner, source = sweep.runner, scheduler_source(sweep.scheduler)
    kai = KaiSource(kube)
    queues = runner.call("kai", "list queues", kai.list_queues)
    podgroups = runner.call(
        "kai",
        "list podgroups",
        lambda: [
            scheduling_fields(o, ("schedulingConditions",))
            for o in kube.iter_custom(
                kai_api.GROUP,
                kai_api.PODGROUP_VERSION,
                "podgroups",
                reuse=lambda o: scheduling_fields(o, ("schedulingConditions",)),
            )
        ],
    )
    namespaces = runner.call("k8s", "list namespaces", kube.list_namespaces)
    index = mapping.SchedulingIndex.build(podgroups or [])
    qs = (
        mapping.map_kai_queues(queues, mapping.kai_namespaces(namespaces))
        if queues is not None and namespaces is not None
        else None
    )
    departments = mapping.map_kai_departments(queues) if queues is not None else None
    if qs is not None and departments is not None:
        mapping.link_departments(qs, departments)
    sweep.record_queues(qs, actors, source)
    sweep.record("department", departments, source)
    return ListedScheduling(
        ok=queues is not None and podgroups is not None,
        project_of={
            ("", o.name): o.state["project"] for o in qs or [] if o.kind == "queue" and o.state["project"]
        },
        index=index,
    )


def list_kueue(sweep: Sweep, kube: KubeSource, actors: dict[str, str]) -> ListedScheduling:
    """Kueue's ClusterQueues, LocalQueues and Cohorts recorded, and its Workloads listed for the jobs."""
    runner, source = sweep.runner, scheduler_source(sweep.scheduler)
    kueue = KueueSource(kube)
    cqs = runner.call("kueue", "list clusterqueues", kueue.list_cluster_queues)
    lqs = runner.call("kueue", "list localqueues", kueue.list_local_queues)
    workloads = runner.call(
        "kueue",
        "list workloads",
        lambda: [
            scheduling_fields(o, ("conditions", "admission"))
            for o in kube.iter_custom(
                kueue_api.GROUP,
                kueue_api.VERSION,
                "workloads",
                reuse=lambda o: scheduling_fields(o, ("conditions", "admission")),
            )
        ],
    )
    runner.call("kueue", "list resourceflavors", kueue.list_resource_flavors)
    local_queues = mapping.kueue_local_queue_map(lqs or [])
    index = mapping.SchedulingIndex.build(workloads or [], uid_label="kueue.x-k8s.io/job-uid")
    cohorts = runner.call("kueue", "list cohorts", lambda: list_cohorts(kube))
    qs = mapping.map_kueue_queues(cqs, lqs) if cqs is not None and lqs is not None else None
    departments = (
        mapping.map_kueue_departments(cohorts, cqs) if cohorts is not None and cqs is not None else None
    )
    if qs is not None and departments is not None:
        mapping.link_departments(qs, departments)
    sweep.record_queues(qs, actors, source)
    sweep.record("department", departments, source)
    return ListedScheduling(
        ok=cqs is not None and lqs is not None and workloads is not None,
        project_of=dict(local_queues),
        index=index,
        local_queues=local_queues,
        local_queues_ok=lqs is not None,
    )
