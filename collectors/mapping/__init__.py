"""Raw objects from the sources → :class:`~collectors.observed.Observed` states, exactly as docs/inventory.md
fixes them. Pure functions: no database, no network; tested on recorded real-format payloads."""

from __future__ import annotations

from collectors.mapping.core import job_phase, map_job, map_node, map_pod
from collectors.mapping.departments import link_departments, map_kai_departments, map_kueue_departments
from collectors.mapping.gpus import CRITICAL_XIDS, gpu_shares, map_gpus
from collectors.mapping.job_scheduling import (
    JobScheduling,
    SchedulingIndex,
    kai_job_scheduling,
    kueue_job_scheduling,
    pod_job_scheduling,
)
from collectors.mapping.queues import (
    kai_namespaces,
    kueue_local_queue_map,
    map_kai_queues,
    map_kueue_queues,
    most_common_namespace,
)

__all__ = [
    "CRITICAL_XIDS",
    "JobScheduling",
    "SchedulingIndex",
    "job_phase",
    "kai_job_scheduling",
    "kai_namespaces",
    "kueue_job_scheduling",
    "kueue_local_queue_map",
    "map_gpus",
    "gpu_shares",
    "map_kai_departments",
    "map_kueue_departments",
    "link_departments",
    "map_job",
    "map_kai_queues",
    "map_kueue_queues",
    "map_node",
    "map_pod",
    "most_common_namespace",
    "pod_job_scheduling",
]
