"""Small helpers shared by the mappers: quantities, conditions, owners, actors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from collectors.sources.redact import redact_text
from rcaweb.timestamps import timestamp_or_none

GPU = "nvidia.com/gpu"
QUEUE_LABELS = ("kai.scheduler/queue", "runai/queue", "kueue.x-k8s.io/queue-name")
NODEPOOL_LABELS = (
    "run.ai/node-pool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "node.kubernetes.io/instance-type",
)


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def int_quantity(value: Any) -> int | None:
    """A Kubernetes quantity for countable resources ("8", 8, "8.0", "1k", "1000m") as int, truncated
    (``kubernetes.utils.parse_quantity``); None when absent or unparseable."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():  # "8": nearly every GPU quantity, without a Decimal
        return int(text)
    from kubernetes.utils import parse_quantity  # here: the kubernetes package takes 1.5 s to import

    try:
        return int(parse_quantity(value if isinstance(value, float) else text))
    except (ValueError, ArithmeticError):  # not a quantity, NaN, infinity
        return None


def limit_or_none(value: Any) -> int | None:
    """KAI/Run:ai spell "no limit" as -1."""
    n = int_quantity(value)
    return None if n is None or n < 0 else n


def conditions(items: list[dict[str, Any]] | None, *, with_message: bool = True) -> dict[str, dict[str, Any]]:
    """Conditions keyed by type, without the times that tick (lastHeartbeatTime, lastProbeTime)."""
    out: dict[str, dict[str, Any]] = {}
    for c in items or []:
        if not isinstance(c, dict) or not c.get("type"):
            continue
        entry: dict[str, Any] = {"status": c.get("status"), "reason": c.get("reason") or ""}
        if with_message:
            entry["message"] = redact_text(c.get("message") or "")
        entry["since"] = c.get("lastTransitionTime")
        out[str(c["type"])] = entry
    return out


def owner(obj: dict[str, Any]) -> dict[str, str] | None:
    """The controller owner reference (or the first owner), as {kind, name}."""
    refs = meta(obj).get("ownerReferences") or []
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not chosen:
        return None
    return {"kind": chosen.get("kind", ""), "name": chosen.get("name", ""), "uid": chosen.get("uid", "")}


def actor(obj: dict[str, Any], *, spec_only: bool = False) -> str:
    """Who wrote the object last: the manager of the most recent managedFields entry.

    The newest field set is what caused the change a sweep sees (kubelet for status, an operator or
    kubectl for spec). ``spec_only`` skips the status subresource, for objects whose inventory state is
    all spec (queues: the quota writer, not the controller that refreshes usage). "" when nobody is named.
    """
    latest, latest_time = "", None
    for e in meta(obj).get("managedFields") or ():
        if not isinstance(e, dict) or not e.get("manager"):
            continue
        if spec_only and e.get("subresource") == "status":
            continue
        when = str(e.get("time") or "")
        if latest_time is None or when >= latest_time:  # ties: the later entry wins
            latest, latest_time = str(e["manager"]), when
    return latest[:200]


def _writers(obj: dict[str, Any], *, status: bool) -> list[dict[str, Any]]:
    return [
        e
        for e in meta(obj).get("managedFields") or []
        if isinstance(e, dict) and e.get("manager") and (e.get("subresource") == "status") == status
    ]


def creator(obj: dict[str, Any]) -> str:
    """Who created the object: the manager of the oldest spec (non-status) managedFields entry — the job
    controller for a Job's pod, kubectl or a CI bot for the Job — not the scheduler or kubelet that wrote
    its status since. "" when nobody is named."""
    entries = _writers(obj, status=False)
    if not entries:
        return ""
    first = min(enumerate(entries), key=lambda ie: (str(ie[1].get("time") or ""), ie[0]))[1]
    return str(first.get("manager", ""))[:200]


def status_writer(obj: dict[str, Any]) -> str:
    """The newest writer of the status subresource (the controller reporting what happened), else
    :func:`actor`."""
    entries = _writers(obj, status=True)
    if not entries:
        return actor(obj)
    latest = max(enumerate(entries), key=lambda ie: (str(ie[1].get("time") or ""), ie[0]))[1]
    return str(latest.get("manager", ""))[:200]


def spec_writer_time(obj: dict[str, Any]) -> tuple[str, str]:
    """(manager, time) of the newest non-status managedFields entry; ("", "") when none."""
    entries = [
        e
        for e in meta(obj).get("managedFields") or []
        if isinstance(e, dict) and e.get("manager") and e.get("subresource") != "status"
    ]
    if not entries:
        return "", ""
    latest = max(enumerate(entries), key=lambda ie: (str(ie[1].get("time") or ""), ie[0]))[1]
    return str(latest.get("manager", ""))[:200], str(latest.get("time") or "")


def queue_label(labels: dict[str, str] | None) -> str:
    for key in QUEUE_LABELS:
        value = (labels or {}).get(key)
        if value:
            return value
    return ""


def nodepool(labels: dict[str, str]) -> str:
    for key in NODEPOOL_LABELS:
        if labels.get(key):
            return labels[key]
    return ""


def container_gpus(container: dict[str, Any]) -> int:
    res = container.get("resources") or {}
    value = (res.get("requests") or {}).get(GPU)
    if value is None:
        value = (res.get("limits") or {}).get(GPU)  # extended resources: limits alone imply requests
    return int_quantity(value) or 0


MIG_PREFIX = "nvidia.com/mig-"
# KAI GPU sharing (KAI Scheduler docs/gpu-sharing; the labels and annotations its binder writes)
GPU_FRACTION_ANNOTATION = "gpu-fraction"
GPU_MEMORY_ANNOTATION = "gpu-memory"  # MiB
GPU_INDEX_ANNOTATION = "runai-gpu"  # the GPU index KAI chose for a shared pod
GPU_GROUP_LABEL = "runai-gpu-group"
RESERVATION_NAMESPACE = "runai-reservation"
RESERVATION_GPU_ANNOTATION = "run.ai/reserve_for_gpu_index"  # the reservation pod's GPU (UUID)


def container_mig(container: dict[str, Any]) -> dict[str, int]:
    """MIG instances a container asks for (mixed strategy): {"3g.40gb": 2}."""
    res = container.get("resources") or {}
    out: dict[str, int] = {}
    for source in (res.get("limits") or {}, res.get("requests") or {}):
        for name, value in source.items():
            if str(name).startswith(MIG_PREFIX):
                out[str(name)[len(MIG_PREFIX) :]] = int_quantity(value) or 0
    return out


def resource_requests(containers: list[dict[str, Any]]) -> dict[str, str]:
    """A pod's CPU and memory requests summed over its containers, as the scheduler fits them: a container
    with only a limit requests its limit (Kubernetes defaulting). CPU in cores ("16", "0.5"), memory in
    bytes; a resource no container asks for is absent, an unparseable one too (never a guess)."""
    from kubernetes.utils import parse_quantity

    out: dict[str, str] = {}
    for key in ("cpu", "memory"):
        total, seen = 0.0, False
        for c in containers or ():
            res = c.get("resources") or {}
            value = (res.get("requests") or {}).get(key)
            if value is None:
                value = (res.get("limits") or {}).get(key)
            if value is None:
                continue
            try:
                total += float(parse_quantity(value))
            except (ValueError, TypeError, ArithmeticError):
                continue
            seen = True
        if seen:
            out[key] = f"{total:g}" if key == "cpu" else str(int(total))
    return out


def float_quantity(value: Any) -> float | None:
    """A GPU amount that may be a fraction ("0.5", 0.25, "8"); None when absent or unparseable."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        n = int_quantity(value)
        return None if n is None else float(n)


def latest_transition(*objs: dict[str, Any] | None) -> datetime | None:
    """The latest moment the objects say something about them changed: created, a condition turned
    (``lastTransitionTime``, not heartbeats), a container started or finished, a job started or completed,
    a spec or metadata writer wrote (``managedFields[].time``). None when they carry no time.

    A sweep sees a changed state some time after the change; this dates it (``Observed.since``), bounded
    by the previous listing (``collectors.inventory.dated``)."""
    latest = ""  # the API server writes every time in UTC ("…Z"): the latest is the greatest text
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        m = obj.get("metadata")
        if isinstance(m, dict):
            latest = max(latest, _text(m.get("creationTimestamp")))
            for entry in m.get("managedFields") or ():
                # Spec and metadata writers only: status writers (the kubelet's heartbeats) write every few
                # seconds; the status' own transition times below date what changed there.
                if isinstance(entry, dict) and entry.get("subresource") != "status":
                    latest = max(latest, _text(entry.get("time")))
        st = obj.get("status")
        if not isinstance(st, dict):
            continue
        latest = max(latest, _text(st.get("startTime")), _text(st.get("completionTime")))
        for key in ("conditions", "schedulingConditions"):
            for cond in st.get(key) or ():
                if isinstance(cond, dict):
                    latest = max(latest, _text(cond.get("lastTransitionTime")))
        for key in ("initContainerStatuses", "containerStatuses"):
            for cs in st.get(key) or ():
                if not isinstance(cs, dict):
                    continue
                for which in ("state", "lastState"):
                    for detail in (cs.get(which) or {}).values():
                        if isinstance(detail, dict):
                            latest = max(
                                latest, _text(detail.get("startedAt")), _text(detail.get("finishedAt"))
                            )
    when = timestamp_or_none(latest)
    if when is None:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
