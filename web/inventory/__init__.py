"""Entity pages: every project, queue, job, pod, node and GPU, rendered as of the time cursor.

One module per family (docs/conventions.md §1); page queries live in ``collectors.queries``.
"""

from __future__ import annotations

from web.inventory.joblist import job_list
from web.inventory.jobs import job_detail, job_why
from web.inventory.nodes import gpu_detail, node_detail
from web.inventory.pods import pod_detail, pod_logs
from web.inventory.policy import department_detail, project_detail, queue_detail

__all__ = [
    "department_detail",
    "gpu_detail",
    "job_detail",
    "job_list",
    "job_why",
    "node_detail",
    "pod_detail",
    "pod_logs",
    "project_detail",
    "queue_detail",
]
