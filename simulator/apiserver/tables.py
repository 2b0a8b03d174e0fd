"""Server-side Table output (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``), as kubectl asks for it.

A real API server answers ``kubectl get`` with a ``meta.k8s.io/v1`` Table: column definitions and one row
of cells per object, always with the wide (priority 1) cells, which kubectl hides unless ``-o wide``. The
columns and how each cell is computed follow the API server's printers (pkg/printers/internalversion) for
built-in kinds and the CRDs' ``additionalPrinterColumns`` for KAI and Kueue objects. Ages are relative to
the world's clock (the wall clock in live mode).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Row = list[Any]

_NAME_DOC = "Name must be unique within a namespace. Cannot be updated."
_AGE_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created."


def _col(name: str, type_: str = "string", priority: int = 0, description: str = "", fmt: str = "") -> dict:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


NAME = _col("Name", fmt="name", description=_NAME_DOC)
AGE = _col("Age", description=_AGE_DOC)


def human_duration(seconds: float) -> str:
    """kubectl's AGE: apimachinery's duration.HumanDuration (two significant units below 8 h, one above)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _parse(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None


def since(ts: str | None, now: datetime) -> str:
    """translateTimestampSince: '<unknown>' for a missing time."""
    t = _parse(ts)
    if t is None:
        return "<unknown>"
    return human_duration((now - t.astimezone(UTC)).total_seconds())


def _age(obj: dict, now: datetime) -> str:
    return since(obj.get("metadata", {}).get("creationTimestamp"), now)


#
# Built-in kinds (the API server's printers)
#

NODE_COLUMNS = [
    NAME,
    _col("Status", description="The status of the node"),
    _col("Roles", description="The roles of the node"),
    AGE,
    _col("Version", description="Kubelet Version reported by the node."),
    _col("Internal-IP", priority=1, description="List of addresses reachable to the node."),
    _col("External-IP", priority=1, description="List of addresses reachable to the node."),
    _col("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release."),
    _col("Kernel-Version", priority=1, description="Kernel Version reported by the node from 'uname -r'."),
    _col("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node."),
]


def node_row(obj: dict, now: datetime) -> Row:
    status = obj.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    states = []
    if "Ready" in conditions:
        states.append("Ready" if conditions["Ready"].get("status") == "True" else "NotReady")
    if not states:
        states.append("Unknown")
    if (obj.get("spec") or {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    labels = obj.get("metadata", {}).get("labels") or {}
    roles = sorted(
        {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a["address"] for a in addresses if a.get("type") == kind), "<none>")

    info = status.get("nodeInfo") or {}
    return [
        obj["metadata"]["name"],
        ",".join(states),
        ",".join(roles) or "<none>",
        _age(obj, now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


POD_COLUMNS = [
    NAME,
    _col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", description="The aggregate status of the containers in this pod."),
    _col(
        "Restarts",
        description="The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    AGE,
    _col("IP", priority=1, description="podIP address allocated to the pod."),
    _col("Node", priority=1, description="NodeName indicates in which node this pod is scheduled."),
    _col(
        "Nominated Node",
        priority=1,
        description="nominatedNodeName is set when this pod preempts other pods.",
    ),
    _col("Readiness Gates", priority=1, description="If specified, all readiness gates will be evaluated."),
]


def pod_status_text(obj: dict) -> str:
    """printPod's STATUS: the phase, overridden by the pod's reason, then a container's waiting/terminated reason."""
    status = obj.get("status") or {}
    reason = status.get("reason") or status.get("phase") or ""
    has_running = False
    for cs in reversed(status.get("containerStatuses") or []):
        state = cs.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            reason = (
                f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
            )
        elif "running" in state and cs.get("ready"):
            has_running = True
    if reason == "Completed" and has_running:
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        reason = "Running" if ready else "NotReady"
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason


def pod_row(obj: dict, now: datetime) -> Row:
    status = obj.get("status") or {}
    statuses = status.get("containerStatuses") or []
    total = len((obj.get("spec") or {}).get("containers") or [])
    ready = sum(1 for cs in statuses if cs.get("ready") and "running" in (cs.get("state") or {}))
    restarts = sum(int(cs.get("restartCount") or 0) for cs in statuses)
    last_restart = None
    for cs in statuses:
        finished = _parse(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
        if finished is not None and (last_restart is None or finished > last_restart):
            last_restart = finished
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    spec = obj.get("spec") or {}
    gates = spec.get("readinessGates") or []
    return [
        obj["metadata"]["name"],
        f"{ready}/{total}",
        pod_status_text(obj),
        restarts_text,
        _age(obj, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


EVENT_COLUMNS = [
    _col("Last Seen", description="The time at which the most recent occurrence of this event was recorded."),
    _col("Type", description="Type of this event (Normal, Warning), new types could be added in the future"),
    _col(
        "Reason",
        description="This should be a short, machine understandable string that gives the reason "
        "for the transition into the object's current status.",
    ),
    _col("Object", description="The object that this event is about."),
    _col(
        "Subobject",
        priority=1,
        description="If referring to a piece of an object instead of an entire "
        "object, this string should contain a valid JSON/Go field access statement.",
    ),
    _col("Source", priority=1, description="The component reporting this event."),
    _col("Message", description="A human-readable description of the status of this operation."),
    _col("First Seen", priority=1, description="The time at which the event was first recorded."),
    _col("Count", priority=1, description="The number of times this event has occurred."),
    _col("Name", priority=1, fmt="name", description=_NAME_DOC),
]


def event_row(obj: dict, now: datetime) -> Row:
    first = obj.get("firstTimestamp") or obj.get("eventTime")
    last = obj.get("lastTimestamp") or first
    involved = obj.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    host = source.get("host") or ""
    return [
        since(last, now),
        obj.get("type", ""),
        obj.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        f"{component}, {host}" if host else component,
        (obj.get("message") or "").strip(),
        since(first, now),
        int(obj.get("count") or 1),
        obj["metadata"]["name"],
    ]


JOB_COLUMNS = [
    NAME,
    _col("Status", description="Status of the job."),
    _col("Completions", description="The number of pods which reached phase Succeeded."),
    _col("Duration", description="Time required to complete the job."),
    AGE,
    _col("Containers", priority=1, description="Names of each container in the template."),
    _col("Images", priority=1, description="Images referenced by each container in the template."),
    _col("Selector", priority=1, description="A label query over pods that should match the pod count."),
]


def _has_condition(obj: dict, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def job_row(obj: dict, now: datetime) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if _has_condition(obj, "Complete"):
        state = "Complete"
    elif _has_condition(obj, "Failed"):
        state = "Failed"
    elif obj.get("metadata", {}).get("deletionTimestamp"):
        state = "Terminating"
    elif _has_condition(obj, "FailureTarget"):
        state = "FailureTarget"
    elif _has_condition(obj, "SuccessCriteriaMet"):
        state = "SuccessCriteriaMet"
    elif _has_condition(obj, "Suspended"):
        state = "Suspended"
    else:
        state = "Running"
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif (spec.get("parallelism") or 1) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    start, end = _parse(status.get("startTime")), _parse(status.get("completionTime"))
    if start is None:
        duration = ""
    else:
        duration = human_duration(((end or now) - start).total_seconds())
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    return [
        obj["metadata"]["name"],
        state,
        completions,
        duration,
        _age(obj, now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


NAMESPACE_COLUMNS = [NAME, _col("Status", description="The status of the namespace"), AGE]


def namespace_row(obj: dict, now: datetime) -> Row:
    return [obj["metadata"]["name"], (obj.get("status") or {}).get("phase", ""), _age(obj, now)]


LEASE_COLUMNS = [
    NAME,
    _col("Holder", description="holderIdentity contains the identity of the holder of a current lease."),
    AGE,
]


def lease_row(obj: dict, now: datetime) -> Row:
    return [obj["metadata"]["name"], (obj.get("spec") or {}).get("holderIdentity", ""), _age(obj, now)]


#
# Custom resources: the CRDs' additionalPrinterColumns (Name first; Age only where the CRD declares it)
#


def _path(obj: Any, path: str) -> Any:
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


def _crd_cell(value: Any, type_: str, now: datetime) -> Any:
    if value is None:
        return None
    if type_ == "date":
        return since(str(value), now)
    if type_ == "integer":
        return int(value) if isinstance(value, int | float) else value
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _crd(columns: list[tuple[str, str, str, int, str]]) -> tuple[list[dict], Callable[[dict, datetime], Row]]:
    defs = [NAME] + [
        _col(name, type_, priority, description) for name, path, type_, priority, description in columns
    ]

    def row(obj: dict, now: datetime) -> Row:
        return [obj["metadata"]["name"]] + [
            _crd_cell(_path(obj, path), type_, now) for _, path, type_, _, _ in columns
        ]

    return defs, row


KAI_QUEUE = _crd(
    [
        ("Priority", ".spec.priority", "string", 0, ""),
        ("Parent", ".spec.parentQueue", "string", 0, ""),
        ("Children", ".status.childQueues", "string", 0, ""),
        ("DisplayName", ".spec.displayName", "string", 0, ""),
    ]
)
DEFAULT_CRD = _crd([("Age", ".metadata.creationTimestamp", "date", 0, _AGE_DOC)])  # PodGroup, ResourceFlavor
CLUSTER_QUEUE = _crd(
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
LOCAL_QUEUE = _crd(
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
WORKLOAD = _crd(
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
