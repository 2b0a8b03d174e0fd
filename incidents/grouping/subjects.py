"""Rule 2: an alert's labels become entities, its subjects (the most specific) and its context."""

from __future__ import annotations

from dataclasses import dataclass, field

from collectors.models import Cluster, Entity
from incidents.grouping.labels import LABEL_TEXT, identities, node_label
from incidents.grouping.lookups import Lookups, find_entity, gpu_by_index, resolve_cluster
from incidents.models import Alert


@dataclass
class Resolution:
    """What an alert's labels name: entities found, and the labels that named nothing known."""

    cluster: Cluster | None = None
    subjects: list[Entity] = field(default_factory=list)
    context: list[Entity] = field(default_factory=list)  # named by labels, less specific: attached as related
    unresolved: list[str] = field(default_factory=list)
    workload: str = ""  # the pod its labels name (exported_pod first: the plain label may be the exporter's)
    uses: bool = False  # a workload-use GPU alert (``WORKLOAD_GPU_ALERTS``), not one about the GPU's health

    @property
    def unresolved_key(self) -> str:
        return ", ".join(self.unresolved)[:500]


# Alerts about how a workload uses the GPUs it holds (not about the GPU's health): the holding pod and its job
# are subjects beside the GPU, so the job's page lists the incident and handoffs file it under the workload.
# Joining still goes by the GPU and its node (``_about``): two pods' idle GPUs stay two incidents.
WORKLOAD_GPU_ALERTS = frozenset({"GPUIdleAllocated"})


def workload_of(alert: Alert, res: Resolution, related: list[Entity]) -> list[Entity]:
    """The pod a workload-use GPU alert names (``res.workload``) and its job, among what rule 6 relates."""
    if (
        alert.name not in WORKLOAD_GPU_ALERTS
        or not res.workload
        or not any(e.kind == "gpu" for e in res.subjects)
    ):
        return []
    pods = [e for e in related if e.kind == "pod" and e.name == res.workload]
    # a GPU subject relates the job of the pod holding it, and only that job
    jobs = [e for e in related if e.kind == "job" and any(p.namespace == e.namespace for p in pods)]
    return pods[:1] + jobs[:1]


def resolve_subjects(alert: Alert, lookups: Lookups | None = None) -> Resolution:
    """Map identifying labels to inventory entities; what names nothing known goes to ``unresolved``.

    dcgm-exporter variants: ``Hostname`` (classic) or ``hostname`` (current) name the node, ``UUID`` the GPU
    and ``gpu`` is the GPU's index on that node; when Prometheus did not honour the exporter's labels the
    workload is in ``exported_pod``/``exported_namespace`` (the plain ones then name the exporter itself).
    """
    labels = alert.labels
    res = Resolution(cluster=lookups.cluster(labels) if lookups else resolve_cluster(labels))
    if labels.get("cluster") and res.cluster is None:
        res.unresolved.append(f"cluster={labels['cluster']}")
    node = node_label(labels)
    found: list[Entity] = []
    for kind, ns, name in identities(labels):
        text = LABEL_TEXT[kind](ns, name)
        ent = None
        if res.cluster is not None:
            ent = (
                lookups.entity(res.cluster, kind, name, ns)
                if lookups
                else find_entity(res.cluster, kind, name, ns)
            )
            if ent is None and kind == "job" and not ns:  # job_name without namespace: unique by name
                same = (
                    lookups.jobs_named(res.cluster, name)
                    if lookups
                    else list(Entity.objects.filter(cluster=res.cluster, kind="job", name=name)[:2])
                )
                ent = same[0] if len(same) == 1 else None
        if ent is not None:
            found.append(ent)
        else:
            res.unresolved.append(text)
    if labels.get("gpu") and not labels.get("UUID"):
        gpu = None
        if res.cluster and node:
            gpu = (
                lookups.gpu_by_index(res.cluster, node, labels["gpu"], alert.starts_at)
                if lookups
                else gpu_by_index(res.cluster, node, labels["gpu"], alert.starts_at)
            )
        if gpu is not None:
            found.append(gpu)
        else:
            res.unresolved.append(f"gpu={node}/{labels['gpu']}")
    res.subjects, res.context = most_specific(found)
    res.workload = labels.get("exported_pod") or labels.get("pod") or ""
    res.uses = alert.name in WORKLOAD_GPU_ALERTS
    if not res.subjects and not res.unresolved:
        # Nothing identifying at all: the alert is its own subject (by name and its distinguishing labels).
        rest = sorted(f"{k}={v}" for k, v in labels.items() if k not in ("severity", "alertname"))
        res.unresolved.append(
            f"alertname={labels.get('alertname', '')}" + (", " + ", ".join(rest) if rest else "")
        )
    return res


# Which named entities an alert is *about*, most specific first; the rest of what its labels name is context.
# A GPU alert is about the GPU and its node (dcgm labels always carry both), even when a pod holds the GPU;
# a pod/job alert is about the workload, not the node it ran on or the project/queue it belongs to —
# otherwise every pending job of a project would join one incident through the project label.
def most_specific(found: list[Entity]) -> tuple[list[Entity], list[Entity]]:
    """Split resolved entities into (subjects, context): GPU(+node) > pod/job > node > queue/project."""
    kinds = {e.kind for e in found}
    if "gpu" in kinds:
        tier = {"gpu", "node"}
    elif kinds & {"pod", "job"}:
        tier = {"pod", "job"}
    elif "node" in kinds:
        tier = {"node"}
    else:
        tier = {"queue", "project"}
    return [e for e in found if e.kind in tier], [e for e in found if e.kind not in tier]
