"""Each job's scheduling state: why it waits or what admitted it. KAI: its PodGroup's
``status.schedulingConditions``; Kueue: its ``Workload``'s ``QuotaReserved``/``Admitted``; without either, its
pods' ``PodScheduled`` condition."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collectors.mapping.metadata import meta, owner, queue_label
from collectors.observed import Observed
from collectors.sources.redact import redact_text


@dataclass
class JobScheduling:
    """What the scheduler says about one job: queue, why it waits, whether it holds quota."""

    queue: str = ""
    project: str = ""
    scheduling: dict[str, Any] | None = None
    admitted: bool = False
    preemptible: bool | None = None
    waiting_for_admission: bool = False


@dataclass
class SchedulingIndex:
    """Scheduler objects indexed by the job (namespace, uid / name) they belong to."""

    by_uid: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    by_name: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def build(cls, objects: list[dict[str, Any]], *, uid_label: str = "") -> SchedulingIndex:
        idx = cls()
        for o in objects:
            m = meta(o)
            ns = m.get("namespace", "")
            own = owner(o)
            uid = (own or {}).get("uid") or ((m.get("labels") or {}).get(uid_label, "") if uid_label else "")
            if uid:
                idx.by_uid[(ns, uid)] = o
            if own and own.get("kind") == "Job":
                idx.by_name[(ns, own["name"])] = o
        return idx

    def find(self, job: dict[str, Any]) -> dict[str, Any] | None:
        m = meta(job)
        ns = m.get("namespace", "")
        return self.by_uid.get((ns, m.get("uid", ""))) or self.by_name.get((ns, m.get("name", "")))


def kai_job_scheduling(
    podgroup: dict[str, Any] | None, pods: list[Observed], project_of_queue: dict[str, str]
) -> JobScheduling:
    """``pods`` are the job's mapped pods (their inventory states)."""
    if podgroup is None:
        return pod_job_scheduling(pods)
    spec, status = podgroup.get("spec") or {}, podgroup.get("status") or {}
    queue = spec.get("queue") or queue_label(meta(podgroup).get("labels"))
    js = JobScheduling(queue=queue, project=project_of_queue.get(queue, queue))
    preemptibility = spec.get("preemptibility")
    if preemptibility:
        js.preemptible = preemptibility != "non-preemptible"
    conds = [c for c in status.get("schedulingConditions") or [] if isinstance(c, dict)]
    if conds:
        c = conds[-1]
        reasons = [r for r in c.get("reasons") or [] if isinstance(r, dict)]
        js.scheduling = {
            "source": "kai",
            "type": c.get("type", ""),
            "status": "False",  # KAI's condition says "Unschedulable...: True"; normalized: scheduled = False
            "reason": reasons[0].get("reason") if reasons else (c.get("reason") or ""),
            "reasons": [
                {"reason": r.get("reason", ""), "message": redact_text(r.get("message", ""))} for r in reasons
            ],
            "message": redact_text(c.get("message") or ""),
            "since": c.get("lastTransitionTime"),
            "nodepool": c.get("nodePool") or "",
        }
    js.admitted = any(p.state.get("node") for p in pods)
    if js.scheduling is None and not js.admitted:
        js.scheduling = pod_job_scheduling(pods).scheduling
    return js


def kueue_job_scheduling(
    workload: dict[str, Any] | None, pods: list[Observed], local_queues: dict[tuple[str, str], str]
) -> JobScheduling:
    if workload is None:
        return pod_job_scheduling(pods)
    m, spec, status = meta(workload), workload.get("spec") or {}, workload.get("status") or {}
    lq = spec.get("queueName", "")
    cq = (
        (status.get("admission") or {}).get("clusterQueue")
        or local_queues.get((m.get("namespace", ""), lq))
        or lq
    )
    js = JobScheduling(queue=cq, project=cq)
    conds = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    admitted = (conds.get("Admitted") or {}).get("status") == "True"
    js.admitted = admitted
    js.waiting_for_admission = not admitted and (conds.get("Finished") or {}).get("status") != "True"
    # The most telling condition: an eviction, else the quota reservation.
    for ctype in ("Evicted", "QuotaReserved"):
        c = conds.get(ctype)
        if not c or (ctype == "Evicted" and c.get("status") != "True"):
            continue
        js.scheduling = {
            "source": "kueue",
            "type": ctype,
            "status": c.get("status", ""),
            "reason": c.get("reason") or "",
            "message": redact_text(c.get("message") or ""),
            "since": c.get("lastTransitionTime"),
        }
        break
    return js


def pod_job_scheduling(pods: list[Observed]) -> JobScheduling:
    """kube-scheduler: the PodScheduled=False condition of the job's first unscheduled pod."""
    js = JobScheduling()
    for p in sorted(pods, key=lambda p: p.name):
        c = (p.state.get("conditions") or {}).get("PodScheduled") or {}
        if c.get("status") == "False":
            js.scheduling = {
                "source": "k8s",
                "type": "PodScheduled",
                "status": "False",
                "reason": c.get("reason") or "",
                "message": redact_text(c.get("message") or ""),
                "since": c.get("since"),
            }
            break
    js.admitted = any(p.state.get("node") for p in pods)
    return js
