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
    # Rendered on request from the nodes (leases.py): one per node in kube-node-lease, no watch history.
    ("coordination.k8s.io", "v1", "leases"): ("leases", "Lease", True, None, []),
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
USER = "sim-reader"  # who the bearer token authenticates (the kubeconfig's user)
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


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


def forbidden(method: str, path: str, user: str) -> dict[str, Any]:
    """The Status RBAC answers a write with: ``pods "x" is forbidden: User "u" cannot delete resource ...``."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    group, rest = "", []
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    namespace = None
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        namespace, rest = rest[1], rest[2:]
    plural = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    verb = VERBS.get(method, method.lower())
    if verb == "delete" and not name:
        verb = "deletecollection"
    resource = f"{plural}/{sub}" if sub else plural
    qualified = f"{plural}.{group}" if group else plural
    subject = f'{qualified} "{name}"' if name else qualified
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "{group}" {scope}'
        ": the simulated cluster is read-only (its world changes through the scenario)"
    )
    details: dict[str, Any] = {"kind": plural}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return status(403, "Forbidden", message, details)
