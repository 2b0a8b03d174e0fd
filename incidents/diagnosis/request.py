"""What a job still asks to have placed: its pods, GPUs per pod, CPU, memory, MIG instances and GPU shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from incidents.diagnosis.allocation import ACTIVE_POD_PHASES
from incidents.diagnosis.quantities import quantity
from incidents.diagnosis.types import DiagnosisInput, EntityState
from rcaweb.mig import mig_units


@dataclass
class Request:
    """What the job still needs placed: ``pods`` pods of ``gpus_per_pod`` GPUs each."""

    pods: int
    gpus_per_pod: int
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    preemptible: bool = True
    bound_pods: int = 0
    cpu_per_pod: float | None = None  # cores; None when the inventory does not record the request
    memory_per_pod: int | None = None  # bytes; likewise
    mig: dict[str, int] = field(default_factory=dict)  # MIG instances per pod: {"3g.40gb": 1}
    share: float | None = None  # a KAI GPU share per pod: its fraction of one GPU (gpu-fraction)
    share_memory_mib: int | None = None  # a gpu-memory share: the GPU memory it asks (MiB)
    units_per_pod: float | None = (
        None  # GPU units one pod is charged (a share's fraction, a MIG "<n>g"); None: whole
    )

    @property
    def total(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def units(self) -> float:
        """GPU units the unplaced pods are charged against a quota: fractions and MIG as the scheduler counts them."""
        per = self.units_per_pod if self.units_per_pod is not None else float(self.gpus_per_pod)
        return round(self.pods * per, 4)


def job_request(di: DiagnosisInput, job: EntityState) -> Request:
    """The part of a job's request not yet placed (a gang is all-or-nothing; bound pods keep their GPUs)."""
    st = job.state
    pods_total = int(st.get("pods") or 1)
    per_pod = st.get("gpus_per_pod")
    if per_pod is None:
        total = int(st.get("gpus_total") or st.get("gpus") or 0)
        per_pod = total // pods_total if pods_total else total
    pods = di.pods_of_job(job)
    bound = [p for p in pods if p.get("node") and p.get("phase") in ACTIVE_POD_PHASES]
    tolerations = list(st.get("tolerations") or [])
    selector = dict(st.get("node_selector") or {})
    if pods:  # the pod spec is what the scheduler sees; prefer it when present
        p0 = pods[0].state
        tolerations = list(p0.get("tolerations") or tolerations)
        selector = dict(p0.get("node_selector") or selector)
    preemptible = st.get("preemptible")
    if preemptible is None:
        preemptible = (st.get("priority_class") or "train") != "inference"
    cpu, memory = pod_requests(st.get("requests_per_pod") or {})
    if pods and cpu is None and memory is None:
        cpu, memory = pod_requests(pods[0].state.get("requests") or {})
    share = st.get("gpu_share") or (pods[0].state.get("gpu_share") if pods else None) or {}
    mig = {str(k): int(v) for k, v in (st.get("mig") or {}).items() if int(v or 0) > 0}
    if not mig and pods:
        mig = {str(k): int(v) for k, v in (pods[0].state.get("mig") or {}).items() if int(v or 0) > 0}
    units = st.get("gpu_units")
    if units is not None and pods_total:
        units_per_pod: float | None = float(units) / pods_total
    elif share.get("fraction") is not None or mig:
        units_per_pod = (
            int(per_pod or 0)
            + float(share.get("fraction") or 0)
            + sum(mig_units(k) * n for k, n in mig.items())
        )
    else:
        units_per_pod = None
    return Request(
        pods=max(pods_total - len(bound), 0),
        gpus_per_pod=int(per_pod or 0),
        node_selector=selector,
        tolerations=tolerations,
        preemptible=bool(preemptible),
        bound_pods=len(bound),
        cpu_per_pod=cpu,
        memory_per_pod=memory,
        mig=mig,
        share=float(share["fraction"]) if share.get("fraction") is not None else None,
        share_memory_mib=int(share["memory_mib"]) if share.get("memory_mib") is not None else None,
        units_per_pod=units_per_pod,
    )


def pod_requests(res: dict[str, Any]) -> tuple[float | None, int | None]:
    """(cores, bytes) of one pod's CPU and memory requests; None for what is not recorded."""
    cpu = quantity(res.get("cpu"))
    mem = quantity(res.get("memory"))
    return cpu, None if mem is None else int(mem)


def request_history(di: DiagnosisInput, job: EntityState) -> list[dict[str, Any]]:
    """Each distinct request the job had (pods × GPUs per pod), oldest first, with who changed it."""
    versions = di.history.get(job.ref) or [job]
    out: list[dict[str, Any]] = []
    for v in versions:
        st = v.state
        pods = int(st.get("pods") or 1)
        per = st.get("gpus_per_pod")
        total = int(st.get("gpus_total") or st.get("gpus") or (pods * int(per or 0)))
        per = int(per) if per is not None else (total // pods if pods else total)
        if out and (out[-1]["pods"], out[-1]["gpus_per_pod"]) == (pods, per):
            continue
        actor = ""
        for c in di.changes:
            if c.entity == job.ref and v.valid_from and c.time == v.valid_from and c.actor:
                actor = c.actor
                break
        out.append(
            {
                "from": v.valid_from,
                "pods": pods,
                "gpus_per_pod": per,
                "gpus_total": total,
                "actor": actor,
                "image": st.get("image"),
            }
        )
    return out
