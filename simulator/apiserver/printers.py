"""The API server's printers for the built-in kinds kubectl gets as Tables (its pkg/printers/internalversion):
nodes, pods, events, jobs, namespaces, leases."""

from __future__ import annotations

from datetime import datetime

from ..durations import human as human_duration
from .cells import AGE, NAME, NAME_DOC, Row, age, column, parse_ts, since

NODE_COLUMNS = [
    NAME,
    column("Status", description="The status of the node"),
    column("Roles", description="The roles of the node"),
    AGE,
    column("Version", description="Kubelet Version reported by the node."),
    column("Internal-IP", priority=1, description="List of addresses reachable to the node."),
    column("External-IP", priority=1, description="List of addresses reachable to the node."),
    column("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release."),
    column("Kernel-Version", priority=1, description="Kernel Version reported by the node from 'uname -r'."),
    column("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node."),
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
        age(obj, now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


POD_COLUMNS = [
    NAME,
    column("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
    column("Status", description="The aggregate status of the containers in this pod."),
    column(
        "Restarts",
        description="The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    AGE,
    column("IP", priority=1, description="podIP address allocated to the pod."),
    column("Node", priority=1, description="NodeName indicates in which node this pod is scheduled."),
    column(
        "Nominated Node",
        priority=1,
        description="nominatedNodeName is set when this pod preempts other pods.",
    ),
    column("Readiness Gates", priority=1, description="If specified, all readiness gates will be evaluated."),
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
        finished = parse_ts(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
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
        age(obj, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


EVENT_COLUMNS = [
    column(
        "Last Seen", description="The time at which the most recent occurrence of this event was recorded."
    ),
    column(
        "Type", description="Type of this event (Normal, Warning), new types could be added in the future"
    ),
    column(
        "Reason",
        description="This should be a short, machine understandable string that gives the reason "
        "for the transition into the object's current status.",
    ),
    column("Object", description="The object that this event is about."),
    column(
        "Subobject",
        priority=1,
        description="If referring to a piece of an object instead of an entire "
        "object, this string should contain a valid JSON/Go field access statement.",
    ),
    column("Source", priority=1, description="The component reporting this event."),
    column("Message", description="A human-readable description of the status of this operation."),
    column("First Seen", priority=1, description="The time at which the event was first recorded."),
    column("Count", priority=1, description="The number of times this event has occurred."),
    column("Name", priority=1, fmt="name", description=NAME_DOC),
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
    column("Status", description="Status of the job."),
    column("Completions", description="The number of pods which reached phase Succeeded."),
    column("Duration", description="Time required to complete the job."),
    AGE,
    column("Containers", priority=1, description="Names of each container in the template."),
    column("Images", priority=1, description="Images referenced by each container in the template."),
    column("Selector", priority=1, description="A label query over pods that should match the pod count."),
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
    start, end = parse_ts(status.get("startTime")), parse_ts(status.get("completionTime"))
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
        age(obj, now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


NAMESPACE_COLUMNS = [NAME, column("Status", description="The status of the namespace"), AGE]


def namespace_row(obj: dict, now: datetime) -> Row:
    return [obj["metadata"]["name"], (obj.get("status") or {}).get("phase", ""), age(obj, now)]


LEASE_COLUMNS = [
    NAME,
    column("Holder", description="holderIdentity contains the identity of the holder of a current lease."),
    AGE,
]


def lease_row(obj: dict, now: datetime) -> Row:
    return [obj["metadata"]["name"], (obj.get("spec") or {}).get("holderIdentity", ""), age(obj, now)]
