"""The schedulers' own words, in the formats they really use.

kube-scheduler (``FitError.Error()``): ``0/8 nodes are available: 2 Insufficient
nvidia.com/gpu, 6 node(s) had untolerated taint {nvidia.com/gpu: true}. preemption:
0/8 nodes are available: 2 No preemption victims found for incoming pod, 6
Preemption is not helpful for scheduling.`` -- reasons are "<count> <reason>"
strings sorted as strings, each part ends with ". ".

KAI Scheduler (pkg/scheduler/api: unschedule messages and ``TasksFitErrors``):
``no nodes with enough resources were found: 2 node(s) had untolerated taint(s). \\n
6 node(s) didn't have enough resources: GPUs.``, gang wrappers ``Resources were found
for 2 pods while 3 are required for gang scheduling. Additional pods cannot be
scheduled due to: …``, quota reasons ``OverLimit`` / ``NonPreemptibleOverQuota``.

Kueue (flavorassigner): ``couldn't assign flavors to pod set main: insufficient unused
quota for nvidia.com/gpu in flavor default-flavor, 8 more needed``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

KUEUE_FLAVOR = "default-flavor"
KUEUE_COHORT = "gpu-cohort"

# Per-node filter outcomes, in kube-scheduler's filter plugin order
# (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit).
UNSCHEDULABLE = "unschedulable"
TAINT = "taint"
SELECTOR = "selector"
INSUFFICIENT = "insufficient"
INSUFFICIENT_GPU_MEMORY = "insufficient-gpu-memory"  # a gpu-memory share larger than the GPU (KAI)
INSUFFICIENT_CPU = "insufficient-cpu"
INSUFFICIENT_MEMORY = "insufficient-memory"
INSUFFICIENT_MIG = "insufficient-mig"  # detail: the profile


def _per_node(reasons: list) -> list[list[tuple[str, Any]]]:
    """Each entry is one node: a (kind, detail) tuple, or a list of them when it failed on several resources."""
    return [list(r) if isinstance(r, list) else [r] for r in reasons]


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def taint_text(taint: dict[str, str]) -> str:
    return "{" + f"{taint['key']}: {taint.get('value', '')}" + "}"


def kube_fit_message(
    total_nodes: int, reasons: list[tuple[str, dict[str, str] | None]], preemptible_victims: int = 0
) -> str:
    """kube-scheduler's FitError text for one pod, with the preemption post-filter part.

    ``reasons`` has one (kind, taint) per node that failed. Nodes failing on
    resources are "No preemption victims found" unless ``preemptible_victims``
    of them could be freed by preemption (then they do not appear here at all,
    as the scheduler would nominate a node instead).
    """
    hist: Counter[str] = Counter()
    post: Counter[str] = Counter()
    for node_reasons in _per_node(reasons):
        for kind, taint in node_reasons:
            if kind == UNSCHEDULABLE:
                hist["node(s) were unschedulable"] += 1
            elif kind == TAINT:
                hist[f"node(s) had untolerated taint {taint_text(taint or {})}"] += 1
            elif kind == SELECTOR:
                hist["node(s) didn't match Pod's node affinity/selector"] += 1
            elif kind == INSUFFICIENT_CPU:
                hist["Insufficient cpu"] += 1
            elif kind == INSUFFICIENT_MEMORY:
                hist["Insufficient memory"] += 1
            elif kind == INSUFFICIENT_MIG:
                hist[f"Insufficient nvidia.com/mig-{taint}"] += 1
            else:
                hist["Insufficient nvidia.com/gpu"] += 1
        # The post-filter says one thing per node: resources could be freed by preemption, filters cannot.
        if any(k in (UNSCHEDULABLE, TAINT, SELECTOR) for k, _t in node_reasons):
            post["Preemption is not helpful for scheduling"] += 1
        else:
            post["No preemption victims found for incoming pod"] += 1
    head = f"0/{total_nodes} nodes are available"
    parts = sorted(f"{n} {r}" for r, n in hist.items())
    msg = head + (": " + ", ".join(parts) if parts else "") + "."
    if post:
        pparts = sorted(f"{n} {r}" for r, n in post.items())
        msg += f" preemption: {head}: " + ", ".join(pparts) + "."
    return msg


def kai_fit_reasons(reasons: list[tuple[str, dict[str, str] | None]]) -> str:
    hist: Counter[str] = Counter()
    for node_reasons in _per_node(reasons):
        for kind, detail in node_reasons:
            if kind == INSUFFICIENT_MIG:
                hist[f"node(s) didn't have enough of mig profile: nvidia.com/mig-{detail}"] += 1
                continue
            hist[
                {
                    UNSCHEDULABLE: "node(s) were unschedulable",
                    TAINT: "node(s) had untolerated taint(s)",
                    SELECTOR: "node(s) didn't match Pod's node affinity/selector",
                    INSUFFICIENT: "node(s) didn't have enough resources: GPUs",
                    INSUFFICIENT_GPU_MEMORY: "node(s) didn't have enough resources: GPU memory",
                    INSUFFICIENT_CPU: "node(s) didn't have enough resources: CPU cores",
                    INSUFFICIENT_MEMORY: "node(s) didn't have enough resources: memory",
                }[kind]
            ] += 1
    parts = sorted(f"{n} {r}" for r, n in hist.items())
    return "no nodes with enough resources were found: " + ". \n".join(parts) + "."


def kai_fit_message(namespace: str, first_pod: str, placed: int, required: int, reasons: str) -> str:
    """The PodGroup UnschedulableOnNodePool message for a gang that does not fit on nodes."""
    if placed and required > 1:
        return (
            f"PodSchedulingErrors: Resources were found for {placed} pods while {required} are required for gang "
            f"scheduling. Additional pods cannot be scheduled due to: {reasons}."
        )
    return f"PodSchedulingErrors: Resources were not found for pod {namespace}/{first_pod} due to: {reasons}."


def kai_over_limit(queue: str, limit: float, used: float, requested: float) -> str:
    return (
        f"{queue} quota has reached the allowable limit of GPUs. Limit is {_fmt_num(limit)} GPUs, currently "
        f"{_fmt_num(used)} GPUs allocated and workload requested {_fmt_num(requested)} GPUs"
    )


def kai_over_limit_resource(queue: str, resource: str, limit: int, used: int, requested: int) -> str:
    """KAI's OverLimit for a queue's CPU (millicores, said in cores) or memory (bytes, said in GB)."""
    if resource == "cpu":
        name, unit, scale = "CPU cores", "cores", 1000
    else:
        name, unit, scale = "memory", "GB", 10**9
    return (
        f"{queue} quota has reached the allowable limit of {name}. Limit is {_fmt_num(limit / scale)} {unit}, "
        f"currently {_fmt_num(used / scale)} {unit} allocated and workload requested {_fmt_num(requested / scale)} "
        f"{unit}"
    )


def kai_non_preemptible_over_quota(queue: str, requested: float, deserved: float, used: float) -> str:
    return (
        f"Non-preemptible workload is over quota. Workload requested {_fmt_num(requested)} GPUs, but {queue} "
        f"quota is {_fmt_num(deserved)} GPUs, while {_fmt_num(used)} GPUs are already allocated for "
        f"non-preemptible pods. Use a preemptible workload to go over quota."
    )


def kai_reclaim_message(ns: str, pod: str, job_ns: str, podgroup: str) -> str:
    return f"Pod {ns}/{pod} was preempted by workload {job_ns}/{podgroup}."


def kai_consolidate_message(ns: str, pod: str) -> str:
    return (
        f"Pod {ns}/{pod} was preempted and rescheduled due to bin packing (resource consolidation) procedure"
    )


def kai_preempt_message(ns: str, pod: str, job_ns: str, podgroup: str) -> str:
    return f"Pod {ns}/{pod} was preempted by higher priority workload {job_ns}/{podgroup}"


def _kai_resources(gpus: float, cpu_cores: float = 0, memory_gb: float = 0) -> str:
    """KAI's ResourceRequirements.String(): ``GPU: 2, CPU: 16 (cores), memory: 137.44 (GB)``."""
    return f"GPU: {_fmt_num(round(gpus, 2))}, CPU: {_fmt_num(cpu_cores)} (cores), memory: {_fmt_num(round(memory_gb, 2))} (GB)"


def kai_queue_details(queue: str, allocated: float, quota: float, fair_share: float, priority: int) -> str:
    """One queue's line in a reclaim event. Pods request 8 cores and 64 GiB per GPU (as the servers render them);
    queues have no CPU or memory quota."""
    uses = _kai_resources(allocated, 8 * allocated, allocated * 64 * 2**30 / 1e9)
    return (
        f"{queue} uses <{uses}> with a quota of <{_kai_resources(quota)}>, "
        f"fair-share of <{_kai_resources(fair_share)}> and queue priority of <{priority}>."
    )


def kueue_insufficient(more_needed: int) -> str:
    return (
        f"couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        f"{KUEUE_FLAVOR}, {more_needed} more needed"
    )


def kueue_preempted(preemptor_uid: str, job_uid: str, reclamation: bool) -> str:
    why = "reclamation within the cohort" if reclamation else "prioritization in the ClusterQueue"
    return f"Preempted to accommodate a workload (UID: {preemptor_uid}, JobUID: {job_uid}) due to {why}"
