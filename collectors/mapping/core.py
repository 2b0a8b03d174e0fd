"""Nodes, pods and batch/v1 jobs → inventory states (docs/inventory.md)."""

from __future__ import annotations

from typing import Any

from collectors.mapping.kai_sharing import (
    GPU_FRACTION_ANNOTATION,
    GPU_GROUP_LABEL,
    GPU_INDEX_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    RESERVATION_GPU_ANNOTATION,
    RESERVATION_NAMESPACE,
)
from collectors.mapping.metadata import conditions, meta, nodepool, owner, queue_label
from collectors.mapping.quantities import (
    GPU,
    MIG_PREFIX,
    container_gpus,
    container_mig,
    float_quantity,
    int_quantity,
    resource_requests,
)
from collectors.mapping.writers import actor, creator, spec_writer_time, status_writer
from collectors.observed import Observed
from collectors.sources.redact import redact_container_env, redact_text, redact_value
from rcaweb.mig import mig_units

#
# Nodes
#

# State keys written through the object's spec (or metadata) by people and their tools, not by controllers
# reporting status: their changes are attributed to the spec writer (Observed.actor_of).
NODE_SPEC_KEYS = frozenset({"unschedulable", "taints", "labels", "gpu_product", "gpu_memory_mib", "nodepool"})
JOB_SPEC_KEYS = frozenset(
    {
        "pods",
        "requests_per_pod",
        "completions",
        "gpus_per_pod",
        "gpus_total",
        "image",
        "priority_class",
        "preemptible",
        "node_selector",
        "tolerations",
        "scheduler",
        "backoff_limit",
        "active_deadline_seconds",
        "suspended",
        "generation",
    }
)


def _resources(res: dict[str, Any] | None) -> dict[str, Any]:
    res = res or {}
    out: dict[str, Any] = {GPU: int_quantity(res.get(GPU)) or 0}
    for key in ("cpu", "memory"):
        if key in res:
            out[key] = str(res[key])
    for key, value in sorted(res.items()):
        if str(key).startswith(MIG_PREFIX):  # MIG instances, mixed strategy
            out[str(key)] = int_quantity(value) or 0
    return out


def _mig(labels: dict[str, str]) -> dict[str, Any] | None:
    """The MIG layout as the GPU Operator labels it (mig-manager's config and state), None on a MIG-less node."""
    config = labels.get("nvidia.com/mig.config")
    if not config and labels.get("nvidia.com/mig.strategy") is None:
        return None
    return {
        "config": config or "",
        "state": labels.get("nvidia.com/mig.config.state", ""),
        "strategy": labels.get("nvidia.com/mig.strategy", ""),
    }


def map_node(obj: dict[str, Any]) -> Observed:
    m, spec, status = meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    labels = dict(m.get("labels") or {})
    conds = conditions(status.get("conditions"))
    ready_cond = conds.get("Ready") or {}
    ready = ready_cond.get("status") == "True"
    phase = "Ready" if ready else ("NotReady" if ready_cond.get("status") == "False" else "Unknown")
    taints = [
        {"key": t.get("key", ""), "value": t.get("value") or "", "effect": t.get("effect", "")}
        for t in spec.get("taints") or []
    ]
    capacity, allocatable = _resources(status.get("capacity")), _resources(status.get("allocatable"))
    state = {
        "ready": ready,
        "ready_reason": ready_cond.get("reason") or "",
        "unschedulable": bool(spec.get("unschedulable")),
        "taints": taints,
        "labels": labels,
        "gpu_product": labels.get("nvidia.com/gpu.product", ""),
        "gpu_memory_mib": int_quantity(labels.get("nvidia.com/gpu.memory")),
        "nodepool": nodepool(labels),
        "capacity": capacity,
        "allocatable": allocatable,
        "mig": _mig(labels),
        "conditions": conds,
        "addresses": {a.get("type", ""): a.get("address", "") for a in status.get("addresses") or []},
    }
    hot = {
        "phase": phase,
        "ready": ready,
        "gpus": capacity[GPU],
        "gpus_allocatable": allocatable[GPU],
        "node": m.get("name", ""),
    }
    # kubelet rewrites node status every few seconds, so "the newest writer" is always kubelet; a spec write
    # (cordon, taint) newer than the last Ready transition is the better guess for who changed the node.
    who, when = spec_writer_time(obj)
    if not who or (ready_cond.get("since") and when < str(ready_cond["since"])):
        who = actor(obj)
    return Observed(
        kind="node",
        name=m["name"],
        uid=m.get("uid", ""),
        state=state,
        hot=hot,
        actor=who,
        creator=creator(obj),
        spec_actor=spec_writer_time(obj)[0],
        spec_keys=NODE_SPEC_KEYS,
    )


#
# Pods
#


def _container_state(status: dict[str, Any] | None) -> dict[str, Any]:
    """{waiting|running|terminated: {...}} without containerID/imageID noise; a termination ``message`` (the
    container's /dev/termination-log, often its last stderr lines) and a waiting message are redacted."""
    out: dict[str, Any] = {}
    for key, value in (status or {}).items():
        if isinstance(value, dict):
            out[key] = redact_value({k: v for k, v in value.items() if k not in ("containerID",)})
    return out


def gpu_share(annotations: dict[str, str], labels: dict[str, str]) -> dict[str, Any] | None:
    """A KAI GPU share: the fraction or GPU memory asked, and once bound the GPU index and group KAI chose."""
    fraction = float_quantity(annotations.get(GPU_FRACTION_ANNOTATION))
    memory = int_quantity(annotations.get(GPU_MEMORY_ANNOTATION))
    if fraction is None and memory is None:
        return None
    index = int_quantity(annotations.get(GPU_INDEX_ANNOTATION))
    return {
        "fraction": fraction,
        "memory_mib": memory,
        "gpu_index": index,
        "group": labels.get(GPU_GROUP_LABEL) or "",
    }


# length: a pod's state field by field, in docs/inventory.md's order (split, the schema would scatter)
def map_pod(
    obj: dict[str, Any],
    project_of_queue: dict[tuple[str, str], str] | None = None,
    gpu_memory_mib: int | None = None,
) -> Observed:
    """``project_of_queue`` maps (namespace, queue label) to the project (KAI: queue → project; Kueue: LocalQueue
    → ClusterQueue); without an entry the queue name is the project, as Run:ai and the simulator name them.
    ``gpu_memory_mib``: the memory of the GPUs of the pod's node, to count a gpu-memory share as a fraction."""
    m, spec, status = meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    labels = dict(m.get("labels") or {})
    ns = m.get("namespace", "")
    own = owner(obj)
    job = (own or {}).get("name", "") if (own or {}).get("kind") == "Job" else ""
    job = job or labels.get("batch.kubernetes.io/job-name") or labels.get("job-name") or ""
    queue = queue_label(labels)
    project = (project_of_queue or {}).get((ns, queue)) or (project_of_queue or {}).get(("", queue)) or queue
    statuses = {s.get("name"): s for s in status.get("containerStatuses") or []}
    containers = []
    for c in spec.get("containers") or []:
        st = statuses.get(c.get("name")) or {}
        containers.append(
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "gpus": container_gpus(c),
                "env": redact_container_env(c.get("env")),
                "state": _container_state(st.get("state")),
                "last_state": _container_state(st.get("lastState")),
                "restart_count": int(st.get("restartCount") or 0),
                "ready": bool(st.get("ready")),
            }
        )
    gpus = sum(c["gpus"] for c in containers)
    node = spec.get("nodeName") or None
    annotations = m.get("annotations") or {}
    mig: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for prof, n in container_mig(c).items():
            mig[prof] = mig.get(prof, 0) + n
    share = gpu_share(annotations, labels)
    units: float | None = gpus + sum(mig_units(p) * n for p, n in mig.items())
    if share is not None:
        if share["fraction"] is not None:
            units = (units or 0) + share["fraction"]
        elif share["memory_mib"] and gpu_memory_mib:
            units = (units or 0) + min(1.0, share["memory_mib"] / gpu_memory_mib)
        else:
            units = None  # a gpu-memory share on an unknown GPU: its part of a GPU is not known
    reservation = annotations.get(RESERVATION_GPU_ANNOTATION) if ns == RESERVATION_NAMESPACE else None
    state = {
        "phase": status.get("phase", "Unknown"),
        "node": node,
        "job": job,
        "queue": queue,
        "project": project,
        "gpus": gpus,
        "scheduler": spec.get("schedulerName", ""),
        "priority_class": spec.get("priorityClassName") or "",
        "owner": {"kind": own["kind"], "name": own["name"]} if own else None,
        "node_selector": dict(spec.get("nodeSelector") or {}),
        "tolerations": [dict(t) for t in spec.get("tolerations") or []],
        "labels": labels,
        "created": m.get("creationTimestamp"),
        "started": status.get("startTime"),
        "deleting": m.get("deletionTimestamp"),
        "reason": status.get("reason") or "",
        "message": redact_text(status.get("message") or ""),
        "conditions": conditions(status.get("conditions")),
        "containers": containers,
        "requests": resource_requests(spec.get("containers") or []),  # CPU cores and memory bytes, summed
        "gpu_share": share,
        "mig": mig,
        "gpu_units": None if units is None else round(units, 4),
        "reservation_for": reservation,
    }
    hot = {
        "phase": state["phase"],
        "node": node or "",
        "job": job,
        "queue": queue,
        "project": project,
        "gpus": gpus,
        "namespace": ns,
        "gpu_units": state["gpu_units"],
    }
    return Observed(
        kind="pod",
        name=m["name"],
        namespace=ns,
        uid=m.get("uid", ""),
        state=state,
        hot=hot,
        actor=actor(obj),
        creator=creator(obj),
    )


#
# Jobs
#


def job_phase(obj: dict[str, Any], pod_phases: list[str], *, waiting_for_admission: bool = False) -> str:
    """Pending | Running | Succeeded | Failed | Suspended.

    A Kueue job is created suspended and waits for admission: that is "Pending" for an operator (it waits in a
    queue); "Suspended" is kept for a job someone suspended by hand.
    """
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    conds = conditions(status.get("conditions"), with_message=False)
    if (conds.get("Complete") or {}).get("status") == "True":
        return "Succeeded"
    if (conds.get("Failed") or {}).get("status") == "True":
        return "Failed"
    if spec.get("suspend"):
        return "Pending" if waiting_for_admission else "Suspended"
    if any(p == "Running" for p in pod_phases):
        return "Running"
    return "Pending"


# length: as map_pod, the job's state one field after another, in docs/inventory.md's order.
def map_job(
    obj: dict[str, Any],
    *,
    pod_phases: list[str],
    queue: str = "",
    project: str = "",
    scheduling: dict[str, Any] | None = None,
    admitted: bool = False,
    preemptible: bool | None = None,
    waiting_for_admission: bool = False,
) -> Observed:
    m, spec, status = meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    template = spec.get("template") or {}
    tspec = template.get("spec") or {}
    containers = tspec.get("containers") or []
    tlabels = (template.get("metadata") or {}).get("labels") or {}
    queue = queue or queue_label(tlabels) or queue_label(m.get("labels"))
    project = project or queue
    parallelism = spec.get("parallelism")
    pods = int(parallelism if parallelism is not None else 1)
    gpus_per_pod = sum(container_gpus(c) for c in containers)
    mig: dict[str, int] = {}
    for c in containers:
        for prof, n in container_mig(c).items():
            mig[prof] = mig.get(prof, 0) + n
    share = gpu_share((template.get("metadata") or {}).get("annotations") or {}, {})
    units_per_pod: float | None = gpus_per_pod + sum(mig_units(p) * n for p, n in mig.items())
    if share is not None:
        units_per_pod = share["fraction"] if share["fraction"] is not None else None
        units_per_pod = None if units_per_pod is None else gpus_per_pod + units_per_pod
    priority_class = tspec.get("priorityClassName") or ""
    if preemptible is None:
        preemptible = priority_class not in ("inference", "build")
    phase = job_phase(obj, pod_phases, waiting_for_admission=waiting_for_admission)
    state = {
        "phase": phase,
        "queue": queue,
        "project": project,
        "pods": pods,
        "completions": spec.get("completions"),
        "gpus_per_pod": gpus_per_pod,
        "gpus_total": pods * gpus_per_pod,
        "gpu_share": share,
        "mig": mig,
        "gpu_units": None if units_per_pod is None else round(pods * units_per_pod, 4),
        "requests_per_pod": resource_requests(containers),
        "image": containers[0].get("image", "") if containers else "",
        "priority_class": priority_class,
        "preemptible": preemptible,
        "node_selector": dict(tspec.get("nodeSelector") or {}),
        "tolerations": [dict(t) for t in tspec.get("tolerations") or []],
        "scheduler": tspec.get("schedulerName", ""),
        "submitted": m.get("creationTimestamp"),
        "started": status.get("startTime"),
        "completed": status.get("completionTime"),
        "active": int(status.get("active") or 0),
        "succeeded": int(status.get("succeeded") or 0),
        "failed": int(status.get("failed") or 0),
        "backoff_limit": spec.get("backoffLimit"),
        "active_deadline_seconds": spec.get("activeDeadlineSeconds"),  # its runtime limit (the ETA reads it)
        "suspended": bool(spec.get("suspend")),
        "generation": m.get("generation"),
        "conditions": conditions(status.get("conditions")),
        "scheduling": scheduling,
        "admitted": admitted,
    }
    hot = {
        "phase": phase,
        "queue": queue,
        "project": project,
        "gpus": pods * gpus_per_pod,
        "namespace": m.get("namespace", ""),
        "gpu_units": state["gpu_units"],
    }
    return Observed(
        kind="job",
        name=m["name"],
        namespace=m.get("namespace", ""),
        uid=m.get("uid", ""),
        state=state,
        hot=hot,
        actor=status_writer(obj),
        creator=creator(obj),
        spec_actor=spec_writer_time(obj)[0],
        spec_keys=JOB_SPEC_KEYS,
    )
