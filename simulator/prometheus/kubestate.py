"""kube-state-metrics' exposition of the simulated cluster, rendered from the API server's objects.

kube-state-metrics lists Nodes and Pods from the Kubernetes API and writes one series per object fact;
this renders the same families from the simulator's API store (the JSON a client would read), so what
a real Prometheus scrapes here follows the objects kubectl shows, not the engine's internals. Only the
families the shipped rules (deploy/prometheusrules.yaml) and an operator's usual queries read:

- ``kube_node_info``, ``kube_node_spec_unschedulable``, ``kube_node_status_condition``
  (``condition``, ``status`` = true|false|unknown, one series each), ``kube_node_status_capacity`` /
  ``kube_node_status_allocatable`` (``resource`` sanitized as kube-state-metrics does:
  ``nvidia.com/gpu`` → ``nvidia_com_gpu``, ``unit`` integer|core|byte);
- ``kube_pod_info``, ``kube_pod_owner``, ``kube_pod_status_phase`` (one series per phase), ``kube_pod_status_scheduled``,
  ``kube_pod_container_resource_requests``, ``kube_pod_container_status_waiting_reason`` (only the
  current reason, as kube-state-metrics v2), ``kube_pod_container_status_restarts_total``.

Label names and HELP texts are kube-state-metrics v2's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

PHASES = ("Pending", "Succeeded", "Failed", "Unknown", "Running")
_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("kube_node_info", "gauge", "Information about a cluster node."),
    ("kube_node_spec_unschedulable", "gauge", "Whether a node can schedule new pods."),
    ("kube_node_status_condition", "gauge", "The condition of a cluster node."),
    ("kube_node_status_capacity", "gauge", "The capacity for different resources of a node."),
    (
        "kube_node_status_allocatable",
        "gauge",
        "The allocatable for different resources of a node that are available for scheduling.",
    ),
    ("kube_pod_info", "gauge", "Information about pod."),
    ("kube_pod_owner", "gauge", "Information about the Pod's owner."),
    ("kube_pod_status_phase", "gauge", "The pods current phase."),
    ("kube_pod_status_scheduled", "gauge", "Describes the status of the scheduling process for the pod."),
    (
        "kube_pod_container_resource_requests",
        "gauge",
        "The number of requested request resource by a container. It is recommended to use the "
        "kube_pod_resource_requests metric exposed by kube-scheduler instead, as it is more precise.",
    ),
    (
        "kube_pod_container_status_waiting_reason",
        "gauge",
        "Describes the reason the container is currently in waiting state.",
    ),
    (
        "kube_pod_container_status_restarts_total",
        "counter",
        "The number of container restarts per container.",
    ),
)


def quantity(text: Any) -> float:
    """A Kubernetes resource quantity ("8", "500m", "64Gi") as a number (``kubernetes.utils.parse_quantity``)."""
    from kubernetes.utils import parse_quantity

    try:
        return float(parse_quantity(str(text).strip()))
    except (ValueError, ArithmeticError) as exc:
        raise ValueError(f"not a Kubernetes quantity: {text!r} ({exc})") from exc


def _resource(name: str) -> tuple[str, str]:
    """kube-state-metrics' (resource, unit) labels for a resource name."""
    unit = {"cpu": "core", "memory": "byte", "ephemeral-storage": "byte"}.get(name, "integer")
    if name.startswith("hugepages-"):
        unit = "byte"
    return re.sub(r"[^a-zA-Z0-9_]", "_", name), unit


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _line(name: str, labels: dict[str, str], value: float) -> str:
    body = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
    shown = str(int(value)) if float(value).is_integer() else repr(float(value))
    return f"{name}{{{body}}} {shown}"


def _objects(store: Any, resource: str) -> Iterable[dict[str, Any]]:
    entries = store.entries.get(resource, {})
    for key in sorted(entries):
        yield json.loads(entries[key].data)


def exposition(store: Any) -> str:
    """The text exposition kube-state-metrics would serve for the store's current objects."""
    out: dict[str, list[str]] = {name: [] for name, _, _ in _FAMILIES}
    for node in _objects(store, "nodes"):
        _node(node, out)
    for pod in _objects(store, "pods"):
        _pod(pod, out)
    lines: list[str] = []
    for name, kind, help_text in _FAMILIES:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(out[name])
    return "\n".join(lines) + "\n"


def _node(node: dict[str, Any], out: dict[str, list[str]]) -> None:
    meta, spec, status = node.get("metadata", {}), node.get("spec", {}), node.get("status", {})
    name = meta.get("name", "")
    info = status.get("nodeInfo", {})
    internal = next(
        (a.get("address", "") for a in status.get("addresses", []) if a.get("type") == "InternalIP"), ""
    )
    out["kube_node_info"].append(
        _line(
            "kube_node_info",
            {
                "node": name,
                "kernel_version": info.get("kernelVersion", ""),
                "os_image": info.get("osImage", ""),
                "container_runtime_version": info.get("containerRuntimeVersion", ""),
                "kubelet_version": info.get("kubeletVersion", ""),
                "kubeproxy_version": info.get("kubeProxyVersion", ""),
                "provider_id": spec.get("providerID", ""),
                "pod_cidr": spec.get("podCIDR", ""),
                "system_uuid": info.get("systemUUID", ""),
                "internal_ip": internal,
            },
            1,
        )
    )
    out["kube_node_spec_unschedulable"].append(
        _line("kube_node_spec_unschedulable", {"node": name}, 1 if spec.get("unschedulable") else 0)
    )
    for cond in status.get("conditions", []):
        actual = str(cond.get("status", "Unknown")).lower()
        for value in ("true", "false", "unknown"):
            out["kube_node_status_condition"].append(
                _line(
                    "kube_node_status_condition",
                    {"node": name, "condition": cond.get("type", ""), "status": value},
                    1 if actual == value else 0,
                )
            )
    for field, family in (
        ("capacity", "kube_node_status_capacity"),
        ("allocatable", "kube_node_status_allocatable"),
    ):
        for res, qty in sorted(status.get(field, {}).items()):
            resource, unit = _resource(res)
            out[family].append(
                _line(family, {"node": name, "resource": resource, "unit": unit}, quantity(qty))
            )


def _pod(pod: dict[str, Any], out: dict[str, list[str]]) -> None:
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    ident = {"namespace": meta.get("namespace", ""), "pod": meta.get("name", ""), "uid": meta.get("uid", "")}
    node = spec.get("nodeName", "")
    owner: dict[str, Any] = next((o for o in meta.get("ownerReferences", []) if o.get("controller")), {})
    out["kube_pod_info"].append(
        _line(
            "kube_pod_info",
            {
                "namespace": ident["namespace"],
                "pod": ident["pod"],
                "uid": ident["uid"],
                "host_ip": status.get("hostIP", ""),
                "pod_ip": status.get("podIP", ""),
                "node": node,
                "created_by_kind": owner.get("kind", ""),
                "created_by_name": owner.get("name", ""),
                "priority_class": spec.get("priorityClassName", ""),
                "host_network": "true" if spec.get("hostNetwork") else "false",
            },
            1,
        )
    )
    for ref in meta.get("ownerReferences", []) or [{}]:
        out["kube_pod_owner"].append(
            _line(
                "kube_pod_owner",
                {
                    **ident,
                    "owner_kind": ref.get("kind", "<none>"),
                    "owner_name": ref.get("name", "<none>"),
                    "owner_is_controller": "true" if ref.get("controller") else "false" if ref else "<none>",
                },
                1,
            )
        )
    phase = status.get("phase", "")
    for value in PHASES:
        out["kube_pod_status_phase"].append(
            _line("kube_pod_status_phase", {**ident, "phase": value}, 1 if phase == value else 0)
        )
    scheduled = next((c for c in status.get("conditions", []) if c.get("type") == "PodScheduled"), None)
    if scheduled is not None:
        actual = str(scheduled.get("status", "Unknown")).lower()
        for value in ("true", "false", "unknown"):
            out["kube_pod_status_scheduled"].append(
                _line("kube_pod_status_scheduled", {**ident, "condition": value}, 1 if actual == value else 0)
            )
    for container in spec.get("containers", []):
        requests = (container.get("resources") or {}).get("requests") or {}
        for res, qty in sorted(requests.items()):
            resource, unit = _resource(res)
            out["kube_pod_container_resource_requests"].append(
                _line(
                    "kube_pod_container_resource_requests",
                    {
                        "namespace": ident["namespace"],
                        "pod": ident["pod"],
                        "uid": ident["uid"],
                        "container": container.get("name", ""),
                        "node": node,
                        "resource": resource,
                        "unit": unit,
                    },
                    quantity(qty),
                )
            )
    for cs in status.get("containerStatuses", []):
        labels = {**ident, "container": cs.get("name", "")}
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            out["kube_pod_container_status_waiting_reason"].append(
                _line("kube_pod_container_status_waiting_reason", {**labels, "reason": waiting["reason"]}, 1)
            )
        out["kube_pod_container_status_restarts_total"].append(
            _line("kube_pod_container_status_restarts_total", labels, float(cs.get("restartCount", 0)))
        )
