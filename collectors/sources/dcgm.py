"""dcgm-exporter labels as they exist in the field, normalized by one function.

Releases and scrape configs disagree: ``Hostname`` (older) vs ``hostname`` (newer, NVIDIA/dcgm-exporter#655),
``UUID`` vs ``uuid``; after a Prometheus scrape without ``honor_labels`` the workload's labels arrive as
``exported_pod``/``exported_namespace``/``exported_container`` while ``pod``/``namespace`` name the exporter
itself; an idle GPU has no pod labels, or empty strings (Kubernetes mode on, no pod); the oldest
exporters have no ``modelName`` and no host label at all.
"""

from __future__ import annotations

from typing import Any

EXPORTER_CONTAINERS = frozenset({"nvidia-dcgm-exporter", "dcgm-exporter"})


def _first(labels: dict[str, Any], *names: str) -> str:
    for name in names:
        value = labels.get(name)
        if value not in (None, ""):
            return str(value)
    return ""


EXPORTER_POD_PREFIXES = ("nvidia-dcgm-exporter", "dcgm-exporter")
# Labels only a DCGM series carries: an alert with one of them was computed from dcgm-exporter's metrics.
DCGM_LABELS = (
    "UUID",
    "uuid",
    "gpu",
    "Hostname",
    "hostname",
    "modelName",
    "DCGM_FI_DRIVER_VERSION",
    "pci_bus_id",
)


def names_exporter(pod: str, container: str = "") -> bool:
    """Whether a pod/container label names dcgm-exporter itself (the scrape's target, not a workload)."""
    return container in EXPORTER_CONTAINERS or pod.startswith(EXPORTER_POD_PREFIXES)


def alert_workload(labels: dict[str, Any]) -> tuple[str, str]:
    """(namespace, pod) of the workload an alert's labels name; "" where they name none.

    ``exported_namespace``/``exported_pod`` are the workload when present (after a scrape without
    honor_labels the plain ones name the exporter). On an alert computed from DCGM series, a plain pod label
    that names the exporter itself (``nvidia-dcgm-exporter-…``, container ``nvidia-dcgm-exporter``) is no
    workload: the GPU is free. An alert about the exporter pod from kube-state-metrics (no DCGM labels, e.g.
    the exporter crash-looping) still names it.
    """
    if any(k in labels for k in ("exported_pod", "exported_namespace", "exported_container")):
        return _first(labels, "exported_namespace"), _first(labels, "exported_pod")
    namespace, pod = _first(labels, "namespace"), _first(labels, "pod")
    if names_exporter(pod, _first(labels, "container")) and any(labels.get(k) for k in DCGM_LABELS):
        return "", ""
    return namespace, pod


def dcgm_uuid(labels: dict[str, Any]) -> str:
    """The GPU's UUID alone (``UUID`` or ``uuid``; "" when none): what a fact query's series is keyed by."""
    return _first(labels, "UUID", "uuid")


def dcgm_identity(labels: dict[str, Any]) -> dict[str, str]:
    """{"uuid", "gpu", "hostname", "model", "pod", "namespace", "container"}; "" where the labels say nothing.

    ``exported_*`` win over the plain labels (the plain ones then name the exporter pod); a plain pod label that
    names the exporter itself (container ``nvidia-dcgm-exporter``) is not a workload and is dropped.
    """
    if any(k in labels for k in ("exported_pod", "exported_namespace", "exported_container")):
        pod = _first(labels, "exported_pod")
        namespace = _first(labels, "exported_namespace")
        container = _first(labels, "exported_container")
    else:
        pod = _first(labels, "pod")
        namespace = _first(labels, "namespace")
        container = _first(labels, "container")
        if names_exporter(pod, container):
            pod = namespace = container = ""
    if not pod:
        namespace = container = ""
    hostname = _first(labels, "Hostname", "hostname")
    if not hostname or hostname.startswith(("nvidia-dcgm-exporter", "dcgm-exporter")):
        # The host label names the exporter pod (no NODE_NAME env): a relabelled node label is better.
        hostname = _first(labels, "node", "kubernetes_node") or hostname
    return {
        "uuid": dcgm_uuid(labels),
        "gpu": _first(labels, "gpu"),
        "hostname": hostname,
        "model": _first(labels, "modelName", "model_name"),
        "pod": pod,
        "namespace": namespace,
        "container": container,
        "pci_bus_id": _first(labels, "pci_bus_id"),
        "instance": _first(labels, "instance"),
        # MIG: the GPU instance a series is about (the parent GPU's UUID and index stay in UUID/gpu)
        "gi_id": _first(labels, "GPU_I_ID", "gpu_i_id"),
        "gi_profile": _first(labels, "GPU_I_PROFILE", "gpu_i_profile"),
    }
