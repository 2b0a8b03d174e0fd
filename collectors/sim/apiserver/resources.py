"""The resources the API server serves, and the real Status object its errors carry."""

from __future__ import annotations

from typing import Any

KAI, KUEUE = "scheduling.run.ai", "kueue.x-k8s.io"
# (group, version, plural) -> (store resource, kind, namespaced, scheduler or None, short names)
RESOURCES: dict[tuple[str, str, str], tuple[str, str, bool, str | None, list[str]]] = {
    ("", "v1", "nodes"): ("nodes", "Node", False, None, ["no"]),
    ("", "v1", "namespaces"): ("namespaces", "Namespace", False, None, ["ns"]),
    ("", "v1", "pods"): ("pods", "Pod", True, None, ["po"]),
    ("", "v1", "events"): ("events", "Event", True, None, ["ev"]),
    ("batch", "v1", "jobs"): ("jobs", "Job", True, None, []),
    (KAI, "v2", "queues"): ("queues", "Queue", False, "kai", ["q"]),
    (KAI, "v2alpha2", "podgroups"): ("podgroups", "PodGroup", True, "kai", ["pg"]),
    (KUEUE, "v1beta1", "resourceflavors"): (
        "resourceflavors",
        "ResourceFlavor",
        False,
        "kueue",
        ["flavor", "flavors", "rf"],
    ),
    (KUEUE, "v1beta1", "clusterqueues"): ("clusterqueues", "ClusterQueue", False, "kueue", ["cq"]),
    (KUEUE, "v1beta1", "localqueues"): (
        "localqueues",
        "LocalQueue",
        True,
        "kueue",
        ["queue", "queues", "lq"],
    ),
    (KUEUE, "v1beta1", "workloads"): ("workloads", "Workload", True, "kueue", ["wl"]),
    (KUEUE, "v1alpha1", "cohorts"): ("cohorts", "Cohort", False, "kueue", []),
}
RESOURCE_KINDS = {res: (f"{g}/{v}" if g else v, kind) for (g, v, _), (res, kind, *_rest) in RESOURCES.items()}
WATCH_DEFAULT_TIMEOUT = 1800.0


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class HTTPError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.body = status(code, reason, message, details)
        self.code = code
