"""The scheduler objects a sweep lists (KAI PodGroups, Kueue Workloads and Cohorts), reduced to what the job
mappers read, and which source a cluster's scheduler objects are recorded as."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import simdjson

from collectors import mapping
from collectors.sources import kueue as kueue_api
from collectors.sources.errors import SourceError
from collectors.sources.kubernetes import KubeSource


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
