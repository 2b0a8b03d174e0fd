"""Raw objects from the sources → :class:`~collectors.inventory.Observed` states, exactly as docs/inventory.md
fixes them. Pure functions: no database, no network; tested on recorded real-format payloads."""

from __future__ import annotations

from collectors.mapping.core import job_phase, map_job, map_node, map_pod
from collectors.mapping.gpus import CRITICAL_XIDS, gpu_shares, map_gpus
from collectors.mapping.scheduling import (
    JobScheduling,
    SchedulingIndex,
    kai_job_scheduling,
    kai_namespaces,
    kueue_job_scheduling,
    kueue_local_queue_map,
    link_departments,
    map_kai_departments,
    map_kai_queues,
    map_kueue_departments,
    map_kueue_queues,
    most_common_namespace,
    pod_job_scheduling,
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
