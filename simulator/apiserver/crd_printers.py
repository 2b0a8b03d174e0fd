"""Tables for KAI's and Kueue's custom resources, from their CRDs' ``additionalPrinterColumns``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .cells import AGE_DOC, NAME, Row, column, since


def json_path(obj: Any, path: str) -> Any:
    """The simple JSONPath subset CRD printer columns use: .a.b and .a[?(@.type=='X')].b."""
    cur: Any = obj
    for part in re.findall(r"(?:[^.\[]|\[[^\]]*\])+", path):
        if cur is None:
            return None
        if "[?(@." in part:
            field, _, cond = part.partition("[?(@.")
            key, _, value = cond.rstrip(")]").partition("==")
            items = cur.get(field) if isinstance(cur, dict) else None
            cur = next(
                (i for i in items or [] if isinstance(i, dict) and str(i.get(key)) == value.strip("'\"")),
                None,
            )
        else:
            cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def crd_cell(value: Any, type_: str, now: datetime) -> Any:
    if value is None:
        return None
    if type_ == "date":
        return since(str(value), now)
    if type_ == "integer":
        return int(value) if isinstance(value, int | float) else value
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def crd_printer(
    columns: list[tuple[str, str, str, int, str]],
) -> tuple[list[dict], Callable[[dict, datetime], Row]]:
    defs = [NAME] + [
        column(name, type_, priority, description) for name, path, type_, priority, description in columns
    ]

    def row(obj: dict, now: datetime) -> Row:
        return [obj["metadata"]["name"]] + [
            crd_cell(json_path(obj, path), type_, now) for _, path, type_, _, _ in columns
        ]

    return defs, row


KAI_QUEUE = crd_printer(
    [
        ("Priority", ".spec.priority", "string", 0, ""),
        ("Parent", ".spec.parentQueue", "string", 0, ""),
        ("Children", ".status.childQueues", "string", 0, ""),
        ("DisplayName", ".spec.displayName", "string", 0, ""),
    ]
)
DEFAULT_CRD = crd_printer(
    [("Age", ".metadata.creationTimestamp", "date", 0, AGE_DOC)]
)  # PodGroup, ResourceFlavor
CLUSTER_QUEUE = crd_printer(
    [
        ("Cohort", ".spec.cohort", "string", 0, "Cohort that this ClusterQueue belongs to"),
        (
            "Strategy",
            ".spec.queueingStrategy",
            "string",
            1,
            "The queueing strategy used to prioritize workloads",
        ),
        ("Pending Workloads", ".status.pendingWorkloads", "integer", 0, "Number of pending workloads"),
        (
            "Admitted Workloads",
            ".status.admittedWorkloads",
            "integer",
            1,
            "Number of admitted workloads that haven't finished yet",
        ),
    ]
)
LOCAL_QUEUE = crd_printer(
    [
        ("ClusterQueue", ".spec.clusterQueue", "string", 0, "Backing ClusterQueue"),
        ("Pending Workloads", ".status.pendingWorkloads", "integer", 0, "Number of pending workloads"),
        (
            "Admitted Workloads",
            ".status.admittedWorkloads",
            "integer",
            0,
            "Number of admitted workloads that haven't finished yet.",
        ),
    ]
)
WORKLOAD = crd_printer(
    [
        ("Queue", ".spec.queueName", "string", 0, "Name of the queue this workload was submitted to"),
        (
            "Reserved in",
            ".status.admission.clusterQueue",
            "string",
            0,
            "Name of the ClusterQueue where the workload is reserving quota",
        ),
        ("Admitted", ".status.conditions[?(@.type=='Admitted')].status", "string", 0, "Admission status"),
        ("Finished", ".status.conditions[?(@.type=='Finished')].status", "string", 0, "Workload finished"),
        ("Age", ".metadata.creationTimestamp", "date", 0, "Time this workload was created"),
    ]
)
