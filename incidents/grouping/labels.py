"""What an alert's identifying labels ask the inventory for (rule 2 of ``incidents.grouping``)."""

from __future__ import annotations

from collectors.sources.dcgm import alert_workload


def node_label(labels: dict[str, str]) -> str:
    return labels.get("node") or labels.get("Hostname") or labels.get("hostname") or ""


LABEL_TEXT = {  # how an unresolved identity is named in ``unresolved_subject``
    "pod": lambda ns, name: f"pod={ns}/{name}",
    "job": lambda ns, name: f"job_name={name}",
    "project": lambda ns, name: f"project={name}",
    "queue": lambda ns, name: f"queue={name}",
    "node": lambda ns, name: f"node={name}",
    "gpu": lambda ns, name: f"UUID={name}",
}


def identities(labels: dict[str, str]) -> list[tuple[str, str, str]]:
    """The (kind, namespace, name) an alert's identifying labels ask the inventory for (rule 2)."""
    namespace, pod = alert_workload(labels)  # never the dcgm-exporter pod a scrape put in ``pod``
    out: list[tuple[str, str, str]] = []
    if pod and namespace:
        out.append(("pod", namespace, pod))
    if labels.get("job_name"):
        out.append(("job", namespace, labels["job_name"]))
    for kind in ("project", "queue"):
        if labels.get(kind):
            out.append((kind, "", labels[kind]))
    node = node_label(labels)
    if node:
        out.append(("node", "", node))
    if labels.get("UUID"):
        out.append(("gpu", "", labels["UUID"]))
    return out
