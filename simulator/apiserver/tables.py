"""Server-side Table output (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``), as kubectl asks for it.

A real API server answers ``kubectl get`` with a ``meta.k8s.io/v1`` Table: column definitions and one row
of cells per object, always with the wide (priority 1) cells, which kubectl hides unless ``-o wide``. The
columns and how each cell is computed follow the API server's printers (pkg/printers/internalversion) for
built-in kinds and the CRDs' ``additionalPrinterColumns`` for KAI and Kueue objects. Ages are relative to
the world's clock (the wall clock in live mode).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from .cells import Row
from .crd_printers import CLUSTER_QUEUE, DEFAULT_CRD, KAI_QUEUE, LOCAL_QUEUE, WORKLOAD
from .printers import (
    EVENT_COLUMNS,
    JOB_COLUMNS,
    LEASE_COLUMNS,
    NAMESPACE_COLUMNS,
    NODE_COLUMNS,
    POD_COLUMNS,
    event_row,
    job_row,
    lease_row,
    namespace_row,
    node_row,
    pod_row,
)

# store resource -> (column definitions, row function)
PRINTERS: dict[str, tuple[list[dict], Callable[[dict, datetime], Row]]] = {
    "nodes": (NODE_COLUMNS, node_row),
    "pods": (POD_COLUMNS, pod_row),
    "events": (EVENT_COLUMNS, event_row),
    "jobs": (JOB_COLUMNS, job_row),
    "namespaces": (NAMESPACE_COLUMNS, namespace_row),
    "leases": (LEASE_COLUMNS, lease_row),
    "queues": KAI_QUEUE,
    "podgroups": DEFAULT_CRD,
    "resourceflavors": DEFAULT_CRD,
    "clusterqueues": CLUSTER_QUEUE,
    "localqueues": LOCAL_QUEUE,
    "workloads": WORKLOAD,
}


def wants_table(accept: str | None) -> str | None:
    """The Table version the Accept header asks for first (``v1`` / ``v1beta1``), or None for plain JSON.

    kubectl sends ``application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;
    g=meta.k8s.io,application/json``: the first acceptable media type wins, as on the real server.
    """
    for part in (accept or "").split(","):
        fields = [f.strip() for f in part.split(";")]
        params = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        if fields[0] not in ("application/json", "*/*", "application/*"):
            continue
        if (
            params.get("as") == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in ("v1", "v1beta1")
        ):
            return params["v"]
        if "as" not in params:
            return None
    return None


def _row_object(obj: dict, include: str, version: str) -> dict | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}", "metadata": meta}


def table(
    resource: str,
    objects: list[dict],
    now: datetime,
    version: str = "v1",
    include: str = "Metadata",
    list_meta: dict | None = None,
    headers: bool = True,
) -> dict:
    """The Table for ``objects`` of ``resource`` (list or single get); ``include``: includeObject=None|Metadata|Object."""
    columns, row = PRINTERS.get(resource, DEFAULT_CRD)
    out: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": dict(list_meta or {}),
        "columnDefinitions": columns if headers else None,
        "rows": [],
    }
    for obj in objects:
        entry: dict[str, Any] = {"cells": row(obj, now)}
        embedded = _row_object(obj, include, version)
        if embedded is not None:
            entry["object"] = embedded
        out["rows"].append(entry)
    return out
